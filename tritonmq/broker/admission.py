"""Connections of one listener, from accept until the core admits them, and after.

The counts are of sockets, so they live in the shell; whether a connection is admitted
is the core's decision (a ``hello`` it accepted, a ``follow`` it attached: the shell
asks, or sees the core answer it). Every accepted socket is *pending* from the moment
it is accepted (its websocket handshake included) until then, and:

* a pending connection that is not admitted within ``timeout`` seconds is closed
  (its deadline, checked by :meth:`Admission.sweep`);
* at most ``max_pending`` are pending: a newcomer past it closes the *oldest* pending
  one, so a flood of silent sockets can neither take the room of admitted clients nor
  keep a newcomer out for longer than it takes ``max_pending`` sockets to arrive (an
  honest client admits itself in one round trip);
* admitted connections count against ``max_admitted`` (the client port's
  ``max_connections``): at it a handshake gets HTTP 503, and one admitted past it (a
  race) is closed with 1013.

Each close is counted by reason (``tritonmq_connections_closed_total``,
``tritonmq_repl_links_closed_total``) and logged at most every :data:`LOG_EVERY` seconds.
"""

from __future__ import annotations

import asyncio
import logging
import resource
import time
from collections import Counter
from collections.abc import Callable, Iterator
from http import HTTPStatus

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from websockets.asyncio.server import ServerConnection
from websockets.http11 import Request, Response
from websockets.protocol import State

log = logging.getLogger("tritonmq.broker")
Hook = Callable[[ServerConnection, Request], Response | None]

FD_HEADROOM = 256  # descriptors besides client connections: ZooKeeper, replication, files
LOG_EVERY = 10.0  # seconds between two log lines about closed connections of one listener
ABORT_AFTER_S = 1.0  # a closed connection whose close frame cannot be flushed is aborted

CLOSE_NO_HELLO = 4001
"""WebSocket close code: a client connection was not admitted (no accepted ``hello``) in
time, or was the oldest unadmitted one when ``max_unauthenticated`` were waiting."""
CLOSE_TRY_AGAIN = 1013
"""WebSocket close code (RFC 6455 "try again later"): admitted past ``max_connections``."""
CLOSE_POLICY = 1008
"""WebSocket close code for a replication link not admitted in time (policy violation)."""


def fit_fd_limit(connections: int) -> int:
    """Raise this process's open-file limit (up to its hard limit) so that the listeners'
    caps (``max_connections`` + ``max_unauthenticated`` + ``max_repl_pending``) are what
    refuse and close connections, not the limit; log a warning when it cannot be.
    Returns the soft limit in force."""
    want = connections + FD_HEADROOM
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= want:
        return soft
    new = want if hard == resource.RLIM_INFINITY else min(want, hard)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))
        soft = new
    except (ValueError, OSError) as e:
        log.debug("could not raise the open-file limit to %d: %s", new, e)
    if soft < want:
        log.warning(
            "%d connections (max_connections + max_unauthenticated + max_repl_pending) need"
            " %d open files, this process may have %d: raise the limit (ulimit -n) or lower"
            " the caps",
            connections,
            want,
            soft,
        )
    return soft


def shut(
    conn: ServerConnection, code: int, reason: str, abort_after: float = ABORT_AFTER_S
) -> None:
    """Close ``conn`` now with ``code``: the close frame is written, nothing more is read,
    and the socket is closed once the frame is flushed (aborted if that takes longer than
    ``abort_after``). A connection still in its handshake is just closed."""
    if conn.protocol.state is State.OPEN:
        conn.protocol.fail(code, reason[:120])
        try:
            conn.send_data()
        except Exception as e:  # the transport is gone: connection_lost follows
            log.debug("closing %s: %r", conn.remote_address, e)
    transport = conn.transport
    transport.close()
    asyncio.get_running_loop().call_later(abort_after, transport.abort)


