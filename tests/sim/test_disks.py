"""Brokers with disks in the simulator (sim/disk.py, docs/replication.md D1-D3): the
product's frames, scan, replay and incarnation rule under crashes of whole groups, torn
writes and flipped bits; every invariant holds, and a group killed whole comes back."""

from __future__ import annotations

from tritonmq.sim.faults import Fault, FaultKind
from tritonmq.sim.trace import Trace
from tritonmq.sim.world import SimParams, World


def run_traced(seed: int, params: SimParams) -> tuple[str | None, str]:
    w = World(seed, params)
    w.trace = Trace(keep=1_000_000)
    r = w.run()
    return r.violation, w.trace.render(seed, r.violation)


def test_a_group_crashed_whole_comes_back_from_its_disks_with_every_acknowledged_record() -> None:
    """Without disks the crash of every replica loses what they acknowledged (the
    simulator never draws it then); with them the first in-sync replica back leads, and
    every acknowledged record reaches every durable subscription after healing."""
    whole = (Fault(FaultKind.CRASH_GROUP, "@primary:g0", 2.0, 1.0),)
    params = SimParams(disks=True, scenario=whole, check_whole=True)
    for seed in (1, 2, 3):
        violation, trace = run_traced(seed, params)
        assert violation is None, trace
        assert "crash every broker of g0" in trace and "reads its disk: log to ts" in trace


def test_a_flipped_bit_makes_a_new_incarnation_that_copies_what_it_lost() -> None:
    """A damaged disk ends the replica's log at the damage; it comes back out of the ISR
    (a new boot) and is back in it only once it copied what it lacked (check_whole)."""
    flip = (Fault(FaultKind.FLIP, "@backup:g0", 2.5, 0.5),)
    params = SimParams(disks=True, scenario=flip, check_whole=True)
    seen = 0
    for seed in range(6):
        violation, trace = run_traced(seed, params)
        assert violation is None, trace
        seen += "flipped a bit" in trace
    assert seen, "the fault struck"


def test_with_disks_seeds_break_no_invariant() -> None:
    """CI's sweep with disks: crashes need not spare the group, whole groups crash, writes
    tear and bits flip (the sweeps in docs/testing.md)."""
    params = SimParams(disks=True, faults=8, refusals=True, check_whole=True)
    for seed in range(200):
        violation, trace = run_traced(seed, params)
        assert violation is None, f"seed {seed}: {violation}"
