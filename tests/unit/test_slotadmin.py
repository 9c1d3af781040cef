"""The ``slotmove`` admin op (core/slotadmin.py) as a broker's core answers it: refused by
the broker's view or for want of the admin claim, else a CAS for the shell whose outcome is
told to the asker; and the rule the shell's CAS applies to what ZooKeeper holds."""

from __future__ import annotations

import pytest
from test_core_broker import following, leading

from tritonmq.core.actions import BeginSlotMove, SendError, SendSlotInfo
from tritonmq.core.auth import Principal
from tritonmq.core.broker import BrokerCore
from tritonmq.core.events import CasOutcome, ClientFrameIn, ClientGone, SlotMoveBegun
from tritonmq.core.slotadmin import begin_move_among
from tritonmq.core.slothistory import Move, SlotHistory, SlotState
from tritonmq.core.slots import SlotMap
from tritonmq.errors import IllegalSlotTransition
from tritonmq.wire.frames import ErrorCode, Hello, SlotInfo, SlotMove

MAP = SlotMap(("g0", "g1", "g0", "g1"))
MOVING = SlotHistory("g0", state=SlotState.MOVING, move=Move("g1"))


def with_map(c: BrokerCore, smap: SlotMap | None = MAP) -> BrokerCore:
    c.slots = smap  # as the latest ZkView brought it
    return c


def ask(c: BrokerCore, frame: SlotMove, conn: str = "admin") -> list:  # type: ignore[type-arg]
    return c.handle(ClientFrameIn(conn, frame, 1.0))


def refusal(actions: list) -> tuple[ErrorCode, int | None, str]:  # type: ignore[type-arg]
    [err] = actions
    assert isinstance(err, SendError)
    return err.code, err.id, err.message


def test_a_move_the_view_allows_is_written_by_the_shell_and_its_outcome_answered() -> None:
    c = with_map(leading(isr="a", live="a", replicas=1))
    [begin] = ask(c, SlotMove(7, 2, "g1"))
    assert begin == BeginSlotMove(begin.request, 2, "g1")
    written = SlotHistory("g0", state=SlotState.MOVING, move=Move("g1"))
    out = c.handle(SlotMoveBegun(begin.request, CasOutcome.OK, written, "", 1.1))
    assert out == [SendSlotInfo("admin", SlotInfo(7, 2, "g0", 0, "moving", "g1"))]
    assert c.handle(SlotMoveBegun(begin.request, CasOutcome.OK, written, "", 1.2)) == []


def test_any_broker_takes_a_slotmove_not_only_a_primary() -> None:
    c = with_map(following("b"))
    [begin] = ask(c, SlotMove(1, 0, "g1"))
    assert isinstance(begin, BeginSlotMove) and (begin.slot, begin.to) == (0, "g1")


def test_what_the_view_refuses_costs_zookeeper_nothing() -> None:
    c = with_map(leading(isr="a", live="a", replicas=1))
    assert refusal(ask(c, SlotMove(1, 4, "g1")))[:2] == (ErrorCode.BAD_REQUEST, 1)
    assert "slots 0..3" in refusal(ask(c, SlotMove(2, 9, "g1")))[2]
    assert "cannot move a slot of g1 to 'g1'" in refusal(ask(c, SlotMove(3, 1, "g1")))[2]
    with_map(c, SlotMap(MAP.owners, 1, ((0, MOVING),)))
    assert "already moving" in refusal(ask(c, SlotMove(4, 0, "g1")))[2]
    with_map(c, None)
    assert "no slot map" in refusal(ask(c, SlotMove(5, 0, "g1")))[2]


def test_a_lost_race_or_an_unknown_outcome_is_a_typed_error() -> None:
    c = with_map(leading(isr="a", live="a", replicas=1))
    [first] = ask(c, SlotMove(1, 0, "g9"))
    [second] = ask(c, SlotMove(2, 2, "g1"))
    why = "no group 'g9' in the cluster (groups: g0, g1)"
    out = c.handle(SlotMoveBegun(first.request, CasOutcome.CONFLICT, None, why, 1.1))
    assert refusal(out) == (ErrorCode.BAD_REQUEST, 1, f"slot 0: {why}")
    out = c.handle(SlotMoveBegun(second.request, CasOutcome.UNKNOWN, None, "ConnectionLoss", 1.1))
    code, rid, msg = refusal(out)
    assert (code, rid) == (ErrorCode.UNAVAILABLE, 2) and code.retriable
    assert "may have begun" in msg


def test_an_answer_for_a_connection_that_closed_goes_nowhere() -> None:
    c = with_map(leading(isr="a", live="a", replicas=1))
    [begin] = ask(c, SlotMove(1, 0, "g1"))
    c.handle(ClientGone("admin", 1.05))
    assert c.handle(SlotMoveBegun(begin.request, CasOutcome.OK, MOVING, "", 1.1)) == []


def test_only_an_admin_may_move_a_slot() -> None:
    c = with_map(leading(isr="a", live="a", replicas=1, auth_required=True))
    bob = Principal("bob", pub=("*",), read=("*",), names=("*",))
    root = Principal("root", admin=True)
    for conn, who in (("bob", bob), ("root", root)):
        assert c.handle(ClientFrameIn(conn, Hello("t", "tok"), 0.5, 0, who))[0].info["id"] == 0
    code, rid, msg = refusal(ask(c, SlotMove(3, 0, "g1"), "bob"))
    assert (code, rid) == (ErrorCode.FORBIDDEN, 3) and msg == "'bob' may not move slot 0"
    assert refusal(ask(c, SlotMove(4, 0, "g1"), "stranger"))[0] is ErrorCode.UNAUTHENTICATED
    [begin] = ask(c, SlotMove(5, 0, "g1"), "root")
    assert isinstance(begin, BeginSlotMove)


def test_the_shells_cas_moves_only_to_a_group_the_cluster_has() -> None:
    h = SlotHistory("g0")
    assert begin_move_among(h, "g1", {"g0", "g1"}) == MOVING
    with pytest.raises(IllegalSlotTransition, match="no group 'g2'"):
        begin_move_among(h, "g2", {"g0", "g1"})
    with pytest.raises(IllegalSlotTransition, match="already moving"):
        begin_move_among(MOVING, "g1", {"g0", "g1"})
