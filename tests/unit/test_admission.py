"""Connections per broker: past ``max_connections`` a client's handshake gets HTTP 503."""

from __future__ import annotations

import asyncio
from http import HTTPStatus
from typing import Any

import pytest
from websockets.datastructures import Headers
from websockets.http11 import Request, Response

from tritonmq.broker.admission import Admission
from tritonmq.wire.frames import REPL_SUBPROTOCOL, SUBPROTOCOL
from tritonmq.wire.jsoncodec import JSON_SUBPROTOCOL


class Conn:
    def __init__(self, subprotocol: str | None = SUBPROTOCOL) -> None:
        self.subprotocol = subprotocol

    def respond(self, status: HTTPStatus, text: str) -> Response:
        return Response(status.value, status.phrase, Headers(), text.encode())


def request(*protocols: str) -> Request:
    return Request("/", Headers([("Sec-WebSocket-Protocol", p) for p in protocols]))


def test_clients_past_the_cap_are_refused_with_503_naming_it_and_let_in_once_one_leaves() -> None:
    a = Admission(2)
    conn: Any = Conn()
    gate = asyncio.Event()

    async def run() -> None:
        async def handler(_: Any) -> None:
            await gate.wait()

        held = [asyncio.create_task(a.serve(conn, handler)) for _ in range(2)]
        await asyncio.sleep(0)
        assert a.open == 2
        refused = a.process_request(conn, request(SUBPROTOCOL))
        assert refused is not None and refused.status_code == 503
        assert b"max_connections=2" in refused.body
        # a connection offering both subprotocols is a client one: refused too
        assert a.process_request(conn, request(f"{REPL_SUBPROTOCOL}, {SUBPROTOCOL}")) is not None
        both = request(f"{REPL_SUBPROTOCOL}, {JSON_SUBPROTOCOL}")  # the JSON one is a client too
        assert a.process_request(conn, both) is not None
        # a replication link is not refused, nor counted
        assert a.process_request(conn, request(REPL_SUBPROTOCOL)) is None
        await a.serve(Conn(REPL_SUBPROTOCOL), lambda _: asyncio.sleep(0))  # type: ignore[arg-type]
        gate.set()
        await asyncio.gather(*held)
        assert a.open == 0 and a.process_request(conn, request(SUBPROTOCOL)) is None

    asyncio.run(run())


def test_a_handler_that_fails_still_releases_its_slot() -> None:
    a = Admission(1)

    async def boom(_: Any) -> None:
        raise ConnectionError("gone")

    async def run() -> None:
        try:
            await a.serve(Conn(), boom)  # type: ignore[arg-type]
        except ConnectionError:
            pass
        assert a.open == 0

    asyncio.run(run())


def test_the_open_file_limit_is_raised_for_the_cap_or_a_warning_says_it_cannot_be(
    caplog: Any,
) -> None:
    import resource

    from tritonmq.broker.admission import FD_HEADROOM, fit_fd_limit

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 600 + FD_HEADROOM:
        pytest.skip(f"hard open-file limit {hard} is too low to raise anything")
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(soft, 512), hard))
        with caplog.at_level("WARNING", logger="tritonmq.broker"):
            assert fit_fd_limit(600) == 600 + FD_HEADROOM  # raised within the hard limit
            assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] == 600 + FD_HEADROOM
            assert not caplog.records
            if hard != resource.RLIM_INFINITY:
                assert fit_fd_limit(hard) == hard
                assert f"max_connections={hard}" in caplog.text and "ulimit" in caplog.text
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_the_origin_check_runs_first_and_the_cap_after_it() -> None:
    a = Admission(0)
    conn: Any = Conn()

    def forbid(c: Any, _: Request) -> Response:
        return c.respond(HTTPStatus.FORBIDDEN, "Origin not allowed\n")

    def allow(c: Any, _: Request) -> None:
        return None

    refused = a.after(forbid)(conn, request(SUBPROTOCOL))
    assert refused is not None and refused.status_code == 403
    full = a.after(allow)(conn, request(SUBPROTOCOL))
    assert full is not None and full.status_code == 503
