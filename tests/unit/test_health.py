"""Readiness and subscription lag, judged on the core's state (served by /readyz, /metrics)."""

from __future__ import annotations

import dataclasses

from tests.unit.test_core_broker import core, leading, members, recs, state
from tritonmq.core.actions import ProposeState
from tritonmq.core.events import (
    CasDone,
    CasOutcome,
    ClientFrameIn,
    SessionChanged,
    SessionState,
    StopRequested,
    SubscriptionRegistered,
    ZkView,
)
from tritonmq.core.health import Lag, Readiness, readiness, subscription_lags
from tritonmq.core.roles import Role
from tritonmq.wire.frames import Commit, Pub


def test_a_primary_accepting_writes_is_ready_and_not_while_its_session_is_suspended() -> None:
    c = leading()
    assert readiness(c).ready and "primary of g1 at epoch 1" in readiness(c).reason
    c.handle(SessionChanged(SessionState.SUSPENDED, 1.0))
    r = readiness(c)
    assert not r.ready and r.reason == "ZooKeeper session suspended"


def test_a_backup_is_ready_only_once_the_isr_names_this_incarnation() -> None:
    c = core("b")
    assert not readiness(c).ready  # nothing seen yet
    c.handle(ZkView(state(1, "a", "a"), members("ab"), None, 0.0))
    assert c.role is Role.FOLLOWING
    r = readiness(c)
    assert not r.ready and "catching up" in r.reason
    # the ISR names b, but an earlier incarnation of it (another boot id): still not ready
    old = dataclasses.replace(state(1, "a", "ab"), boots={"a": "boot-a", "b": "boot-old"})
    c.handle(ZkView(old, members("ab"), None, 0.1))
    assert not readiness(c).ready
    c.handle(ZkView(state(1, "a", "ab"), members("ab"), None, 0.2))
    r = readiness(c)
    assert r.ready and r.reason == "in-sync backup of g1 at epoch 1"


def test_a_broker_whose_role_is_undecided_or_that_is_stopping_is_not_ready() -> None:
    c = core("a")
    c.handle(ZkView(None, members("a"), None, 0.0))  # claims: the CAS is in flight
    assert c.role is Role.CLAIMING
    r = readiness(c)
    assert not r.ready and "role not known yet (claiming)" in r.reason
    stopping = leading()
    stopping.handle(StopRequested(1.0))
    assert readiness(stopping) == Readiness(False, "stopping")


def test_a_durable_subscription_lags_by_the_committed_records_it_has_not_acknowledged() -> None:
    c = leading(isr="a", live="a", replicas=1)
    c.handle(ClientFrameIn("prod", Pub(1, "t", recs("u1", "u2", "u3")), 0.1, wall_ms=10_000))
    c.handle(ClientFrameIn("app", Commit(5, "t", "q", 0), 0.2))
    c.handle(SubscriptionRegistered("t", "q", 0, 0.3))
    assert list(subscription_lags(c, wall_ms=12_500)) == [Lag("t", "q", 3, 2.5)]
    c.handle(ClientFrameIn("app", Commit(6, "t", "q", 2), 0.4))
    assert list(subscription_lags(c, wall_ms=13_000)) == [Lag("t", "q", 1, 3.0)]
    c.handle(ClientFrameIn("app", Commit(7, "t", "q", 3), 0.5))
    assert list(subscription_lags(c, wall_ms=13_000)) == [Lag("t", "q", 0, 0.0)]


def test_a_backup_reports_no_subscription_lag() -> None:
    c = core("b")
    c.handle(ZkView(state(1, "a", "ab"), members("ab"), None, 0.0))
    assert list(subscription_lags(c, wall_ms=0)) == []


def test_the_lag_counts_only_committed_records() -> None:
    c = leading(isr="ab", live="ab")  # b has acknowledged nothing: nothing commits
    c.handle(ClientFrameIn("prod", Pub(1, "t", recs("u1")), 0.1, wall_ms=1))
    c.handle(ClientFrameIn("app", Commit(5, "t", "q", 0), 0.2))
    c.handle(SubscriptionRegistered("t", "q", 0, 0.3))
    assert c.log.last_ts == 1 and c.commit_ts == 0
    assert [lag.records for lag in subscription_lags(c, wall_ms=5)] == [0]


def test_readiness_after_winning_a_claim() -> None:
    c = core("a")
    [prop] = [
        a for a in c.handle(ZkView(None, members("a"), None, 0.0)) if isinstance(a, ProposeState)
    ]
    c.handle(CasDone(prop.request, CasOutcome.OK, dataclasses.replace(prop.state, version=0), 0.1))
    assert readiness(c).ready
