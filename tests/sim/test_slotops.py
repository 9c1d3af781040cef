"""Slot moves in simulated runs: the operator's steps, the checks after healing, and a CI
run of two-group seeds with moves."""

from __future__ import annotations

import random
import time

import pytest

from tritonmq.core.log import GroupLog
from tritonmq.core.slothistory import SlotState
from tritonmq.core.slots import slot_of
from tritonmq.sim import slotmodel, slotops
from tritonmq.sim.invariants import History
from tritonmq.sim.runner import run_many
from tritonmq.sim.world import SimParams
from tritonmq.sim.zkmodel import ZkModel

GROUPS = ("g0", "g1")
TOPICS = {"g0.m": "g0", "g1.m": "g1"}
CI_MOVE_SEEDS = 200
CI_MOVE_PARAMS = SimParams(groups=2, refusals=True, check_whole=True)


def _cluster() -> tuple[ZkModel, int]:
    zk = ZkModel(2.0)
    owners = slotmodel.plan_owners(GROUPS, TOPICS)
    slotmodel.create(zk, owners)
    return zk, slot_of("g0.m", len(owners))


def test_the_operator_moves_a_slot_to_another_group_or_rolls_back_the_move_running() -> None:
    zk, n = _cluster()
    what, _ = slotops.operator_step(zk, random.Random(1), GROUPS, "g0.m", 1.0)
    assert what == f"move slot {n} (g0.m) from g0 to g1"
    h = slotmodel.history_of(zk, "g0.m")
    assert h is not None and h.state is SlotState.MOVING and h.move is not None
    what, _ = slotops.operator_step(zk, random.Random(1), GROUPS, "g0.m", 2.0)
    assert what == f"roll back the move of slot {n} (g0.m) to g1"
    back = slotmodel.history_of(zk, "g0.m")
    assert back is not None and back.state is SlotState.NORMAL and back.owner == "g0"


def _log(*recs: tuple[int, str, bytes]) -> GroupLog:
    log = GroupLog()
    for ts, topic, uuid in recs:
        while log.last_ts < ts - 1:
            log.append_new("g.other", f"pad{log.last_ts}".encode(), None, b"", None)
        log.append_new(topic, uuid, None, b"v", None)
    return log


def test_after_healing_a_move_that_never_ended_is_a_violation() -> None:
    zk, _ = _cluster()
    slotops.operator_step(zk, random.Random(1), GROUPS, "g0.m", 1.0)
    h = History(2)
    slotops.check_after_healing(h, zk, {"g0p2": "g0.m"}, {})
    assert h.violations and "the move of g0.m's slot never ended" in h.violations[0]


def test_after_healing_a_record_stored_in_both_groups_or_outside_its_eras_is_a_violation() -> None:
    zk, _ = _cluster()
    h = History(2)
    h.published("g0", "g0p2", b"u1", 1)
    logs = {"g0": (_log((1, "g0.m", b"u1")), 1), "g1": (_log((1, "g0.m", b"u1")), 1)}
    slotops.check_after_healing(h, zk, {"g0p2": "g0.m"}, logs)
    assert h.violations == [
        "g1 holds g0.m's record ts 1 outside its eras: " + '{"group": "g0", "state": "normal"}'
    ]
    h = History(2)
    logs = {"g0": (_log((1, "g0.m", b"u1"), (2, "g0.m", b"u1")), 2)}
    slotops.check_after_healing(h, zk, {"g0p2": "g0.m"}, logs)
    assert h.violations and "stored twice: g0 ts 1 and g0 ts 2" in h.violations[0]
    h = History(2)  # not committed yet: a deposed primary's tail, truncated later
    slotops.check_after_healing(h, zk, {"g0p2": "g0.m"}, {"g1": (_log((1, "g0.m", b"u1")), 0)})
    assert h.violations == []


@pytest.mark.timeout(1200)  # no timing goal: the machine is shared; the time is printed
def test_two_group_seeds_with_slot_moves_break_no_invariant() -> None:
    t0 = time.monotonic()
    summary = run_many(0, CI_MOVE_SEEDS, jobs=2, params=CI_MOVE_PARAMS)
    elapsed = time.monotonic() - t0
    assert summary.seeds == CI_MOVE_SEEDS
    assert summary.faults > 3 * CI_MOVE_SEEDS  # moves and other faults really happened
    assert summary.failed == [], "\n\n".join(r.trace for r in summary.failed[:3])
    print(
        f"{CI_MOVE_SEEDS} two-group seeds with moves, {summary.steps} steps,"
        f" {summary.faults} faults, in {elapsed:.1f}s"
    )
