"""Streamable HTTP for ``hybridmem mcp --http [HOST:]PORT``.

* Binds 127.0.0.1 unless told otherwise. A non-loopback address is refused unless a bearer token is set
  (``--token`` or ``HYBRIDMEM_MCP_TOKEN``); with a token every request must carry ``Authorization: Bearer <token>``
  (compared in constant time), wherever the server listens.
* ``Host`` and ``Origin`` are validated as the MCP spec asks for local servers (DNS-rebinding protection, the SDK's
  own check): loopback names on any port, plus the bound host itself.
* Accepted connections get ``TCP_NODELAY`` (see :func:`listen_socket`); without it each warm call waited ~40 ms.

Example:
    $ hybridmem mcp ws --http 8765                       # http://127.0.0.1:8765/mcp
    $ HYBRIDMEM_MCP_TOKEN=s3cret hybridmem mcp ws --http 0.0.0.0:8765
"""

from __future__ import annotations

import hmac
import ipaddress
import socket
from typing import Any

from hybridmem.errors import ConfigError

TOKEN_ENV = "HYBRIDMEM_MCP_TOKEN"
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")


def parse_bind(spec: str, default_host: str = "127.0.0.1") -> tuple[str, int]:
    """``"8765"`` -> ``("127.0.0.1", 8765)``; ``"0.0.0.0:8765"``, ``"[::1]:8765"`` -> host and port."""
    host, _, port = spec.rpartition(":")
    host = host.strip("[]") or default_host
    try:
        number = int(port)
    except ValueError:
        raise ConfigError(f"--http expects [HOST:]PORT, got {spec!r}") from None
    if not 0 <= number <= 65535:
        raise ConfigError(f"--http port must be from 0 to 65535, got {number}")
    return host, number


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_bind(host: str, token: str | None) -> None:
    """ConfigError when ``host`` is not loopback and there is no token."""
    if not is_loopback(host) and not token:
        raise ConfigError(f"refusing to serve memory on {host} without a bearer token: pass --token or set "
                          f"{TOKEN_ENV} (or bind 127.0.0.1)")


class BearerAuth:
    """ASGI middleware: 401 unless ``Authorization: Bearer <token>``."""

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            given = dict(scope.get("headers") or ()).get(b"authorization", b"")
            if not hmac.compare_digest(given, self._expected):
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"content-type", b"text/plain"), (b"www-authenticate", b"Bearer")]})
                await send({"type": "http.response.body", "body": b"missing or wrong bearer token\n"})
                return
        await self.app(scope, receive, send)


def build_app(server: Any, host: str, port: int, token: str | None) -> Any:
    """The Starlette app of ``server`` with Host/Origin validation and, given a token, bearer auth."""
    from mcp.server.transport_security import TransportSecuritySettings

    hosts = [f"{h}:*" for h in ("127.0.0.1", "localhost", "[::1]")]
    origins = [f"http://{h}:*" for h in ("127.0.0.1", "localhost", "[::1]")]
    if not is_loopback(host):
        names = {host} | ({socket.gethostname()} if host in ("0.0.0.0", "::") else set())
        for name in names:
            shown = f"[{name}]" if ":" in name else name
            hosts += [f"{shown}:{port}", shown]
            origins += [f"http://{shown}:{port}", f"https://{shown}:{port}"]
    security = TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=hosts,
                                         allowed_origins=origins)
    app = server.streamable_http_app(transport_security=security, host=host, json_response=True)
    return BearerAuth(app, token) if token else app


def listen_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` whose accepted connections get ``TCP_NODELAY``.

    The protocol is named (``IPPROTO_TCP``, not 0) because asyncio sets ``TCP_NODELAY`` only on accepted sockets
    whose ``proto`` says TCP, and an accepted socket inherits the listener's. Without it uvicorn writes a response's
    head and body as two segments, Nagle holds the body until the client acknowledges the head, and a keep-alive
    client (the SDK's, any httpx one) delays that acknowledgement by ~40 ms: every MCP call over HTTP paid it.
    """
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # inherited by accepted sockets on Linux too
    try:
        sock.bind((host, port))
        sock.listen(128)  # connections made before uvicorn accepts wait in the backlog
    except OSError as exc:
        sock.close()
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    return sock


def serve_http(server: Any, host: str, port: int, token: str | None, ready: Any = None) -> None:
    """Serve until interrupted (uvicorn); ``ready`` is called with the bound port once listening."""
    import anyio
    import uvicorn

    check_bind(host, token)
    app = build_app(server, host, port, token)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
    userver = uvicorn.Server(config)

    sock = listen_socket(host, port)

    async def main() -> None:
        if ready is not None:
            ready(sock.getsockname()[1])
        await userver.serve(sockets=[sock])

    anyio.run(main)
