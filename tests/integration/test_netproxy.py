"""The partition proxy itself: cuts hold traffic silently (timeouts, never resets) until healed."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from tritonmq.devtools.netproxy import Proxy
from tritonmq.devtools.zkserver import free_port

pytestmark = pytest.mark.integration

QUIET = 0.3  # how long "nothing arrives" is watched for


@pytest.fixture
def proxy() -> Iterator[Proxy]:
    """A proxy in front of an echo server."""
    server = socket.create_server(("127.0.0.1", 0))

    def echo(conn: socket.socket) -> None:
        with conn:
            while data := conn.recv(4096):
                conn.sendall(data)

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=echo, args=(conn,), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    with Proxy("127.0.0.1", server.getsockname()[1]) as p:
        yield p
    server.close()


def dial(p: Proxy, source: str) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", p.port), timeout=5, source_address=(source, 0))
    s.settimeout(QUIET)
    return s


def silent(s: socket.socket) -> bool:
    try:
        s.recv(10)
    except TimeoutError:
        return True
    return False


def test_cut_holds_matching_sources_until_healed(proxy: Proxy) -> None:
    a, b = dial(proxy, "127.0.0.11"), dial(proxy, "127.0.0.12")
    a.sendall(b"1")
    assert a.recv(10) == b"1"
    proxy.cut({"127.0.0.11"})
    a.sendall(b"2")
    assert silent(a), "an existing connection of a cut source still moved bytes"
    b.sendall(b"3")
    assert b.recv(10) == b"3", "a source that is not cut was held"
    late = dial(proxy, "127.0.0.11")  # accepted, then blackholed
    late.sendall(b"4")
    assert silent(late)
    proxy.heal()
    a.settimeout(5)
    late.settimeout(5)
    assert a.recv(10) == b"2" and late.recv(10) == b"4", "held bytes were lost on heal"


def test_cut_of_everyone_and_partial_heal(proxy: Proxy) -> None:
    a, b = dial(proxy, "127.0.0.11"), dial(proxy, "127.0.0.12")
    proxy.cut({"127.0.0.12"})
    proxy.cut()
    a.sendall(b"x")
    assert silent(a)
    proxy.heal({"127.0.0.12"})  # a cut of everyone stays
    assert proxy.is_cut("127.0.0.12") and silent(a)
    proxy.heal()
    a.settimeout(5)
    b.sendall(b"y")
    b.settimeout(5)
    assert a.recv(10) == b"x" and b.recv(10) == b"y"


def test_a_dead_target_is_a_reset_not_a_hang() -> None:
    with Proxy("127.0.0.1", free_port()) as p, pytest.raises(ConnectionResetError):
        s = dial(p, "127.0.0.1")  # the reset may already fail the connect
        s.settimeout(5)
        s.recv(10)
