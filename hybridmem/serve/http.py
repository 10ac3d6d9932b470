"""Streamable HTTP for ``hybridmem mcp --http [HOST:]PORT``.

* Binds 127.0.0.1 unless told otherwise. A non-loopback address is refused unless a bearer token is set
  (``--token`` or ``HYBRIDMEM_MCP_TOKEN``); with a token every request must carry ``Authorization: Bearer <token>``
  (the scheme in any case, the token compared in constant time), wherever the server listens.
* ``Host`` and ``Origin`` are validated as the MCP spec asks for local servers (DNS-rebinding protection,
  :class:`HostCheck`): loopback names on any port; on the bound port the bound address (for ``0.0.0.0``: this
  machine's addresses and name) and the names given with ``--allow-host``.
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


def parse_bind(spec: str, default_host: str = "127.0.0.1", default_port: int = 8765) -> tuple[str, int]:
    """``"8765"`` -> ``("127.0.0.1", 8765)``; ``"0.0.0.0:8765"``, ``"[::1]:8765"`` -> host and port; ``""`` (``--http``
    alone) -> the defaults (``serve.http_host``, ``serve.http_port``)."""
    if not spec:
        return default_host, default_port
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
    """ASGI middleware: 401 unless ``Authorization: Bearer <token>`` (the scheme in any case, RFC 9110 11.1; the
    token compared in constant time)."""

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self._expected = token.encode()

    def accepts(self, header: bytes) -> bool:
        scheme, _, given = header.strip().partition(b" ")
        return scheme.lower() == b"bearer" and hmac.compare_digest(given.strip(), self._expected)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and not self.accepts(dict(scope.get("headers") or ()).get(b"authorization", b"")):
            await _refuse(send, 401, b"missing or wrong bearer token\n", [(b"www-authenticate", b"Bearer")])
            return
        await self.app(scope, receive, send)


class HostCheck:
    """ASGI middleware against DNS rebinding (the MCP spec's rule for local servers): 421 unless ``Host`` names this
    server, 403 unless ``Origin`` (when sent) does too.

    Accepted, on any port: loopback names and addresses (``localhost``, ``127.0.0.0/8``, ``::1``). On the bound port
    (or with no port): the bound address; when bound to ``0.0.0.0`` / ``::``, every address of this machine's
    interfaces (checked by binding to it, so an address that is not ours is refused) and its host name; and each name
    given with ``--allow-host``. A rebinding page's Host is the attacker's domain, which is none of these.
    """

    def __init__(self, app: Any, host: str, port: int, allow_hosts: tuple[str, ...] = ()) -> None:
        self.app = app
        self.port = port
        self.wildcard = host in ("0.0.0.0", "::", "")
        names = {host.lower(), *(h.strip().lower().strip("[]") for h in allow_hosts if h.strip())}
        if self.wildcard:
            names |= {socket.gethostname().lower(), socket.getfqdn().lower()}
        self.names = frozenset(names)
        self._local: dict[str, bool] = {}

    def allowed(self, hostport: str) -> bool:
        """Whether ``Host`` (``name[:port]``, ``[v6]:port``) names this server."""
        name, port = split_host(hostport)
        if not name:
            return False
        if is_loopback(name):
            return True
        if port is not None and port != self.port:
            return False
        return name in self.names or (self.wildcard and self._is_local_address(name))

    def _is_local_address(self, name: str) -> bool:
        try:
            ipaddress.ip_address(name)
        except ValueError:
            return False
        if name not in self._local:
            if len(self._local) > 1024:
                self._local.clear()
            self._local[name] = is_local_address(name)
        return self._local[name]

    def origin_allowed(self, origin: str) -> bool:
        scheme, sep, rest = origin.partition("://")
        return bool(sep) and scheme.lower() in ("http", "https") and self.allowed(rest.split("/", 1)[0])

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = dict(scope.get("headers") or ())
            if not self.allowed(headers.get(b"host", b"").decode("latin-1")):
                await _refuse(send, 421, b"Invalid Host header\n")
                return
            origin = headers.get(b"origin")
            if origin is not None and not self.origin_allowed(origin.decode("latin-1")):
                await _refuse(send, 403, b"Invalid Origin header\n")
                return
        await self.app(scope, receive, send)


async def _refuse(send: Any, status: int, body: bytes, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"text/plain"), *(headers or [])]})
    await send({"type": "http.response.body", "body": body})


def split_host(hostport: str) -> tuple[str, int | None]:
    """``"Vm:8765"`` -> ``("vm", 8765)``; ``"[::1]:80"`` -> ``("::1", 80)``; a bad port -> ``("", None)``.

    Example:
        >>> split_host("Vm:8765"), split_host("[::1]:80"), split_host("localhost:\u00b2"), split_host("localhost")
        (('vm', 8765), ('::1', 80), ('', None), ('localhost', None))
    """
    text = hostport.strip().lower()
    if text.startswith("["):
        name, _, rest = text[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
    elif text.count(":") == 1:
        name, port = text.split(":")
    else:
        name, port = text, ""
    if not port:
        return name, None
    ascii_digits = port.isascii() and port.isdigit()  # "²".isdigit() holds, and int("²") raises
    return (name, int(port)) if ascii_digits and int(port) <= 65535 else ("", None)


def is_local_address(address: str) -> bool:
    """Whether ``address`` belongs to one of this machine's interfaces: binding to it succeeds only then."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.bind((address, 0))
        return True
    except OSError:
        return False


def build_app(server: Any, host: str, port: int, token: str | None, allow_hosts: tuple[str, ...] = ()) -> Any:
    """The Starlette app of ``server`` behind :class:`HostCheck` and, given a token, :class:`BearerAuth`. ``port`` is
    the bound port (0 already resolved)."""
    from mcp.server.transport_security import TransportSecuritySettings

    # Host and Origin are checked by HostCheck, which knows the bound port and this machine's addresses.
    security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    app = HostCheck(server.streamable_http_app(transport_security=security, host=host, json_response=True),
                    host, port, allow_hosts)
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


def _timed_protocol(limit_s: float) -> type:
    """uvicorn's h11 protocol, closing a connection whose request has not arrived whole within ``limit_s`` of the
    connection or of the last reply on it (``serve.request_timeout_s``)
    (uvicorn times out only an idle keep-alive connection, from its first byte on: a client that sends a request's
    head or body a byte at a time, or a connection that sends nothing, held a descriptor for ever, token or not)."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class TimedRequests(H11Protocol):  # type: ignore[misc]
        _request_timer: Any = None

        def _arm(self) -> None:
            self._disarm()
            self._request_timer = self.loop.call_later(limit_s, self._too_slow)

        def _disarm(self) -> None:
            if self._request_timer is not None:
                self._request_timer.cancel()
                self._request_timer = None

        def _whole(self) -> bool:  # DONE, or MUST_CLOSE after a request sent with Connection: close or HTTP/1.0
            return self.conn.their_state not in (h11.IDLE, h11.SEND_BODY)

        def _too_slow(self) -> None:
            self._request_timer = None
            if not self._whole():
                self.transport.close()

        def connection_made(self, transport: Any) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def handle_events(self) -> None:
            super().handle_events()
            if self._whole():  # the request is whole: the reply may take as long as it takes
                self._disarm()

        def on_response_complete(self) -> None:
            super().on_response_complete()  # may start a pipelined request already whole: then nothing to time
            if not self.transport.is_closing() and not self._whole():
                self._arm()  # the next request on this connection

    return TimedRequests


def _more_descriptors() -> None:
    """Raise this process's open-file limit to its hard limit (at most 65,536): each connection holds a descriptor,
    and the usual soft limit of 1,024 (256 on some systems) is few for a server many agents share."""
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        want = 65536 if hard == resource.RLIM_INFINITY else min(hard, 65536)
        if soft != resource.RLIM_INFINITY and soft < want:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    except (ImportError, ValueError, OSError):  # Windows, or a limit this process may not raise
        pass


def serve_http(server: Any, host: str, port: int, token: str | None, ready: Any = None,
               allow_hosts: tuple[str, ...] = (), request_timeout_s: float = 30.0) -> None:
    """Serve until interrupted (uvicorn); ``ready`` is called with the bound port once listening; a request that has
    not arrived whole ``request_timeout_s`` after its connection (or the last reply on it) is dropped."""
    import anyio
    import uvicorn

    check_bind(host, token)
    sock = listen_socket(host, port)
    port = sock.getsockname()[1]  # port 0 resolved: Host checks need the real one
    app = build_app(server, host, port, token, allow_hosts)
    _more_descriptors()
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on",
                            http=_timed_protocol(request_timeout_s), ws="none")
    userver = uvicorn.Server(config)

    async def main() -> None:
        if ready is not None:
            ready(sock.getsockname()[1])
        await userver.serve(sockets=[sock])

    anyio.run(main)
