"""Election decisions from the group state and the live members: only in-sync replicas lead."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tritonmq.core.group import GroupState, Member, Verdict, decide


def member(id: str, boot: str | None = None) -> Member:
    return Member(id, f"ws://{id}:7000", boot or f"boot-{id}")


A, B, C = member("a"), member("b"), member("c")
C2 = member("c", "boot-c-restarted")
STATE = GroupState(
    epoch=3,
    primary="a",
    isr=("a", "b", "c"),
    boots={"a": "boot-a", "b": "boot-b", "c": "boot-c"},
    start_ts=10,
    version=7,
)


def live(*members: Member) -> dict[str, Member]:
    return {m.id: m for m in members}


def test_no_state_creates_the_group_with_me_as_primary() -> None:
    d = decide(A, None, live(A), last_ts=0)
    assert d.verdict is Verdict.CREATE
    assert d.state == GroupState(1, "a", ("a",), {"a": "boot-a"}, 1)


def test_a_live_primary_is_followed() -> None:
    d = decide(B, STATE, live(A, B, C), last_ts=20)
    assert d.verdict is Verdict.FOLLOW
    assert d.primary == A and d.state == STATE


def test_a_primary_back_from_a_lost_session_claims_a_new_epoch() -> None:
    d = decide(A, STATE, live(A, B), last_ts=20)
    assert d.verdict is Verdict.CLAIM and d.state is not None
    assert (d.state.epoch, d.state.primary, d.state.start_ts) == (STATE.epoch + 1, "a", 21)
    assert set(d.state.isr) <= {"a", "b"} and "a" in d.state.isr


def test_in_sync_backup_claims_when_the_primary_is_gone() -> None:
    d = decide(B, STATE, live(B, C2), last_ts=42)
    assert d.verdict is Verdict.CLAIM
    assert d.state is not None
    assert (d.state.epoch, d.state.primary, d.state.start_ts) == (4, "b", 43)
    assert d.state.isr == ("b",)  # c restarted: its new incarnation is not in sync
    assert dict(d.state.boots) == {"b": "boot-b"}
    assert d.state.version == 7  # the CAS is against the version we read


def test_claim_keeps_every_live_in_sync_member() -> None:
    d = decide(C, STATE, live(B, C), last_ts=42)
    assert d.verdict is Verdict.CLAIM and d.state is not None
    assert set(d.state.isr) == {"b", "c"} and d.state.primary == "c"
    assert dict(d.state.boots) == {"b": "boot-b", "c": "boot-c"}


def test_a_restarted_primary_is_gone_too() -> None:
    a2 = member("a", "boot-a-restarted")
    d = decide(B, STATE, live(a2, B), last_ts=42)
    assert d.verdict is Verdict.CLAIM and d.state is not None and d.state.primary == "b"
    # ...and the restarted primary itself, having lost its log, must not lead.
    assert decide(a2, STATE, live(a2, B), last_ts=0).verdict is Verdict.WAIT


def test_restarted_member_waits_while_an_in_sync_member_is_alive() -> None:
    d = decide(C2, STATE, live(B, C2), last_ts=0)
    assert d.verdict is Verdict.WAIT
    assert d.state == STATE


def test_no_in_sync_replica_alive_waits_unless_unclean_election() -> None:
    assert decide(C2, STATE, live(C2), last_ts=5).verdict is Verdict.WAIT
    d = decide(C2, STATE, live(C2), last_ts=5, unclean_election=True)
    assert d.verdict is Verdict.CLAIM and d.state is not None
    assert d.state.isr == ("c",)
    assert dict(d.state.boots) == {"c": "boot-c-restarted"}
    assert (d.state.epoch, d.state.primary, d.state.start_ts) == (4, "c", 6)


def test_a_broker_not_yet_registered_does_not_claim() -> None:
    assert decide(B, STATE, live(C), last_ts=42).verdict is Verdict.WAIT
    assert decide(B, STATE, live(), last_ts=42, unclean_election=True).verdict is Verdict.WAIT


@pytest.mark.parametrize(
    ("m", "expected"),
    [(A, True), (C, True), (C2, False), (member("d"), False), (None, False)],
)
def test_in_sync_means_same_id_and_same_incarnation(m: Member | None, expected: bool) -> None:
    assert STATE.in_sync(m) is expected


def test_state_json_has_the_documented_fields() -> None:
    assert json.loads(STATE.to_json()) == {
        "epoch": 3,
        "primary": "a",
        "isr": ["a", "b", "c"],
        "boots": {"a": "boot-a", "b": "boot-b", "c": "boot-c"},
        "start_ts": 10,
    }


ids = st.text(min_size=1, max_size=12)


@given(
    st.integers(0, 2**53),
    st.lists(ids, min_size=1, max_size=5, unique=True),
    st.integers(0, 2**53),
    st.integers(-1, 2**31),
    st.data(),
)
def test_state_json_round_trips(
    epoch: int, isr: list[str], start_ts: int, version: int, data: st.DataObject
) -> None:
    boots = {m: data.draw(ids) for m in isr}
    s = GroupState(epoch, isr[0], tuple(isr), boots, start_ts, version)
    assert GroupState.from_json(s.to_json(), version) == s


def test_a_primary_seen_dead_is_replaced_before_its_session_expires_and_left_out() -> None:
    # A's member znode is still there, but B saw A's port refuse connections.
    d = decide(B, STATE, live(A, B, C), last_ts=20, suspect=A)
    assert d.verdict is Verdict.CLAIM and d.state is not None
    assert d.state.primary == "b" and "a" not in d.state.isr
    # A suspicion about another incarnation (A restarted) changes nothing.
    a_again = Member("a", A.url, "new-boot")
    assert decide(B, STATE, live(A, B, C), last_ts=20, suspect=a_again).verdict is Verdict.FOLLOW
