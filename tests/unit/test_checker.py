"""The chaos checker on synthetic histories: each kind of violation is found, and a
clean history passes."""

from __future__ import annotations

import pytest

from tritonmq.devtools.checker import Checker, Mode, Verdict, parse_value, record_value

TOPICS = ("a", "b")
SUBS = {"audit": Mode.BROADCAST, "workers": Mode.SHARED}


def history(n: int = 6, producers: int = 2) -> Checker:
    """``producers`` producers each publish ``n`` records alternating over a, b; all acked
    (ts = 10 * seq + producer, at time seq)."""
    c = Checker(TOPICS, SUBS)
    for p in range(producers):
        for seq in range(n):
            c.sent(p, seq, TOPICS[seq % 2])
            c.acked(p, seq, 10 * seq + p, float(seq))
    return c


def deliver_all(
    c: Checker, n: int = 6, producers: int = 2, skip: frozenset[tuple[int, int]] = frozenset()
) -> None:
    for p in range(producers):
        for seq in range(n):
            if (p, seq) in skip:
                continue
            topic = TOPICS[seq % 2]
            c.delivered("audit", "audit-0", topic, 10 * seq + p, record_value(p, seq))
            member = f"workers-{seq % 2}"  # the shared subscription splits them
            c.delivered("workers", member, topic, 10 * seq + p, record_value(p, seq))


def test_a_clean_history_passes() -> None:
    c = history()
    deliver_all(c)
    v = c.verdict(faults=3)
    assert v.ok
    assert (v.faults, v.acked, v.lost, v.dup, v.order_violations, v.phantom, v.unknown) == (
        3,
        12,
        0,
        0,
        0,
        0,
        0,
    )
    assert v.longest_pause == 1.0


def test_an_acked_record_missing_from_one_subscription_is_lost() -> None:
    c = history()
    deliver_all(c)
    c2 = history()
    deliver_all(c2, skip=frozenset({(1, 3)}))
    assert c.verdict(0).lost == 0
    v = c2.verdict(0)
    assert v.lost == 1 and not v.ok
    assert v.details["lost_per_subscription"] == {"audit": 1, "workers": 1}
    assert v.details["lost_examples"]["audit"] == [("b", 1, 3, 31)]


def test_a_shared_subscription_needs_each_record_once_across_its_members() -> None:
    c = history()
    deliver_all(c)  # workers-0 and workers-1 split the records: nothing lost
    assert c.verdict(0).details["lost_per_subscription"]["workers"] == 0
    c.delivered("workers", "workers-0", "b", 11, record_value(1, 1))  # workers-1 had it
    v = c.verdict(0)
    assert v.dup == 1 and v.details["dup_per_subscription"] == {"workers": 1}


def test_unknown_outcomes_are_reported_not_lost() -> None:
    c = Checker(TOPICS, SUBS)
    c.sent(0, 0, "a")
    c.acked(0, 0, 5, 0.0)
    c.sent(0, 1, "a")
    c.unknown(0, 1)  # timed out: never delivered, and that is allowed
    c.sent(0, 2, "a")  # never answered at all
    c.delivered("audit", "audit-0", "a", 5, record_value(0, 0))
    c.delivered("workers", "workers-0", "a", 5, record_value(0, 0))
    v = c.verdict(0)
    assert (v.acked, v.lost, v.unknown) == (1, 0, 2) and v.ok


def test_an_unknown_record_that_was_stored_after_all_is_no_phantom() -> None:
    c = Checker(TOPICS, SUBS)
    c.sent(0, 0, "a")
    c.unknown(0, 0)
    c.delivered("audit", "audit-0", "a", 7, record_value(0, 0))
    assert c.verdict(0).phantom == 0


def test_the_same_record_twice_in_one_subscription_is_a_dup() -> None:
    c = history()
    deliver_all(c)
    c.delivered("audit", "audit-0", "a", 0, record_value(0, 0))
    v = c.verdict(0)
    assert v.dup == 1 and not v.ok
    assert v.details["examples"]["dup"] == [("audit", "audit-0", "a", 0, 0, 0)]


