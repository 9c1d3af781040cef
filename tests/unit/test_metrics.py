"""Metrics: counters move at the core's events and actions, gauges read the core's state."""

from __future__ import annotations

import dataclasses
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from tests.unit.test_core_broker import core, leading, members, recs, state
from tritonmq.broker.metrics import BrokerMetrics
from tritonmq.core.actions import Deliver, ProposeState, SendError, SendPubAck
from tritonmq.core.broker import BrokerCore
from tritonmq.core.events import (
    CasDone,
    CasOutcome,
    ClientFrameIn,
    ClientGone,
    Event,
    LinkEnd,
    LinkEvent,
    PrimaryFrame,
    SubscriptionRegistered,
    ZkView,
)
from tritonmq.wire.frames import Commit, ErrorCode, Pub, Sub


class Shell:
    """What Broker.feed and Broker.perform do with the metrics, without sockets."""

    def __init__(self, c: BrokerCore, connections: tuple[int, int] = (0, 0)) -> None:
        self.core = c
        self.m = BrokerMetrics(c.cfg, lambda: self.core, lambda: connections)

    def feed(self, ev: Event) -> list[Any]:
        self.m.event_in(ev)
        out = self.core.handle(ev)
        for a in out:
            if isinstance(a, SendPubAck):
                self.m.acked(a.conn, a.id, len(a.ts))
            elif isinstance(a, SendError):
                self.m.refused_request(a.code, a.conn, a.id)
            elif isinstance(a, Deliver):
                born = self.core.log.published_at(a.records[0][0])
                self.m.delivered_frame(a.records, 100, born)
        self.m.handled(ev)
        return out

    def value(self, name: str, **labels: str) -> float | None:
        return self.m.registry.get_sample_value(name, {"group": "g1", **labels})


def test_publishes_and_deliveries_are_counted_and_timed_per_frame() -> None:
    s = Shell(leading(isr="a", live="a", replicas=1))
    s.feed(ClientFrameIn("sub", Sub(1, "t", None, 0), 0.0))
    s.feed(ClientFrameIn("prod", Pub(7, "t", recs("u1", "u2", "u3")), 0.1, wall_ms=1))
    assert s.value("tritonmq_published_records_total") == 3
    assert s.value("tritonmq_publish_ack_seconds_count") == 1
    assert s.value("tritonmq_delivered_records_total") == 3
    assert s.value("tritonmq_delivered_bytes_total") == 100
    assert s.value("tritonmq_publish_to_delivery_seconds_count") == 1
    assert s.m._pubs == {id("prod"): {}}, "an acknowledged pub is not kept"
    s.feed(ClientGone("prod", 0.2))
    assert s.m._pubs == {}


def test_refusals_are_counted_by_error_code_and_forget_the_pub_they_answer() -> None:
    s = Shell(core("b"))
    s.feed(ZkView(state(1, "a", "ab"), members("ab"), None, 0.0))
    s.feed(ClientFrameIn("prod", Pub(7, "t", recs("u1")), 0.1))
    s.feed(ClientFrameIn("prod", Pub(8, "t", recs("u2")), 0.1))
    assert s.value("tritonmq_requests_refused_total", code="NOT_PRIMARY") == 2
    assert s.value("tritonmq_requests_refused_total", code="FULL") == 0
    assert s.m._pubs == {id("prod"): {}}


def test_a_backup_taking_over_counts_an_election_a_failover_its_pause_and_an_isr_shrink() -> None:
    s = Shell(core("b"))
    s.feed(ZkView(state(1, "a", "ab"), members("ab"), None, 0.0))
    s.m.event_in(PrimaryFrame(1, None, 1.0))  # type: ignore[arg-type]  # last heard from a
    out = s.feed(ZkView(state(1, "a", "ab"), members("b"), None, 3.0))  # a's session expired
    [claim] = [a for a in out if isinstance(a, ProposeState)]
    assert s.value("tritonmq_leader_elections_total") == 0
    s.feed(CasDone(claim.request, CasOutcome.OK, dataclasses.replace(claim.state, version=1), 3.5))
    assert s.value("tritonmq_leader_elections_total") == 1
    assert s.value("tritonmq_failovers_total") == 1
    assert s.value("tritonmq_failover_pause_seconds_count") == 1
    assert s.value("tritonmq_failover_pause_seconds_sum") == 2.5
    assert s.value("tritonmq_isr_shrinks_total") == 1  # a left the ISR with b's claim
    assert s.value("tritonmq_isr_expands_total") == 0


def test_after_an_idle_spell_the_pause_counts_from_the_first_sign_the_primary_was_gone() -> None:
    s = Shell(core("b"))
    s.feed(ZkView(state(1, "a", "ab"), members("ab"), None, 0.0))
    s.m.event_in(PrimaryFrame(1, None, 1.0))  # type: ignore[arg-type]  # then nothing: idle
    s.m.event_in(LinkEvent(1, LinkEnd.CLOSED, 60.0))  # a's process died: its socket closed
    s.m.event_in(LinkEvent(1, LinkEnd.REFUSED, 60.5))
    out = s.feed(ZkView(state(1, "a", "ab"), members("b"), None, 62.0))
    [claim] = [a for a in out if isinstance(a, ProposeState)]
    s.feed(CasDone(claim.request, CasOutcome.OK, dataclasses.replace(claim.state, version=1), 62.5))
    assert s.value("tritonmq_failover_pause_seconds_sum") == 2.5


