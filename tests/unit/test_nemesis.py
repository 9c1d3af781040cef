"""The nemesis's schedule: a seed decides it exactly, and it covers every kind of fault."""

from __future__ import annotations

import itertools

from tritonmq.devtools.nemesis import FaultKind, plan, schedule

GROUPS = ["g1", "g2"]


def test_a_seed_gives_the_same_schedule_every_time() -> None:
    assert plan(7, 50, GROUPS) == plan(7, 50, GROUPS)
    assert plan(7, 50, GROUPS) != plan(8, 50, GROUPS)


def test_a_shorter_plan_is_a_prefix_of_a_longer_one() -> None:
    assert plan(3, 300, GROUPS)[:20] == plan(3, 20, GROUPS)
    assert list(itertools.islice(schedule(3, GROUPS), 300)) == plan(3, 300, GROUPS)


FILES_ONLY = {FaultKind.KILL_GROUP, FaultKind.CORRUPT_BACKUP}


def test_every_fault_kind_and_group_comes_up() -> None:
    faults = plan(1, 300, GROUPS)
    assert {f.kind for f in faults} == set(FaultKind) - FILES_ONLY, "memory only: as before"
    assert {f.group for f in faults} == set(GROUPS)
    assert [f.index for f in faults] == list(range(1, 301))
    with_files = plan(1, 300, GROUPS, data=True)
    assert {f.kind for f in with_files} == set(FaultKind), "with segment files: theirs too"


def test_holds_span_the_session_timeout_and_gaps_are_short() -> None:
    faults = plan(1, 300, GROUPS)
    pauses = [f.hold for f in faults if f.kind is FaultKind.PAUSE_PRIMARY]
    assert min(pauses) < 2.0 < max(pauses)  # default session timeout: 2 s
    assert all(0 < f.hold <= 6.0 and 0 < f.gap <= 2.0 for f in faults)


def test_faults_describe_themselves() -> None:
    f = plan(1, 1, GROUPS)[0]
    assert f.describe().startswith("#1 ") and f.group in f.describe()
