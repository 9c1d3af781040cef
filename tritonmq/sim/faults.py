"""The faults a seed schedules: which, against whom, when, for how long."""

from __future__ import annotations

import enum
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tritonmq.sim.network import ZK


class FaultKind(enum.Enum):
    CRASH = "crash"  # SIGKILL, memory lost; restarted later with a new boot id
    RESTART = "restart"
    FREEZE = "freeze"  # SIGSTOP
    THAW = "thaw"
    PARTITION = "partition"  # one broker <-> broker link
    ZK_CUT = "zk-cut"  # one broker <-> ZooKeeper
    HEAL = "heal"
    ZK_LOSS = "zk-loss"  # the group's next CAS ends in ConnectionLoss (outcome unknown)
    SLOW_WATCHES = "slow-watches"  # watches fire late from now on
    # the operator begins moving a topic's slot to another group (by CAS, as `tritonmq
    # slots move` does), or rolls back the move it finds running (`slots roll-back`)
    MOVE_SLOT = "move-slot"
    # The process lives (its ZooKeeper session too) but its listener is down: connections
    # to it are reset and new dials are refused (issue 6, bug 6: a live primary refusing).
    REFUSE = "refuse"
    LISTEN = "listen"
    # with disks (SimParams.disks): every broker of the group at once; a crash whose last
    # write is cut short; a crash with a bit of its files flipped (restarted after each)
    CRASH_GROUP = "crash-group"
    TEAR = "tear"
    FLIP = "flip"


# Kinds the schedule draws from, with weights.
DRAWN: tuple[tuple[FaultKind, int], ...] = (
    (FaultKind.CRASH, 3),
    (FaultKind.FREEZE, 3),
    (FaultKind.PARTITION, 2),
    (FaultKind.ZK_CUT, 2),
    (FaultKind.ZK_LOSS, 2),
    (FaultKind.SLOW_WATCHES, 1),
)
# Drawn too with ``params.refusals`` (on in CI since the core holes they found are fixed:
# docs/findings.md, "Random refusals find holes in the core").
REFUSALS: tuple[tuple[FaultKind, int], ...] = ((FaultKind.REFUSE, 2),)
# Drawn too with ``params.disks``.
DISK_FAULTS: tuple[tuple[FaultKind, int], ...] = (
    (FaultKind.CRASH_GROUP, 2),
    (FaultKind.TEAR, 1),
    (FaultKind.FLIP, 2),
)


@dataclass(frozen=True, slots=True)
class Fault:
    kind: FaultKind
    target: str
    at: float
    duration: float
    other: str = ""


def schedule_faults(
    rng: random.Random, params: Any, names: Sequence[str], group_of: Mapping[str, str]
) -> list[Fault]:
    """``params.faults`` faults spread over the publishing period, against brokers."""
    brokers = [n for n in names if n[len(group_of[n]) :].startswith("b")]
    base = params.fault_weights or DRAWN
    drawn = base + REFUSALS if params.refusals else base
    if getattr(params, "disks", False):
        drawn = drawn + DISK_FAULTS
    kinds = [k for k, _ in drawn]
    weights = [w for _, w in drawn]
    out: list[Fault] = []
    for _ in range(params.faults):
        kind = rng.choices(kinds, weights)[0]
        at = rng.uniform(1.0, params.publish_until)
        target = rng.choice(brokers)
        duration = rng.uniform(0.2, 3.0)
        other = ""
        if kind is FaultKind.PARTITION:
            peers = [b for b in brokers if b != target and group_of[b] == group_of[target]]
            other = rng.choice(peers) if peers else ZK
        if kind is FaultKind.REFUSE:  # its listener is down, or it rejects one peer
            peers = [b for b in brokers if b != target and group_of[b] == group_of[target]]
            other = rng.choice(["", *peers])
        out.append(Fault(kind, target, at, duration, other))
    if moves_on(params):
        out.extend(_moves(rng, params, sorted({group_of[b] for b in brokers})))
    return out


# What may strike one of the two primaries right after an operator's move, with weights.
AROUND_MOVES: tuple[tuple[FaultKind, int], ...] = (
    (FaultKind.CRASH, 2),
    (FaultKind.FREEZE, 2),
    (FaultKind.ZK_CUT, 1),
    (FaultKind.ZK_LOSS, 1),
)


def moves_on(params: Any) -> bool:
    """Moves are drawn with two groups or more."""
    return bool(params.groups >= 2 and params.moves)


def _moves(rng: random.Random, params: Any, groups: Sequence[str]) -> list[Fault]:
    """``params.moves`` operator steps on the groups' producer-only topics (``gN.m``),
    drawn after every other fault so that a run without moves draws what it always did;
    half of them with a crash, freeze or ZooKeeper fault of either group's primary
    within 0.3 s (mid-move)."""
    out: list[Fault] = []
    kinds = [k for k, _ in AROUND_MOVES]
    weights = [w for _, w in AROUND_MOVES]
    for _ in range(params.moves):
        at = rng.uniform(0.5, params.publish_until)
        out.append(Fault(FaultKind.MOVE_SLOT, f"{rng.choice(groups)}.m", at, 0.0))
        if rng.random() < 0.5:
            kind = rng.choices(kinds, weights)[0]
            who = f"@primary:{rng.choice(groups)}"
            out.append(Fault(kind, who, at + rng.uniform(0.0, 0.3), rng.uniform(0.2, 2.0)))
    return out