def test_the_same_record_in_two_subscriptions_is_no_dup() -> None:
    c = history()
    deliver_all(c)
    assert c.verdict(0).dup == 0  # audit and workers each got every record once


def test_a_producer_s_records_out_of_send_order_within_a_topic_are_order_violations() -> None:
    c = history(n=6, producers=1)
    for seq in (0, 4, 2):  # topic a: seqs 0, 2, 4 were sent in that order
        c.delivered("audit", "audit-0", "a", 10 * seq, record_value(0, seq))
    v = c.verdict(0)
    assert v.order_violations == 1 and not v.ok


def test_order_is_per_topic_and_per_producer() -> None:
    c = history(n=4, producers=2)
    # Interleaving topics and producers in any way keeps each (topic, producer) in order.
    for p, seq in ((1, 1), (0, 0), (0, 1), (1, 0), (0, 2), (1, 2), (1, 3), (0, 3)):
        c.delivered("audit", "audit-0", TOPICS[seq % 2], 10 * seq + p, record_value(p, seq))
    assert c.verdict(0).order_violations == 0


def test_a_shared_subscription_is_not_held_to_order() -> None:
    c = history(n=6, producers=1)
    for seq in (4, 0, 2):
        c.delivered("workers", "workers-0", "a", 10 * seq, record_value(0, seq))
    assert c.verdict(0).order_violations == 0


@pytest.mark.parametrize(
    ("topic", "value"),
    [
        ("a", b"garbage"),  # not a record of this run
        ("a", record_value(7, 0)),  # no such producer
        ("a", record_value(0, 99)),  # never sent
        ("b", record_value(0, 0)),  # sent to a, delivered on b
    ],
)
def test_what_was_never_published_is_a_phantom(topic: str, value: bytes) -> None:
    c = history()
    c.delivered("audit", "audit-0", topic, 1, value)
    v = c.verdict(0)
    assert v.phantom == 1 and not v.ok


def test_a_delivered_ts_other_than_the_acknowledged_one_is_reported() -> None:
    c = history()
    c.delivered("audit", "audit-0", "a", 999, record_value(0, 0))
    assert c.verdict(0).details["ts_mismatch"] == 1


def test_the_longest_pause_is_the_longest_gap_between_acks_or_until_the_producer_stopped() -> None:
    c = Checker(TOPICS, SUBS)
    for seq, t in enumerate((0.0, 0.5, 3.5, 4.0)):
        c.sent(0, seq, "a")
        c.acked(0, seq, seq, t)
    assert c.verdict(0).longest_pause == 3.0
    c.producer_stopped(0, 9.0)  # stalled from 4.0 until it stopped trying
    assert c.verdict(0).longest_pause == 5.0


def test_a_seq_sent_twice_is_a_bug_of_the_run_not_a_record() -> None:
    c = Checker(TOPICS, SUBS)
    c.sent(0, 0, "a")
    with pytest.raises(ValueError, match="twice"):
        c.sent(0, 0, "a")


def test_values_round_trip_and_others_are_rejected() -> None:
    assert parse_value(record_value(3, 12345)) == (3, 12345)
    for bad in (b"", b"3", b"3:", b":3", b"x:1", b"1:-2"):
        assert parse_value(bad) is None


def test_the_columns_are_the_documented_ones() -> None:
    assert Verdict.COLUMNS == (
        "faults",
        "acked",
        "lost",
        "dup",
        "order_violations",
        "phantom",
        "unknown",
        "longest_pause",
    )


def test_many_records_are_checked_compactly() -> None:
    c = Checker(TOPICS, SUBS)
    n = 50_000
    for seq in range(n):
        c.sent(0, seq, "a")
        c.acked(0, seq, seq, 0.0)
        c.delivered("audit", "audit-0", "a", seq, record_value(0, seq))
        if seq != 12_345:
            c.delivered("workers", "workers-0", "a", seq, record_value(0, seq))
    v = c.verdict(0)
    assert (v.acked, v.lost) == (n, 1)
    assert v.details["lost_examples"]["workers"] == [("a", 0, 12_345, 12_345)]
