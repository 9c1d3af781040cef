"""What client connections' input holds in the broker, bounded per connection and per broker.

A websocket library keeps what a connection sent until the handler reads it: messages
queued (``max_queue``), an unfinished message's fragments, the partial frame in its read
buffer. Per connection that is bounded by the message size (``max_hello_bytes`` until
the core admits the connection, ``max_frame_bytes`` after) times the queue; but a client
that sends a first fragment (FIN=0) and never the rest holds its bytes for as long as it
answers pings (300 connections held 2.4 GB). So every client connection's held bytes
are counted (:class:`TrackedConnection`: bytes of data frames received and not yet read
by the handler, plus the read buffer) against one budget per broker,
``max_inbound_bytes``. When the total passes it, the connection holding the most is
closed with :data:`CLOSE_INBOUND_FULL` and stops being read at once: a small client
(a ``pub`` of a few records) never holds the most while an attacker holds megabytes.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client.core import GaugeMetricFamily, Metric
from websockets.asyncio.server import ServerConnection
from websockets.frames import DATA_OPCODES, Frame
from websockets.protocol import Event
from websockets.typing import Data

from tritonmq.broker.admission import Admission, shut

CLOSE_INBOUND_FULL = 4013
"""WebSocket close code: the broker's input budget was full and this connection held the
most of it (an unfinished message, or messages it sent faster than they were handled)."""
CLOSE_REASON = "inbound buffers full"


class InboundBudget:
    """Bytes held for every client connection's input, at most ``limit`` together."""

    def __init__(self, limit: int, evicted: Callable[[ServerConnection], None]) -> None:
        self.limit = limit
        self.total = 0
        self.held: dict[ServerConnection, int] = {}
        self.evictions = 0
        self._evicted = evicted

    def update(self, conn: ServerConnection, n: int) -> None:
        """``conn`` holds ``n`` bytes now; past the limit the largest holders are closed."""
        self.total += n - self.held.get(conn, 0)
        if n:
            self.held[conn] = n
        else:
            self.held.pop(conn, None)
        while self.total > self.limit and self.held:
            victim = max(self.held, key=self.held.__getitem__)
            self.total -= self.held.pop(victim)
            self.evictions += 1
            self._evicted(victim)

    def release(self, conn: ServerConnection) -> None:
        self.total -= self.held.pop(conn, 0)


class TrackedConnection(ServerConnection):
    """A client connection whose socket life goes to :class:`Admission` and whose held
    input is counted by :class:`InboundBudget` (set per listener by :func:`tracked`)."""

    admission: Admission
    budget: InboundBudget | None = None
    admitted_max_size: int | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._frames_held = 0  # data frames received, not yet read by the handler
        self._message_bytes = 0  # of those, the message not complete yet
        self._complete: collections.deque[int] = collections.deque()  # complete ones' sizes
        self._dropped = False  # closed for the budget: nothing more is counted

    # --- socket life -----------------------------------------------------------------------

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        self.admission.arrived(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.admission.left(self)
        if self.budget is not None:
            self.budget.release(self)
        super().connection_lost(exc)

    def admitted(self) -> None:
        """The core admitted this connection: messages up to ``max_frame_bytes`` from now."""
        if self.admitted_max_size is not None:
            self.protocol.max_message_size = self.admitted_max_size

    # --- counting what is held ---------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._count()

    def process_event(self, event: Event) -> None:
        if isinstance(event, Frame) and event.opcode in DATA_OPCODES and not self._dropped:
            n = len(event.data)
            self._frames_held += n
            self._message_bytes += n
            if event.fin:
                self._complete.append(self._message_bytes)
                self._message_bytes = 0
        super().process_event(event)

    async def recv(self, decode: bool | None = None) -> Data:  # type: ignore[override]
        data = await super().recv(decode)
        if self._complete:
            self._frames_held -= self._complete.popleft()
            self._count()
        return data

    def _count(self) -> None:
        if self.budget is None or self._dropped:
            return
        self.budget.update(self, self._frames_held + len(self.protocol.reader.buffer))

    def drop_for_budget(self) -> None:
        """Closed by the budget: stop counting and reading, send the close frame."""
        self._dropped = True
        self.admission.evicted(self, "inbound_budget")
        shut(self, CLOSE_INBOUND_FULL, CLOSE_REASON)


def tracked(
    admission: Admission, budget: InboundBudget | None = None, admitted_max_size: int | None = None
) -> type[TrackedConnection]:
    """The connection class of one listener (websockets' ``create_connection``)."""
    return type(
        "ListenerConnection",
        (TrackedConnection,),
        {"admission": admission, "budget": budget, "admitted_max_size": admitted_max_size},
    )


def evict(conn: ServerConnection) -> None:
    """The budget's eviction: ``conn`` is a :class:`TrackedConnection`."""
    assert isinstance(conn, TrackedConnection)
    conn.drop_for_budget()


class AdmissionCollector:
    """Scrape-time metrics of the listeners' admission and of the inbound budget."""

    def __init__(
        self,
        group: str,
        clients: Admission,
        links: Admission,
        budget: InboundBudget,
        unsent: Callable[[], int] = lambda: 0,
    ) -> None:
        self.group, self.clients, self.links, self.budget = group, clients, links, budget
        self.unsent = unsent  # what the outbound budget counts now

    def collect(self) -> Iterator[Metric]:
        g = self.group
        yield from self.clients.metrics(g, "tritonmq_connections", "Client connections")
        yield from self.links.metrics(g, "tritonmq_repl_links", "Replication links")
        held = GaugeMetricFamily(
            "tritonmq_inbound_bytes",
            "Bytes client connections sent that the broker holds unhandled (max_inbound_bytes).",
            labels=["group"],
        )
        held.add_metric([g], self.budget.total)
        yield held
        out = GaugeMetricFamily(
            "tritonmq_outbound_bytes",
            "Bytes queued for client connections and not sent yet, at most "
            "(max_outbound_total_bytes; counted as of each one's last send).",
            labels=["group"],
        )
        out.add_metric([g], self.unsent())
        yield out
