"""Connections of a listener: pending until the core admits them (a deadline, a cap that closes
the oldest), admitted ones capped by ``max_connections`` (HTTP 503); closes counted, logged."""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

import pytest
from websockets.datastructures import Headers
from websockets.http11 import Request, Response
from websockets.protocol import State

from tritonmq.broker.admission import CLOSE_NO_HELLO, CLOSE_POLICY, CLOSE_TRY_AGAIN, Admission
from tritonmq.wire.frames import SUBPROTOCOL


class Conn:
    def __init__(self, subprotocol: str | None = SUBPROTOCOL) -> None:
        self.subprotocol = subprotocol

    def respond(self, status: HTTPStatus, text: str) -> Response:
        return Response(status.value, status.phrase, Headers(), text.encode())


def request(*protocols: str) -> Request:
    return Request("/", Headers([("Sec-WebSocket-Protocol", p) for p in protocols]))


class Transport:
    def __init__(self) -> None:
        self.closed = self.aborted = False

    def close(self) -> None:
        self.closed = True

    def abort(self) -> None:
        self.aborted = True


class Protocol:
    def __init__(self, state: State) -> None:
        self.state = state
        self.failed: tuple[int, str] | None = None

    def fail(self, code: int, reason: str) -> None:
        self.failed = (code, reason)
        self.state = State.CLOSING


class Socket(Conn):
    """A connection as the shell sees it: handshake done (OPEN) or not (CONNECTING)."""

    def __init__(self, state: State = State.OPEN) -> None:
        super().__init__()
        self.protocol = Protocol(state)
        self.transport = Transport()
        self.remote_address = ("127.0.0.1", 1)

    def send_data(self) -> None:
        pass

    @property
    def close_code(self) -> int | None:
        return self.protocol.failed[0] if self.protocol.failed else None


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def clients(
    max_connections: int = 2, max_pending: int = 3, clock: Clock | None = None
) -> Admission:
    return Admission(
        what="client connection",
        max_pending=max_pending,
        timeout=10.0,
        close_code=CLOSE_NO_HELLO,
        timeout_reason="no hello in time",
        max_admitted=max_connections,
        clock=clock or Clock(),
    )


async def test_handshakes_past_max_connections_admitted_get_503_and_pending_ones_never_count() -> (
    None
):
    a = clients(max_connections=2)
    conns: list[Any] = [Socket() for _ in range(3)]
    for c in conns:
        a.arrived(c)
    assert a.process_request(conns[0], request(SUBPROTOCOL)) is None, "pending ones take no room"
    assert a.admit(conns[0]) and a.admit(conns[1]) and a.open == 2
    refused = a.process_request(conns[2], request(SUBPROTOCOL))
    assert refused is not None and refused.status_code == 503
    assert b"max_connections=2" in refused.body and a.refused == 1
    a.left(conns[0])
    assert a.open == 1 and a.process_request(conns[2], request(SUBPROTOCOL)) is None


async def test_admitted_past_max_connections_in_a_race_is_closed_with_1013() -> None:
    a = clients(max_connections=1)
    first, second = Socket(), Socket()
    a.arrived(first)  # type: ignore[arg-type]
    a.arrived(second)  # type: ignore[arg-type]
    assert a.admit(first)  # type: ignore[arg-type]
    assert not a.admit(second)  # type: ignore[arg-type]
    assert second.close_code == CLOSE_TRY_AGAIN and second.transport.closed
    assert a.closed["max_connections"] == 1 and a.open == 1
    assert not a.admit(first), "admitted once"  # type: ignore[arg-type]


async def test_past_max_pending_the_oldest_unadmitted_connection_is_closed_with_4001() -> None:
    a = clients(max_pending=3)
    conns = [Socket(State.CONNECTING), *(Socket() for _ in range(4))]
    for c in conns[:4]:
        a.arrived(c)  # type: ignore[arg-type]
    assert a.admit(conns[1])  # type: ignore[arg-type]  # admitted ones are never evicted
    a.arrived(conns[4])  # type: ignore[arg-type]
    assert conns[0].transport.closed and conns[0].close_code is None, "closed in its handshake"
    assert [c.close_code for c in conns[1:]] == [None, None, None, None]
    a.arrived(Socket())  # type: ignore[arg-type]
    assert conns[2].close_code == CLOSE_NO_HELLO and conns[2].protocol.failed is not None
    assert "3 newer connections" in conns[2].protocol.failed[1]
    assert a.closed["evicted"] == 2 and len(a.pending) == 3 and a.open == 1


async def test_pending_connections_past_their_deadline_are_closed_oldest_first() -> None:
    clock = Clock()
    a = clients(clock=clock, max_pending=10)
    early, admitted = Socket(), Socket()
    a.arrived(early)  # type: ignore[arg-type]
    a.arrived(admitted)  # type: ignore[arg-type]
    clock.now = 5.0
    late = Socket()
    a.arrived(late)  # type: ignore[arg-type]
    a.admit(admitted)  # type: ignore[arg-type]
    clock.now = 10.0
    a.sweep()
    assert early.protocol.failed == (CLOSE_NO_HELLO, "no hello in time")
    assert admitted.close_code is None and late.close_code is None
    clock.now = 15.0
    a.sweep()
    assert late.close_code == CLOSE_NO_HELLO and a.closed["timeout"] == 2 and not a.pending
    a.left(early)  # type: ignore[arg-type]
    a.left(late)  # type: ignore[arg-type]
    assert not a.closing


async def test_closes_are_counted_by_reason_and_logged_at_most_every_ten_seconds(
    caplog: Any,
) -> None:
    clock = Clock()
    links = Admission(
        what="replication link",
        max_pending=5,
        timeout=3.0,
        close_code=CLOSE_POLICY,
        timeout_reason="no follow in time",
        count_left=True,
        clock=clock,
    )
    with caplog.at_level("WARNING", logger="tritonmq.broker"):
        for i in range(300):
            c: Any = Socket()
            links.arrived(c)
            if i % 3 == 0:
                links.refused_by_core(c)
            elif i % 3 == 1:
                links.left(c)  # its peer went away before following
        clock.now = 11.0
        links.sweep()
        late: Any = Socket()
        links.arrived(late)
        links.left(late)  # within 10 s of the last line: not logged yet...
        clock.now = 30.0
        links.sweep()  # ...but once the interval has passed, the tail of a flood is
    assert links.closed["refused"] == 100 and links.closed["left"] == 101
    assert links.closed["evicted"] + links.closed["timeout"] == 100
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 3 and all("replication link" in m for m in lines), lines
    assert "(1 left, " in lines[-1]
    names = {m.name for m in links.metrics("g1", "tritonmq_repl_links", "Replication links")}
    assert names == {"tritonmq_repl_links_pending", "tritonmq_repl_links_closed"}


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
                assert f"{hard} connections (max_connections" in caplog.text
                assert "ulimit" in caplog.text
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_the_origin_check_runs_first_and_the_cap_after_it() -> None:
    a = clients(max_connections=1)
    conn: Any = Conn()
    a.admitted.add(conn)

    def forbid(c: Any, _: Request) -> Response:
        return c.respond(HTTPStatus.FORBIDDEN, "Origin not allowed\n")

    def allow(c: Any, _: Request) -> None:
        return None

    refused = a.after(forbid)(conn, request(SUBPROTOCOL))
    assert refused is not None and refused.status_code == 403
    full = a.after(allow)(conn, request(SUBPROTOCOL))
    assert full is not None and full.status_code == 503
