"""``hybridmem.serve.http``: the listening socket, the bind rules."""

from __future__ import annotations

import asyncio
import socket

import pytest

from hybridmem.errors import ConfigError
from hybridmem.serve.http import check_bind, listen_socket, parse_bind


async def _accepted_nodelay(sock: socket.socket) -> int:
    """TCP_NODELAY of a connection accepted on ``sock`` the way uvicorn accepts (``loop.create_server(sock=...)``)."""
    loop = asyncio.get_running_loop()
    seen: asyncio.Future[int] = loop.create_future()

    class Probe(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            conn = transport.get_extra_info("socket")
            seen.set_result(conn.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            transport.close()

    server = await loop.create_server(Probe, sock=sock)
    try:
        _, writer = await asyncio.open_connection(*sock.getsockname()[:2])
        value = await asyncio.wait_for(seen, 5)
        writer.close()
        return value
    finally:
        server.close()
        await server.wait_closed()


def test_accepted_connections_get_tcp_nodelay() -> None:
    # Without it a keep-alive client waited ~40 ms on every call (Nagle holding the body behind the head, the
    # client delaying its ACK); asyncio sets the option only where the listener's proto says TCP.
    sock = listen_socket("127.0.0.1", 0)
    assert asyncio.run(_accepted_nodelay(sock)) != 0
    assert sock.proto == socket.IPPROTO_TCP


def test_listen_socket_refuses_a_port_in_use() -> None:
    taken = listen_socket("127.0.0.1", 0)
    port = taken.getsockname()[1]
    try:  # SO_REUSEADDR does not let a second listener share a port that is listening
        with pytest.raises(ConfigError, match=f"cannot listen on 127.0.0.1:{port}"):
            listen_socket("127.0.0.1", port)
    finally:
        taken.close()


def test_parse_bind() -> None:
    assert parse_bind("8765") == ("127.0.0.1", 8765)
    assert parse_bind("0.0.0.0:8765") == ("0.0.0.0", 8765)
    assert parse_bind("[::1]:8765") == ("::1", 8765)
    assert parse_bind("", "127.0.0.1", 9100) == ("127.0.0.1", 9100)  # --http alone: serve.http_host, serve.http_port
    with pytest.raises(ConfigError, match="expects \\[HOST:\\]PORT"):
        parse_bind("localhost:http")


def test_check_bind_needs_a_token_off_loopback() -> None:
    check_bind("127.0.0.1", None)
    check_bind("0.0.0.0", "s3cret")
    with pytest.raises(ConfigError, match="without a bearer token"):
        check_bind("0.0.0.0", None)


def test_split_host_and_local_addresses() -> None:
    from hybridmem.serve.http import is_local_address, split_host

    assert split_host("VM:8765") == ("vm", 8765) and split_host("[::1]:80") == ("::1", 80)
    assert split_host("example.org") == ("example.org", None) and split_host("a:99999") == ("", None)
    assert split_host("a:b") == ("", None)
    assert is_local_address("127.0.0.2") and not is_local_address("192.0.2.1")  # TEST-NET-1: never ours