def test_the_first_primary_of_a_group_is_an_election_not_a_failover() -> None:
    s = Shell(core("a"))
    [create] = [
        a for a in s.feed(ZkView(None, members("a"), None, 0.0)) if isinstance(a, ProposeState)
    ]
    s.feed(
        CasDone(create.request, CasOutcome.OK, dataclasses.replace(create.state, version=0), 0.1)
    )
    assert s.value("tritonmq_leader_elections_total") == 1
    assert s.value("tritonmq_failovers_total") == 0
    assert s.value("tritonmq_isr_shrinks_total") == 0


def test_isr_changes_the_primary_sees_are_counted_as_expands_and_shrinks() -> None:
    s = Shell(leading(isr="ab", live="abc"))
    s.m.handled(ZkView(state(1, "a", "ab", version=1), members("abc"), None, 0.0))  # baseline
    s.feed(ZkView(state(1, "a", "abc", version=2), members("abc"), None, 1.0))
    assert s.value("tritonmq_isr_expands_total") == 1
    s.feed(ZkView(state(1, "a", "ac", version=3), members("ac"), None, 2.0))
    assert s.value("tritonmq_isr_shrinks_total") == 1
    assert s.value("tritonmq_isr_expands_total") == 1


def test_a_backup_counts_no_isr_change_it_did_not_write() -> None:
    s = Shell(core("b"))
    s.feed(ZkView(state(1, "a", "ab"), members("abc"), None, 0.0))
    s.feed(ZkView(state(1, "a", "abc"), members("abc"), None, 1.0))
    s.feed(ZkView(state(1, "a", "a"), members("abc"), None, 2.0))
    assert s.value("tritonmq_isr_expands_total") == 0
    assert s.value("tritonmq_isr_shrinks_total") == 0


def scrape(s: Shell) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    body, content_type = s.m.exposition(None)
    assert content_type.startswith("text/plain")
    out: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(body.decode()):
        for sample in family.samples:
            labels = tuple(sorted((k, v) for k, v in sample.labels.items() if k != "group"))
            out.setdefault(sample.name, {})[labels] = sample.value
    return out


def test_gauges_describe_the_primary_its_isr_memory_and_subscription_lag() -> None:
    s = Shell(leading(isr="a", live="a", replicas=1), connections=(4, 2))
    s.feed(ClientFrameIn("prod", Pub(1, "t", recs("u1", "u2")), 0.1, wall_ms=1))
    s.feed(ClientFrameIn("app", Commit(5, "t", "q", 0), 0.2))
    s.core.handle(SubscriptionRegistered("t", "q", 0, 0.3))
    m = scrape(s)
    assert m["tritonmq_is_primary"] == {(): 1.0}
    assert m["tritonmq_role"][(("role", "leading"),)] == 1.0
    assert m["tritonmq_role"][(("role", "following"),)] == 0.0
    assert m["tritonmq_epoch"] == {(): 1.0}
    assert m["tritonmq_insync_replicas"] == {(): 1.0}
    assert m["tritonmq_under_replicated"] == {(): 0.0}
    assert m["tritonmq_under_min_isr"] == {(): 0.0}
    assert m["tritonmq_ready"] == {(): 1.0}
    assert m["tritonmq_retained_records"] == {(): 2.0}
    assert m["tritonmq_retained_bytes"][()] > 0
    assert m["tritonmq_max_bytes"] == {(): float(s.core.cfg.max_bytes)}
    assert m["tritonmq_client_connections"] == {(): 4.0}
    assert m["tritonmq_connections_refused_total"] == {(): 2.0}
    key = (("subscription", "q"), ("topic", "t"))
    assert m["tritonmq_subscription_lag_records"] == {key: 2.0}
    assert m["tritonmq_subscription_lag_seconds"][key] > 0


def test_a_primary_below_its_replicas_and_min_insync_says_so() -> None:
    s = Shell(leading(isr="a", live="abc"))  # replicas 3, min_insync 2
    m = scrape(s)
    assert m["tritonmq_under_replicated"] == {(): 1.0}
    assert m["tritonmq_under_min_isr"] == {(): 1.0}
    assert m["tritonmq_min_insync_replicas"] == {(): 2.0}


def test_a_backup_reports_the_group_without_counting_it_under_replicated() -> None:
    s = Shell(core("b"))
    s.feed(ZkView(state(1, "a", "a"), members("ab"), None, 0.0))
    m = scrape(s)
    assert m["tritonmq_is_primary"] == {(): 0.0}
    assert m["tritonmq_under_replicated"] == {(): 0.0}
    assert m["tritonmq_ready"] == {(): 0.0}
    assert m["tritonmq_role"][(("role", "following"),)] == 1.0


def test_before_the_core_exists_only_connections_are_reported() -> None:
    s = Shell(core("a"))
    s.core = None  # type: ignore[assignment]
    m = scrape(s)
    assert "tritonmq_client_connections" in m and "tritonmq_role" not in m


def test_every_code_has_a_counter_from_the_start() -> None:
    s = Shell(core("a"))
    m = scrape(s)
    codes = {dict(k)["code"] for k in m["tritonmq_requests_refused_total"]}
    assert codes == {c.name for c in ErrorCode}
