"""A real HTTP server on 127.0.0.1 that speaks the OpenAI, Voyage and Gemini embedding APIs, for tests.

Vectors come from :class:`~hybridmem.embeddings.fake.HashEmbedder`, so texts sharing words get similar vectors and a
search through the remote provider ranks sensibly. ``script`` lists what to do for the next requests: an HTTP status
(``429``, ``500``...), ``("status", code, retry_after)``, ``"timeout"`` (answer after ``slow_s``) or ``"ok"``.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from hybridmem.embeddings.fake import HashEmbedder


class EmbedServer:
    def __init__(self, dims: int = 16, script: list[Any] | None = None, slow_s: float = 1.0) -> None:
        self.dims = dims
        self.script = list(script or [])
        self.slow_s = slow_s
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._emb = HashEmbedder(dims=dims)
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                with server._lock:
                    server.requests.append({"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()}, "body": body})
                    action = server.script.pop(0) if server.script else "ok"
                if action == "timeout":
                    time.sleep(server.slow_s)
                    action = "ok"
                if isinstance(action, int):
                    action = ("status", action, None)
                if isinstance(action, tuple):
                    _, code, retry_after = action
                    payload = json.dumps({"error": {"message": f"scripted {code}"}}).encode()
                    self.send_response(code)
                    if retry_after is not None:
                        self.send_header("Retry-After", str(retry_after))
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                    return
                payload = json.dumps(server.answer(self.path, body)).encode()
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    def vectors(self, texts: list[str]) -> list[list[float]]:
        return [[float(x) for x in row] for row in self._emb.embed_batch(texts)]

    def answer(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        if path.endswith(":batchEmbedContents"):
            texts = [r["content"]["parts"][0]["text"] for r in body["requests"]]
            return {"embeddings": [{"values": v} for v in self.vectors(texts)]}
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        data = [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(self.vectors(texts))]
        return {"object": "list", "data": data[::-1], "model": body.get("model")}  # out of order on purpose

    def __enter__(self) -> "EmbedServer":
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
