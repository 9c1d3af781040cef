"""Routing by slot: a topic's group and the brokers to try for it."""

from __future__ import annotations

from tritonmq.client.routing import ClusterView
from tritonmq.core.slots import SlotMap, slot_of

GROUPS = {
    "g1": {"primary_url": "ws://a:1", "members": {"a": "ws://a:1", "b": "ws://b:1"}},
    "g2": {"primary_url": None, "members": {"c": "ws://c:1", "d": "ws://d:1"}},
}


def test_a_topic_goes_to_its_slots_owner() -> None:
    smap = SlotMap.spread(["g1", "g2"], 64)
    view = ClusterView.from_info({"groups": GROUPS, "slots": smap.as_dict()})
    # The documented example (docs/protocol.md §4): "orders" is slot 46 of 64.
    assert slot_of("orders", 64) == 46
    assert view.group_of("orders") == smap.owners[46] == "g1"
    assert {view.group_of(f"t{i}") for i in range(50)} == {"g1", "g2"}


def test_without_a_slot_map_everything_goes_to_the_first_group() -> None:
    view = ClusterView.from_info({"groups": GROUPS, "slots": None})
    assert view.group_of("anything") == "g1"
    assert ClusterView().group_of("t") == ""


def test_candidates_primary_first_then_members() -> None:
    view = ClusterView.from_info({"groups": GROUPS})
    assert view.candidates("g1") == ["ws://a:1", "ws://b:1"]
    assert view.candidates("g2") == ["ws://c:1", "ws://d:1"]
    assert view.candidates("g9") == []
    assert view.member_url("g2", "d") == "ws://d:1" and view.member_url("g2", "x") is None
    assert view.urls() == ["ws://a:1", "ws://b:1", "ws://c:1", "ws://d:1"]
