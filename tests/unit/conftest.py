"""Every BrokerCore a unit test drives checks its invariants after each event it handles
(core/invariants.py), as the simulator's do."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tritonmq.core.broker import BrokerCore


@pytest.fixture(autouse=True)
def broker_invariants_after_every_event(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    handle = BrokerCore.handle

    def checked(self: BrokerCore, ev: Any) -> Any:
        out = handle(self, ev)
        self.invariants()
        return out

    monkeypatch.setattr(BrokerCore, "handle", checked)
    yield
