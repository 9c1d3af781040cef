"""Many seeds on both cores, and the ``tritonmq sim`` command."""

from __future__ import annotations

import time

from click.testing import CliRunner

from tritonmq.cli import main
from tritonmq.sim.runner import run_many

CI_SEEDS = 2000


def test_two_thousand_seeds_break_no_invariant() -> None:
    t0 = time.monotonic()
    summary = run_many(0, CI_SEEDS, jobs=2)
    elapsed = time.monotonic() - t0
    assert summary.seeds == CI_SEEDS
    assert summary.faults > CI_SEEDS  # faults really happened (a few per seed)
    assert summary.failed == [], "\n\n".join(r.trace for r in summary.failed[:3])
    print(f"{CI_SEEDS} seeds, {summary.steps} steps, {summary.faults} faults in {elapsed:.1f}s")


def test_sim_replays_one_seed_and_exits_zero_when_clean() -> None:
    res = CliRunner().invoke(main, ["sim", "--seed", "8"])
    assert res.exit_code == 0, res.output
    assert "seed 8: no violation" in res.output and "crash g0b1" in res.output
    again = CliRunner().invoke(main, ["sim", "--seed", "8"])
    assert again.output == res.output


def test_sim_runs_many_seeds_and_reports() -> None:
    res = CliRunner().invoke(main, ["sim", "--seeds", "6", "--start", "10"])
    assert res.exit_code == 0, res.output
    assert "seeds 6 steps" in res.output and "violations 0" in res.output


def test_sim_exits_non_zero_on_a_violation() -> None:
    # Two faults per run over a single replica: min_insync 2 can never be met, so a
    # producer waits forever: the liveness check must fail the run.
    from tritonmq.sim import runner, world

    params = world.SimParams(replicas=1, faults=0)
    r = runner.run_seed(1, params)
    assert r.violation is not None and "still waits" in r.violation
    assert "replay: tritonmq sim --seed 1" in r.trace


def test_sim_bad_arguments_exit_2() -> None:
    for args in (["sim"], ["sim", "--seed", "1", "--seeds", "2"], ["sim", "--seeds", "0"]):
        assert CliRunner().invoke(main, args).exit_code == 2, args
