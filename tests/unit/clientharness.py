"""The client protocol under test: a `ClientProtocol`, its clock and what it asked for
(shared by test_client_protocol.py and test_consuming.py)."""

from __future__ import annotations

import random
from typing import Any

from tritonmq.client.events import (
    Action,
    Event,
    FrameReceived,
    Resolved,
    Send,
    Tick,
    TransportFailed,
    TransportOpened,
)
from tritonmq.client.protocol import ClientProtocol, Settings
from tritonmq.client.states import ConnState
from tritonmq.wire.frames import (
    BrokerFrame,
    Hello,
    MetaReply,
    Pub,
)

A, B, C = "ws://a:1", "ws://b:1", "ws://c:1"


class Harness:
    """A protocol, its clock, and what it asked for."""

    def __init__(self, **options: Any) -> None:
        self.now = 100.0
        self.rng = random.Random(7)
        self.p = ClientProtocol(Settings(**options), self.rng.random)
        self.actions: list[Action] = []

    def __call__(self, event: Event) -> list[Action]:
        out = self.p.handle(event, self.now)
        self.actions += out
        return out

    def frame(self, f: BrokerFrame) -> list[Action]:
        return self(FrameReceived(self.p.conn, f))

    def connect(self, url: str = A, epoch: int = 1, urls: tuple[str, ...] = (A, B, C)) -> None:
        """Drive a fresh or dropped protocol to CONNECTED at ``url``."""
        self(Tick())
        if self.p.state is ConnState.RESOLVING:
            self(Resolved(urls))
        while self.p.url != url:
            self(TransportFailed(self.p.conn, "refused"))
            if self.p.state is not ConnState.CONNECTING:
                self.now += 1
                self(Tick())
                self(Resolved(urls))
        assert Send(Hello("tritonmq-python")) in self(TransportOpened(self.p.conn))
        self.frame(MetaReply(0, "g1", url[5], "primary", epoch))
        assert self.p.state is ConnState.CONNECTED

    def sent(self, out: list[Action] | None = None) -> list[Any]:
        return [a.frame for a in (self.actions if out is None else out) if isinstance(a, Send)]

    def pubs(self, out: list[Action] | None = None) -> list[Pub]:
        return [f for f in self.sent(out) if isinstance(f, Pub)]


def recs(n: int, tag: str = "u") -> list[Any]:
    return [(f"{tag}{i}".encode(), None, b"v", None) for i in range(n)]