class Admission:
    """One listener's connections, pending and admitted (see the module doc)."""

    def __init__(
        self,
        *,
        what: str,
        max_pending: int,
        timeout: float,
        close_code: int,
        timeout_reason: str,
        max_admitted: int | None = None,
        count_left: bool = False,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.what = what  # "client connection", "replication link": for logs and metrics
        self.max_pending = max_pending
        self.timeout = timeout
        self.close_code = close_code
        self.timeout_reason = timeout_reason  # the close frame's reason at the deadline
        self.max_admitted = max_admitted
        self.count_left = count_left  # count a pending one that its peer closes ("left")
        self.clock = clock
        self.pending: dict[ServerConnection, float] = {}  # arrival order -> its deadline
        self.admitted: set[ServerConnection] = set()
        self.closing: set[ServerConnection] = set()  # closed by us, until the socket is gone
        self.refused = 0  # handshakes refused at max_admitted (HTTP 503)
        self.closed: Counter[str] = Counter()  # connections we closed, by reason
        self._logged_at = -LOG_EVERY
        self._unlogged: Counter[str] = Counter()

    @property
    def open(self) -> int:
        """Admitted connections (those ``max_admitted`` counts)."""
        return len(self.admitted)

    # --- the socket's life -------------------------------------------------------------

    def arrived(self, conn: ServerConnection) -> None:
        """A socket was accepted: pending from now; past ``max_pending`` the oldest goes."""
        self.pending[conn] = self.clock() + self.timeout
        if len(self.pending) > self.max_pending:
            oldest = next(iter(self.pending))
            self._close(oldest, "evicted", f"{self.max_pending} newer connections came")

    def left(self, conn: ServerConnection) -> None:
        """The socket is closed (whoever closed it)."""
        if self.pending.pop(conn, None) is not None and self.count_left:
            self._closed("left")
        self.admitted.discard(conn)
        self.closing.discard(conn)

    def admit(self, conn: ServerConnection) -> bool:
        """The core admitted ``conn``: it leaves the pending ones. False when it was not
        pending (already admitted, or being closed) or there is no room for it."""
        if self.pending.pop(conn, None) is None:
            return False
        if self.max_admitted is not None and len(self.admitted) >= self.max_admitted:
            self.closing.add(conn)
            self._closed("max_connections")
            shut(conn, CLOSE_TRY_AGAIN, f"max_connections={self.max_admitted} reached")
            return False
        self.admitted.add(conn)
        return True

    def refused_by_core(self, conn: ServerConnection) -> None:
        """The core closed a pending connection (a link it refused): counted and logged."""
        if self.pending.pop(conn, None) is not None:
            self.closing.add(conn)
            self._closed("refused")

    def sweep(self) -> None:
        """Close every pending connection past its deadline (the oldest come first); log
        the closes not logged yet once :data:`LOG_EVERY` has passed (a flood's tail)."""
        now = self.clock()
        while self.pending:
            conn, deadline = next(iter(self.pending.items()))
            if deadline > now:
                break
            self._close(conn, "timeout", self.timeout_reason)
        if self._unlogged:
            self._log()

    def _close(self, conn: ServerConnection, reason: str, message: str) -> None:
        del self.pending[conn]
        self.closing.add(conn)
        self._closed(reason)
        shut(conn, self.close_code, message)

    def evicted(self, conn: ServerConnection, reason: str) -> None:
        """``conn`` was closed for another bound (the inbound budget): counted and logged."""
        self.pending.pop(conn, None)
        self.admitted.discard(conn)
        self.closing.add(conn)
        self._closed(reason)

    def _closed(self, reason: str) -> None:
        self.closed[reason] += 1
        self._unlogged[reason] += 1
        self._log()

    def _log(self) -> None:
        now = self.clock()
        if now - self._logged_at >= LOG_EVERY:
            self._logged_at = now
            counts = ", ".join(f"{n} {r}" for r, n in sorted(self._unlogged.items()))
            self._unlogged.clear()
            log.warning(
                "closed %s(s) (%s; %d not admitted yet, at most %d; "
                "at most one such line every %.0fs)",
                self.what,
                counts,
                len(self.pending),
                self.max_pending,
                LOG_EVERY,
            )

    # --- the handshake --------------------------------------------------------------------

    def process_request(self, conn: ServerConnection, request: Request) -> Response | None:
        """websockets' handshake hook: None admits, a response refuses (no room left for
        anyone to be admitted)."""
        if self.max_admitted is None or len(self.admitted) < self.max_admitted:
            return None
        self.refused += 1
        if self.refused == 1 or self.refused % 1000 == 0:
            log.warning(
                "refused %d connection(s): max_connections=%d", self.refused, self.max_admitted
            )
        return conn.respond(
            HTTPStatus.SERVICE_UNAVAILABLE,
            f"this broker has max_connections={self.max_admitted} client connections; "
            "retry later\n",
        )

    def after(self, first: Hook) -> Hook:
        """One ``process_request`` hook: ``first`` (e.g. the Origin check), then the cap."""

        def hook(conn: ServerConnection, request: Request) -> Response | None:
            return first(conn, request) or self.process_request(conn, request)

        return hook

    # --- metrics ---------------------------------------------------------------------------

    def metrics(self, group: str, prefix: str, help_what: str) -> Iterator[Metric]:
        """``<prefix>_pending`` and ``<prefix>_closed_total{reason}``."""
        g = GaugeMetricFamily(
            f"{prefix}_pending",
            f"{help_what} accepted and not admitted yet.",
            labels=["group"],
        )
        g.add_metric([group], len(self.pending))
        yield g
        c = CounterMetricFamily(
            f"{prefix}_closed",
            f"{help_what} the broker closed for its bounds, by reason.",
            labels=["group", "reason"],
        )
        for reason in sorted(self.closed):
            c.add_metric([group, reason], self.closed[reason])
        yield c
