"""Remote embedding providers over HTTP (stdlib ``urllib``, no extra dependency).

* ``openai``: any OpenAI-compatible ``POST /v1/embeddings`` server: OpenAI itself, and local servers such as Ollama
  (``http://127.0.0.1:11434/v1``), LM Studio (``http://127.0.0.1:1234/v1``) and vLLM (``http://HOST:8000/v1``);
* ``gemini``: Google's ``models/{model}:batchEmbedContents`` with ``RETRIEVAL_DOCUMENT``/``RETRIEVAL_QUERY`` task types;
* ``voyage``: Voyage AI's ``/v1/embeddings`` with ``input_type`` document/query.

Keys come from the environment: the variable named by ``embedding.api_key_env``, else ``OPENAI_API_KEY``,
``GEMINI_API_KEY`` (or ``GOOGLE_API_KEY``), ``VOYAGE_API_KEY``. The key is sent in a header only (never in a URL), is
scrubbed from error messages, and never enters ``provider_key``, ``describe()`` or ``repr()``.

Requests are bounded: at most ``batch_size`` texts and ``max_batch_chars`` characters each. 429 and 5xx answers,
timeouts and connection errors are retried up to ``max_retries`` times with exponential backoff and jitter
(``Retry-After`` is honoured, capped); other 4xx answers fail at once with the server's message.

Example:
    >>> cfg = EmbeddingConfig(provider="openai", base_url="http://127.0.0.1:11434/v1", model="nomic-embed-text")
    >>> emb = create("openai", cfg)                                                       # doctest: +SKIP
    >>> emb.embed_query("retry backoff").shape                                            # doctest: +SKIP
    (768,)
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Callable, Sequence

import numpy as np

from hybridmem.config import DEFAULT_BATCH_SIZE, DEFAULT_MODEL, EmbeddingConfig
from hybridmem.embeddings.base import Embedder
from hybridmem.errors import ProviderError

DEFAULT_URLS = {
    "openai": "https://api.openai.com/v1",
    "gemini": "https://generativelanguage.googleapis.com/v1beta",
    "voyage": "https://api.voyageai.com/v1",
}
DEFAULT_KEY_ENVS = {"openai": ("OPENAI_API_KEY",), "gemini": ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
                    "voyage": ("VOYAGE_API_KEY",)}
DEFAULT_MODELS = {"openai": "text-embedding-3-small", "gemini": "text-embedding-004", "voyage": "voyage-3-lite"}
_LOOPBACK = {"127.0.0.1", "localhost", "::1"}


class HttpClient:
    """JSON POST with bounded retries: exponential backoff with jitter on 429, 5xx, timeouts and connection errors.

    Args:
        provider: name used in error messages.
        timeout_s: per-request timeout.
        max_retries: retries after the first attempt (so at most ``max_retries + 1`` requests per call).
        backoff_s: first delay; attempt ``n`` waits ``backoff_s * 2**n`` scaled by a random factor in [0.5, 1].
        max_backoff_s: cap on any delay, ``Retry-After`` included.
        secret: scrubbed from every error message.
    """

    def __init__(self, provider: str, timeout_s: float = 30.0, max_retries: int = 4, backoff_s: float = 0.5,
                 max_backoff_s: float = 8.0, secret: str = "", sleep: Callable[[float], None] = time.sleep,
                 rng: Callable[[], float] = random.random) -> None:
        self.provider = provider
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self._secret = secret
        self._sleep = sleep
        self._rng = rng
        self.requests = 0
        self.retries = 0

    def __repr__(self) -> str:
        return f"HttpClient(provider={self.provider!r}, timeout_s={self.timeout_s}, max_retries={self.max_retries})"

    def _scrub(self, text: str) -> str:
        return text.replace(self._secret, "***") if self._secret else text

    def delay(self, attempt: int, retry_after: str | None = None) -> float:
        """Seconds to wait before retry number ``attempt + 1``."""
        if retry_after:
            try:
                return min(self.max_backoff_s, max(0.0, float(retry_after)))
            except ValueError:
                pass
        base = min(self.max_backoff_s, self.backoff_s * (2 ** attempt))
        return base * (0.5 + 0.5 * self._rng())

    def post_json(self, url: str, body: dict[str, Any], headers: dict[str, str],
                  max_retries: int | None = None) -> Any:
        """POST ``body`` as JSON to ``url``; the decoded JSON answer, or ProviderError."""
        retries = self.max_retries if max_retries is None else max_retries
        data = json.dumps(body).encode("utf-8")
        host = urllib.parse.urlsplit(url).hostname or ""
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({})) if host in _LOOPBACK else \
            urllib.request.build_opener()
        last = ""
        for attempt in range(retries + 1):
            req = urllib.request.Request(url, data=data, method="POST",
                                         headers={"Content-Type": "application/json", "Accept": "application/json",
                                                  **headers})
            retry_after = None
            self.requests += 1
            try:
                with opener.open(req, timeout=self.timeout_s) as resp:
                    raw = resp.read()
                try:
                    return json.loads(raw)
                except ValueError:
                    raise ProviderError(f"{self.provider} returned invalid JSON from {url}: "
                                        f"{self._scrub(raw[:200].decode('utf-8', 'replace'))!r}") from None
            except urllib.error.HTTPError as exc:
                detail = self._scrub(exc.read()[:300].decode("utf-8", "replace").strip())
                last = f"HTTP {exc.code} {detail}".strip()
                if exc.code != 429 and exc.code < 500:
                    raise ProviderError(f"{self.provider} rejected the request to {url}: {last}") from None
                retry_after = exc.headers.get("Retry-After") if exc.headers else None
            except (TimeoutError, socket.timeout):
                last = f"timed out after {self.timeout_s:g}s"
            except urllib.error.URLError as exc:
                reason = exc.reason
                last = f"timed out after {self.timeout_s:g}s" if isinstance(reason, (TimeoutError, socket.timeout)) \
                    else f"cannot connect ({self._scrub(str(reason))})"
            except (ConnectionError, OSError) as exc:
                last = f"connection failed ({self._scrub(str(exc))})"
            if attempt < retries:
                self.retries += 1
                self._sleep(self.delay(attempt, retry_after))
        raise ProviderError(f"{self.provider} embedding request to {url} failed after {retries + 1} attempt(s): {last}")


class RemoteEmbedder(Embedder):
    """Shared logic of the HTTP providers: size-bounded batches, dims discovery, response validation."""

    name = "remote"

    def __init__(self, model: str, base_url: str, api_key: str = "", dims: int = 0,
                 batch_size: int = DEFAULT_BATCH_SIZE, max_batch_chars: int = 200_000, timeout_s: float = 30.0, max_retries: int = 4,
                 client: HttpClient | None = None) -> None:
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.batch_size = batch_size
        self.max_batch_chars = max(1, max_batch_chars)
        self._api_key = api_key
        self._dims = dims
        self._requested_dims = dims
        self.client = client or HttpClient(self.name, timeout_s, max_retries, secret=api_key)
        if api_key and not self.client._secret:  # noqa: SLF001
            self.client._secret = api_key  # noqa: SLF001

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r}, base_url={self.base_url!r}, dims={self._dims})"

    @property
    def provider_key(self) -> str:
        """A hash of what changes the vectors (URL, model, requested dims); never the key."""
        blob = json.dumps({"provider": self.name, "url": self.base_url, "model": self.model,
                           "dims": self._requested_dims}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    @property
    def dims(self) -> int:
        if self._dims <= 0:
            self.probe()
        return self._dims

    def probe(self, max_retries: int = 1) -> int:
        """Embed one short text to learn the dimensionality (and check the URL, model and key)."""
        vecs = self._request(["dimension probe"], False, max_retries)
        self._dims = len(vecs[0])
        return self._dims

    def _batches(self, texts: Sequence[str]) -> list[list[str]]:
        out: list[list[str]] = []
        cur: list[str] = []
        size = 0
        for t in texts:
            t = t[: self.max_batch_chars]
            if cur and (size + len(t) > self.max_batch_chars or len(cur) >= self.batch_size):
                out.append(cur)
                cur, size = [], 0
            cur.append(t)
            size += len(t)
        if cur:
            out.append(cur)
        return out

    def embed_batch(self, texts: Sequence[str], is_query: bool = False) -> np.ndarray:
        rows: list[list[float]] = []
        for batch in self._batches(texts):
            vecs = self._request(batch, is_query, None)
            if len(vecs) != len(batch):
                raise ProviderError(f"{self.name} returned {len(vecs)} embeddings for {len(batch)} texts")
            rows += vecs
        if not rows:
            return np.zeros((0, self._dims), dtype=np.float32)
        lengths = {len(r) for r in rows}
        if len(lengths) != 1 or (self._dims and lengths != {self._dims}):
            raise ProviderError(f"{self.name} returned vectors of {sorted(lengths)} dims, expected {self._dims}")
        self._dims = lengths.pop()
        return np.asarray(rows, dtype=np.float32)

    def _request(self, texts: list[str], is_query: bool, max_retries: int | None) -> list[list[float]]:
        raise NotImplementedError

    @staticmethod
    def _vectors(payload: Any, key: str, provider: str) -> list[list[float]]:
        try:
            items = payload[key]
            if key == "data":
                items = sorted(items, key=lambda d: d.get("index", 0))
                return [list(map(float, d["embedding"])) for d in items]
            return [list(map(float, d["values"])) for d in items]
        except (KeyError, TypeError, ValueError, AttributeError):
            raise ProviderError(f"{provider} answered without {key!r} embeddings: {str(payload)[:200]!r}") from None


class OpenAIEmbedder(RemoteEmbedder):
    """OpenAI-compatible ``/v1/embeddings`` (OpenAI, Ollama, LM Studio, vLLM)."""

    name = "openai"

    @property
    def url(self) -> str:
        base = self.base_url
        if base.endswith("/embeddings"):
            return base
        return f"{base}/embeddings" if base.endswith("/v1") else f"{base}/v1/embeddings"

    def _request(self, texts: list[str], is_query: bool, max_retries: int | None) -> list[list[float]]:
        body: dict[str, Any] = {"model": self.model, "input": texts, "encoding_format": "float"}
        if self._requested_dims:
            body["dimensions"] = self._requested_dims
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        return self._vectors(self.client.post_json(self.url, body, headers, max_retries), "data", self.name)


class GeminiEmbedder(RemoteEmbedder):
    """Google Gemini ``batchEmbedContents``; the key goes in ``x-goog-api-key``, not the URL."""

    name = "gemini"

    def _request(self, texts: list[str], is_query: bool, max_retries: int | None) -> list[list[float]]:
        model = self.model if self.model.startswith("models/") else f"models/{self.model}"
        task = "RETRIEVAL_QUERY" if is_query else "RETRIEVAL_DOCUMENT"
        reqs = []
        for t in texts:
            r: dict[str, Any] = {"model": model, "content": {"parts": [{"text": t}]}, "taskType": task}
            if self._requested_dims:
                r["outputDimensionality"] = self._requested_dims
            reqs.append(r)
        url = f"{self.base_url}/{model}:batchEmbedContents"
        payload = self.client.post_json(url, {"requests": reqs}, {"x-goog-api-key": self._api_key}, max_retries)
        return self._vectors(payload, "embeddings", self.name)


class VoyageEmbedder(RemoteEmbedder):
    """Voyage AI ``/v1/embeddings`` with ``input_type`` query or document."""

    name = "voyage"

    def _request(self, texts: list[str], is_query: bool, max_retries: int | None) -> list[list[float]]:
        body: dict[str, Any] = {"model": self.model, "input": texts, "input_type": "query" if is_query else "document"}
        if self._requested_dims:
            body["output_dimension"] = self._requested_dims
        headers = {"Authorization": f"Bearer {self._api_key}"}
        return self._vectors(self.client.post_json(f"{self.base_url}/embeddings", body, headers, max_retries),
                             "data", self.name)


PROVIDERS: dict[str, type[RemoteEmbedder]] = {"openai": OpenAIEmbedder, "gemini": GeminiEmbedder,
                                              "voyage": VoyageEmbedder}


def api_key(name: str, cfg: EmbeddingConfig) -> str:
    """The key from the environment ('' when a custom OpenAI-compatible server needs none)."""
    if cfg.api_key_env:
        value = os.environ.get(cfg.api_key_env, "")
        if not value:
            raise ProviderError(f"environment variable {cfg.api_key_env} (embedding.api_key_env) is not set")
        return value
    for env in DEFAULT_KEY_ENVS.get(name, ()):
        if os.environ.get(env):
            return os.environ[env]
    if name == "openai" and cfg.base_url:
        return ""  # a local OpenAI-compatible server (Ollama, LM Studio, vLLM) usually needs no key
    envs = " or ".join(DEFAULT_KEY_ENVS.get(name, ()))
    raise ProviderError(f"no API key for {name}: set {envs} (or name another variable in embedding.api_key_env)")


def create(name: str, cfg: EmbeddingConfig, probe: bool = True) -> RemoteEmbedder:
    """The ``name`` provider configured from ``cfg``; with ``probe``, one request checks it works (and its dims)."""
    if name not in PROVIDERS:
        raise ProviderError(f"unknown embedding provider {name!r}: expected one of local, {', '.join(PROVIDERS)}")
    key = api_key(name, cfg)
    model = cfg.model
    if model in ("", DEFAULT_MODEL) and not (name == "openai" and cfg.base_url):
        model = DEFAULT_MODELS[name]  # "" (the default) or the local model's name: this provider's own model
    model = model or DEFAULT_MODEL  # an OpenAI-compatible server is asked for the model the local provider uses
    emb = PROVIDERS[name](model, cfg.base_url or DEFAULT_URLS[name], key, dims=cfg.dims, batch_size=cfg.batch_size,
                          max_batch_chars=cfg.max_batch_chars, timeout_s=cfg.timeout_s, max_retries=cfg.max_retries)
    if probe and cfg.dims == 0:
        emb.probe()
    return emb
