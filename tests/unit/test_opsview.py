"""What the operator CLI shows (tritonmq/opsview.py): ZooKeeper's view joined with each
primary's ``stats``, the --to parser, and the cell formats."""

from __future__ import annotations

from typing import Any

import pytest

from tritonmq.core.slots import slot_of
from tritonmq.opsview import (
    Snapshot,
    fmt_age,
    fmt_bytes,
    fmt_rate,
    fmt_seconds,
    group_rows,
    parse_reset_target,
    slot_figures,
    subscription_rows,
    topic_rows,
)
from tritonmq.wire.frames import StatsReply, SubStats, TopicStats

CLUSTER: dict[str, Any] = {
    "groups": {
        "g1": {"epoch": 4, "primary": "b1", "isr": ["b1", "b2"], "members": {"b1": "u", "b2": "u"}},
        "g2": {"epoch": 2, "primary": "b4", "isr": ["b4"], "members": {"b4": "u", "b5": "u"}},
    },
    "slots": {"slots": 2, "owners": ["g1", "g2"], "version": 0},
}
ZK_SUBS = [
    {"topic": "a", "name": "billing", "mode": "broadcast", "owner": "alice", "offset": 10},
    {"topic": "b", "name": "audit", "mode": "shared", "owner": None, "offset": 3},
]


def owner(topic: str) -> str:
    return "g1" if slot_of(topic, 2) == 0 else "g2"


def stats(group: str, topics: tuple[TopicStats, ...], subs: tuple[SubStats, ...]) -> StatsReply:
    return StatsReply(1, group, "b1", "primary", 4, 20, 7, 700, 1000, 3.0, 0, topics, subs)


def snapshot(answered: tuple[str, ...] = ("g1", "g2")) -> Snapshot:
    per_group: dict[str, list[Any]] = {"g1": [[], []], "g2": [[], []]}
    per_group[owner("a")][0].append(TopicStats("a", 5, 500, 11, 15, 1_000, 3.0, 1))
    per_group[owner("a")][1].append(SubStats("a", "billing", "broadcast", 12, 10, 3, 2500, 1))
    per_group[owner("b")][1].append(SubStats("b", "new", "broadcast", 0, None, 0, 0, 0))
    snap = Snapshot(CLUSTER, ZK_SUBS, taken_at=10.0)
    for g in answered:
        t, s = per_group[g]
        snap.stats[g] = stats(g, tuple(t), tuple(s))
    for g in {"g1", "g2"} - set(answered):
        snap.unanswered[g] = "its primary did not answer within 5s"
    return snap


def test_a_topic_row_joins_its_slot_group_and_retained_records() -> None:
    rows = {r["topic"]: r for r in topic_rows(snapshot())}
    a = rows["a"]
    assert (a["group"], a["slot"], a["records"], a["bytes"], a["rate"]) == (
        owner("a"),
        slot_of("a", 2),
        5,
        500,
        3.0,
    )
    assert (a["consumers"], a["subscriptions"], a["last_publish_ms"]) == (1, 1, 1_000)
    b = rows["b"]  # known from ZooKeeper only: its primary holds nothing of it
    assert (b["records"], b["subscriptions"]) == (0, 1)


def test_a_group_that_did_not_answer_shows_zookeeper_s_figures_only() -> None:
    other = "g2" if owner("a") == "g1" else "g1"
    rows = {r["topic"]: r for r in topic_rows(snapshot(answered=(other,)))}
    assert rows["a"]["records"] is None and rows["a"]["subscriptions"] == 1
    subs = {r["name"]: r for r in subscription_rows(snapshot(answered=()))}
    assert subs["billing"]["offset"] == 10 and subs["billing"]["lag"] is None
    [g1, g2] = group_rows(snapshot(answered=()))
    assert not g1["answered"] and g1["records"] is None and "did not answer" in g1["error"]


def test_a_subscription_row_takes_the_primary_s_offset_and_lag() -> None:
    subs = {r["name"]: r for r in subscription_rows(snapshot())}
    billing = subs["billing"]
    assert (billing["offset"], billing["stored"], billing["head"]) == (12, 10, 20)
    assert (billing["lag"], billing["lag_s"], billing["consumers"]) == (3, 2.5, 1)
    assert (billing["owner"], billing["group"]) == ("alice", owner("a"))
    audit = subs["audit"]  # in ZooKeeper, not in its primary's answer: nothing waits
    assert (audit["lag"], audit["consumers"], audit["mode"]) == (0, 0, "shared")
    new = subs["new"]  # still registering: only its primary knows it
    assert (new["stored"], new["owner"], new["group"]) == (None, None, owner("b"))
    assert [r["name"] for r in subscription_rows(snapshot(), "a")] == ["billing"]


