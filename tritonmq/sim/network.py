"""A model of the network between simulated processes.

A connection is what a websocket is: an ordered, reliable stream. Messages on one
connection arrive in the order they were sent; they are lost only when the
connection dies. A process is *running*, *frozen* (SIGSTOP: its kernel still holds
its sockets, so nothing is refused, but nothing answers) or *down* (crashed: the
kernel refuses new connections and resets old ones). A partition cuts a link (or
all links of a node, ZooKeeper included): messages wait, and connections over it
time out. Latencies come from the world's one random generator.
"""

from __future__ import annotations

import enum
import random
from dataclasses import dataclass, field
from typing import Any

ZK = "zk"  # the ZooKeeper ensemble, as a network endpoint


class Proc(enum.Enum):
    RUNNING = "running"
    FROZEN = "frozen"
    DOWN = "down"


class Dial(enum.Enum):
    """How a connection attempt ends."""

    CONNECTED = "connected"
    REFUSED = "refused"  # nothing listens: the process is gone
    TIMED_OUT = "timed out"  # frozen or partitioned: no answer at all


@dataclass(slots=True)
class Conn:
    id: int
    a: str  # the end that dialled
    b: str  # the end that accepted
    kind: str  # "repl" or "client"
    open: bool = True
    last_arrival: float = 0.0  # messages never overtake each other
    held: list[tuple[str, Any]] = field(default_factory=list)  # (to, msg) waiting for a link
    known_at: dict[str, float] = field(default_factory=dict)  # when each end learns of it

    def other(self, me: str) -> str:
        return self.b if me == self.a else self.a


class Network:
    def __init__(self, rng: random.Random, *, latency: float = 0.002) -> None:
        self.rng = rng
        self.latency = latency
        self.procs: dict[str, Proc] = {}
        self.cuts: set[frozenset[str]] = set()  # links cut by a partition
        self.isolated: set[str] = set()  # nodes cut from everyone (ZooKeeper included)
        # (listener, dialer): a running process refuses that dialer ("" = everyone: its
        # listener is down; a peer: a firewall rule that rejects it)
        self.refusing: set[tuple[str, str]] = set()
        self.conns: dict[int, Conn] = {}
        self._next = 1

    def delay(self) -> float:
        """One hop: mostly ``latency``, sometimes several times that."""
        return self.latency * (0.5 + self.rng.expovariate(1.0))

    # --- processes and partitions --------------------------------------------------

    def running(self, node: str) -> bool:
        return node == ZK or self.procs.get(node) is Proc.RUNNING

    def link_ok(self, a: str, b: str) -> bool:
        return (
            a not in self.isolated and b not in self.isolated and frozenset((a, b)) not in self.cuts
        )

    def dial(self, a: str, b: str) -> Dial:
        if not self.link_ok(a, b):
            return Dial.TIMED_OUT
        state = self.procs.get(b, Proc.DOWN)
        if state is Proc.DOWN or (state is Proc.RUNNING and self.refuses(b, a)):
            return Dial.REFUSED
        return Dial.TIMED_OUT if state is Proc.FROZEN else Dial.CONNECTED

    def refuses(self, listener: str, dialer: str) -> bool:
        return (listener, "") in self.refusing or (listener, dialer) in self.refusing

    # --- connections --------------------------------------------------------------

    def open(self, a: str, b: str, kind: str) -> Conn:
        c = Conn(self._next, a, b, kind)
        self._next += 1
        self.conns[c.id] = c
        return c

    def arrival(self, conn: Conn, now: float) -> float:
        """When a message sent now on ``conn`` arrives (never before an earlier one)."""
        t = max(now + self.delay(), conn.last_arrival)
        conn.last_arrival = t
        return t

    def conns_of(self, node: str) -> list[Conn]:
        return [c for c in self.conns.values() if c.open and node in (c.a, c.b)]

    def close(self, conn: Conn) -> None:
        conn.open = False
        conn.held.clear()
        self.conns.pop(conn.id, None)
