"""`tritonmq top` (tritonmq/cli_top.py): the failovers it counts between reads, and what a
frame shows."""

from __future__ import annotations

from typing import Any

from rich.console import Console

from tritonmq.cli_top import Watch, frame, snapshot_json
from tritonmq.opsview import Snapshot


def snap(epoch: int, primary: str, at: float = 0.0) -> Snapshot:
    group: dict[str, Any] = {
        "epoch": epoch,
        "primary": primary,
        "isr": [primary],
        "members": {"b1": "u", "b2": "u"},
    }
    return Snapshot({"groups": {"g1": group}, "slots": None}, [], taken_at=at)


def test_a_new_primary_is_a_failover_and_a_new_epoch_of_the_same_one_is_not() -> None:
    w = Watch()
    w.saw(snap(1, "b1"))
    w.saw(snap(1, "b1"))
    assert w.failovers == {} and w.events == []
    w.saw(snap(2, "b2"))
    w.saw(snap(3, "b2"))  # re-elected after a session blip: not a failover
    assert w.failovers == {"g1": 1}
    assert [e.split("  ", 1)[1] for e in w.events] == [
        "g1: primary b1 -> b2 (epoch 1 -> 2)",
        "g1: re-elected (epoch 2 -> 3)",
    ]


def test_only_the_last_events_are_kept() -> None:
    w = Watch()
    for e in range(20):
        w.saw(snap(e, f"b{e % 2}"))
    assert w.failovers == {"g1": 19} and len(w.events) == 8


def test_a_frame_shows_each_group_and_what_top_has_seen() -> None:
    w = Watch()
    w.saw(snap(1, "b1"))
    w.saw(snap(2, "b2"))
    console = Console(width=200, record=True)
    console.print(frame(snap(2, "b2"), w, 10, "zk:2181", "note: ZooKeeper slow"))
    text = console.export_text()
    assert "failovers seen: 1" in text and "note: ZooKeeper slow" in text
    assert "g1" in text and "b2 (no answer)" in text and "(1/2)" in text
    assert "g1: primary b1 -> b2" in text
    rows = snapshot_json(snap(2, "b2"), w)
    assert rows["groups"][0]["failovers_seen"] == 1 and rows["topics"] == []