def test_group_rows_flag_an_isr_smaller_than_the_members_and_count_failovers() -> None:
    g1, g2 = group_rows(snapshot(), {"g2": 2})
    assert (g1["under_replicated"], g2["under_replicated"]) == (False, True)
    assert (g1["failovers_seen"], g2["failovers_seen"]) == (0, 2)
    assert g1["rate"] == 3.0 and g1["max_bytes"] == 1000


def test_slot_figures_sum_their_topics_and_are_unknown_where_the_primary_did_not_answer() -> None:
    snap = snapshot()
    two = TopicStats("a2", 2, 40, 16, 17, 1_000, 1.5, 0)  # a second topic in a's slot
    while slot_of(two.topic, 2) != slot_of("a", 2):
        two = TopicStats(two.topic + "x", 2, 40, 16, 17, 1_000, 1.5, 0)
    g = owner("a")
    snap.stats[g] = stats(g, (*snap.stats[g].topics, two), snap.stats[g].subscriptions)
    assert slot_of("a", 2) == slot_of("b", 2) == 1  # b: a durable subscription, no records
    figures = slot_figures(snap)
    assert figures[1] == {"topics": 3, "records": 7, "bytes": 540, "rate": 4.5}
    assert figures[0] == {"topics": 0, "records": 0, "bytes": 0, "rate": 0.0}  # g1's, empty
    other = "g2" if g == "g1" else "g1"
    silent = slot_figures(snapshot(answered=(other,)))[slot_of("a", 2)]
    assert silent == {"topics": None, "records": None, "bytes": None, "rate": None}
    assert slot_figures(Snapshot({"groups": {}, "slots": None}, [])) == {}


@pytest.mark.parametrize(
    ("text", "want"), [("earliest", "earliest"), ("latest", "latest"), ("0", 0), ("42", 42)]
)
def test_reset_targets(text: str, want: str | int) -> None:
    assert parse_reset_target(text) == want


@pytest.mark.parametrize("text", ["soon", "-1", "1.5", "", "²", "0x10"])
def test_a_bad_reset_target_says_what_is_allowed(text: str) -> None:
    with pytest.raises(ValueError, match="--to must be earliest, latest or a ts"):
        parse_reset_target(text)


def test_cells() -> None:
    assert [fmt_bytes(n) for n in (None, 0, 1023, 1536, 5 * 2**20, 3 * 2**40)] == [
        "-",
        "0 B",
        "1023 B",
        "1.5 KiB",
        "5.0 MiB",
        "3.0 TiB",
    ]
    assert [fmt_rate(r) for r in (None, 0.0, 12.345, 25_000.0)] == [
        "-",
        "0.0/s",
        "12.3/s",
        "25,000/s",
    ]
    assert [fmt_seconds(s) for s in (None, 0, 0.25, 12.34, 245, 7380)] == [
        "-",
        "0",
        "250ms",
        "12.3s",
        "4m05s",
        "2h03m",
    ]
    assert fmt_age(None, 10.0) == "-" and fmt_age(8_000, 10.0) == "2.0s"


def test_json_rows_have_stable_keys() -> None:
    """Scripts read these keys (`--json`): a change here is a change to the CLI's interface."""
    snap = snapshot()
    assert set(topic_rows(snap)[0]) == {
        "topic",
        "group",
        "slot",
        "records",
        "bytes",
        "first_ts",
        "last_ts",
        "last_publish_ms",
        "rate",
        "consumers",
        "subscriptions",
    }
    assert set(subscription_rows(snap)[0]) == {
        "topic",
        "name",
        "mode",
        "owner",
        "group",
        "offset",
        "stored",
        "head",
        "lag",
        "lag_s",
        "consumers",
    }
    assert set(group_rows(snap)[0]) == {
        "group",
        "epoch",
        "primary",
        "primary_url",
        "isr",
        "members",
        "under_replicated",
        "records",
        "bytes",
        "max_bytes",
        "commit",
        "rate",
        "max_lag",
        "max_lag_s",
        "failovers_seen",
        "answered",
        "error",
    }
