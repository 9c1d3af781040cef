"""What a broker reports about itself: readiness, and how far each subscription lags.

Both are judgements on the core's state, so they live in the core (pure: the caller
passes the wall clock); the shell only serves them (``GET /readyz``, ``GET /metrics``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from tritonmq.core.broker import BrokerCore
from tritonmq.core.events import SessionState
from tritonmq.core.log import lag_of
from tritonmq.core.roles import Role


@dataclass(frozen=True, slots=True)
class Readiness:
    ready: bool
    reason: str


def readiness(core: BrokerCore) -> Readiness:
    """Ready: the ZooKeeper session is connected, this broker is registered and knows its
    role, and it is either the primary accepting writes or a backup the ISR names (this
    very incarnation: a restarted broker is not in sync until the primary re-admits it)."""
    group = core.cfg.group
    if core.role in (Role.STEPPING_DOWN, Role.STOPPED):
        return Readiness(False, "stopping")
    if core.session is not SessionState.CONNECTED:
        return Readiness(False, f"ZooKeeper session {core.session.value}")
    if not core.viewed or core.members.get(core.me.id) != core.me:
        return Readiness(False, "not registered in ZooKeeper yet")
    st = core.state
    p = core.primary
    if core.role is Role.LEADING and p is not None:
        if not p.accepting:
            return Readiness(False, f"primary of {group} but not accepting writes")
        return Readiness(True, f"primary of {group} at epoch {p.epoch}")
    f = core.follow
    if core.role is Role.FOLLOWING and st is not None and f is not None:
        if f.epoch != st.epoch:
            return Readiness(False, f"backup of {group} following an old epoch")
        if not st.in_sync(core.me):
            return Readiness(False, f"backup of {group} catching up: not in the ISR yet")
        return Readiness(True, f"in-sync backup of {group} at epoch {st.epoch}")
    return Readiness(False, f"role not known yet ({core.role.value})")


@dataclass(frozen=True, slots=True)
class Lag:
    topic: str
    subscription: str
    records: int  # committed records after the subscription's offset
    seconds: float  # age of the oldest of them (0 when there is none)


def subscription_lags(core: BrokerCore, wall_ms: int) -> Iterator[Lag]:
    """The lag of every durable subscription this broker serves as primary (none on a
    backup: its view of offsets is not the one consumers move)."""
    p = core.primary
    if p is None:
        return
    log = core.log
    commit = p.commit_ts
    for d in core.delivery.durables.values():
        records, oldest = lag_of(log, d.topic, d.offset, commit)
        seconds = 0.0
        if records and oldest is not None:
            published = log.published_at(oldest)
            if published is not None:
                seconds = max(0.0, (wall_ms - published) / 1000)
        yield Lag(d.topic, d.name, records, seconds)
