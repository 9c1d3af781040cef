"""BrokerCore.invariants() catches a core whose fields disagree with its role
(core/invariants.py); the unit tests and the simulator run it after every event."""

from __future__ import annotations

import pytest

from tests.unit.test_moves import leading, member
from tritonmq.config import BrokerConfig
from tritonmq.core.broker import BrokerCore
from tritonmq.core.roles import FollowLink


def test_a_consistent_primary_passes() -> None:
    leading("a").invariants()


def test_a_primary_without_its_primary_state_is_caught() -> None:
    c = leading("a")
    c.primary = None
    with pytest.raises(AssertionError, match="role leading with primary None"):
        c.invariants()


def test_a_commit_point_past_the_log_is_caught() -> None:
    c = leading("a")
    assert c.primary is not None
    c.primary.commit_ts = c.log.last_ts + 1
    with pytest.raises(AssertionError, match="past the log's end"):
        c.invariants()


def test_a_follow_link_without_the_following_role_is_caught() -> None:
    c = BrokerCore(BrokerConfig(id="b", group="g1"), member("b"))
    c.invariants()
    c.follow = FollowLink(1, member("a"), 1)
    with pytest.raises(AssertionError, match="role joining with follow link"):
        c.invariants()


def test_subscriptions_ready_without_a_primary_are_caught() -> None:
    c = BrokerCore(BrokerConfig(id="b", group="g1"), member("b"))
    c.durables_ready = True
    with pytest.raises(AssertionError, match="durable subscriptions ready without a primary"):
        c.invariants()
