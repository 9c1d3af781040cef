"""Many seeds on both cores, and the ``tritonmq sim`` command."""

from __future__ import annotations

import time

import pytest
from click.testing import CliRunner

from tritonmq.cli import main
from tritonmq.sim.runner import params_of, run_many, run_seed
from tritonmq.sim.scenarios import with_scenario
from tritonmq.sim.swarm import describe
from tritonmq.sim.world import SimParams, World

CI_SEEDS = 2000
# Live processes that refuse connections, and every replica back in its ISR after healing
# (docs/findings.md: the core holes these found are fixed).
CI_PARAMS = SimParams(refusals=True, check_whole=True)


@pytest.mark.timeout(1200)  # no timing goal here: the machine is shared; the time is printed
def test_two_thousand_seeds_break_no_invariant() -> None:
    t0 = time.monotonic()
    summary = run_many(0, CI_SEEDS, jobs=2, params=CI_PARAMS)
    elapsed = time.monotonic() - t0
    assert summary.seeds == CI_SEEDS
    assert summary.faults > CI_SEEDS  # faults really happened (several per seed)
    assert summary.failed == [], "\n\n".join(r.trace for r in summary.failed[:3])
    print(f"{CI_SEEDS} seeds, {summary.steps} steps, {summary.faults} faults, in {elapsed:.1f}s")


def test_sim_replays_one_seed_and_exits_zero_when_clean() -> None:
    res = CliRunner().invoke(main, ["sim", "--seed", "1"])
    assert res.exit_code == 0, res.output
    assert "seed 1: no violation" in res.output and "crash g0b1" in res.output
    again = CliRunner().invoke(main, ["sim", "--seed", "1"])
    assert again.output == res.output


def test_sim_runs_many_seeds_and_reports() -> None:
    res = CliRunner().invoke(main, ["sim", "--seeds", "6", "--start", "10"])
    assert res.exit_code == 0, res.output
    assert "seeds 6 steps" in res.output and "violations 0" in res.output


def test_sim_exits_non_zero_on_a_violation_and_prints_the_trace() -> None:
    # One replica: min_insync 2 can never be met, so the producer waits forever and
    # the liveness check after healing must fail the run.
    args = ["sim", "--seed", "1", "--replicas", "1", "--faults", "0"]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 1, res.output
    assert "VIOLATION: after healing, g0p0 still waits" in res.output
    assert "NOT_ENOUGH_REPLICAS" in res.output  # the trace shows why
    assert "replay: tritonmq sim --seed 1" in res.output
    many = CliRunner().invoke(main, ["sim", "--seeds", "2", "--replicas", "1", "--faults", "0"])
    assert many.exit_code == 1 and "violations 2" in many.output


def test_sim_bad_arguments_exit_2() -> None:
    bad = (
        ["sim"],
        ["sim", "--seed", "1", "--seeds", "2"],
        ["sim", "--seeds", "0"],
        ["sim", "--seed", "x"],
        ["sim", "--seeds", "3", "--jobs", "0"],
        ["sim", "--seed", "1", "--adapter", "shell"],  # the pre-BrokerCore shell is gone
        ["sim", "--seed", "1", "--scenario", "no-such-scenario"],
    )
    for args in bad:
        assert CliRunner().invoke(main, args).exit_code == 2, args


def test_sim_replays_a_named_scenario_with_the_settings_it_needs() -> None:
    res = CliRunner().invoke(main, ["sim", "--seed", "0", "--scenario", "lost-claim"])
    assert res.exit_code == 0, res.output
    assert "watches late by up to 3.00s" in res.output  # the scenario's faults, not drawn ones
    assert "refuses connections to" in res.output
    run = World(0, with_scenario(SimParams(), "lost-claim")).run()  # check_whole on, as it needs
    assert f"trace digest {run.digest}" in res.output


def test_sim_refusals_and_check_whole_flags_reach_the_run_and_the_replay_hint() -> None:
    args = ["sim", "--seed", "34", "--refusals", "--check-whole"]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    assert "refuses connections" in res.output
    digest = World(34, SimParams(refusals=True, check_whole=True)).run().digest
    assert f"trace digest {digest}" in res.output
    bad = ["sim", "--seeds", "2", "--replicas", "1", "--faults", "0", "--check-whole"]
    res = CliRunner().invoke(main, bad)
    assert (
        res.exit_code == 1 and "replay one with: tritonmq sim --seed 0 --check-whole" in res.output
    )


def test_sim_with_two_groups_moves_slots_and_the_replay_hint_names_the_groups() -> None:
    res = CliRunner().invoke(main, ["sim", "--seed", "0", "--groups", "2"])
    assert res.exit_code == 0, res.output
    assert "move slot 1 (g0.m) from g0 to g1" in res.output
    none = CliRunner().invoke(main, ["sim", "--seed", "0", "--groups", "2", "--moves", "0"])
    assert none.exit_code == 0 and "move slot" not in none.output
    args = ["sim", "--seed", "1", "--groups", "2", "--replicas", "1", "--faults", "0"]
    bad = CliRunner().invoke(main, args)
    assert bad.exit_code == 1, bad.output
    assert "replay: tritonmq sim --seed 1 --groups 2 --replicas 1 --faults 0" in bad.output
    assert CliRunner().invoke(main, ["sim", "--seed", "1", "--moves", "-1"]).exit_code == 2


def test_a_swarm_seed_draws_its_shape_from_the_seed_and_replays_it() -> None:
    base = SimParams(swarm=True)
    shapes = [params_of(seed, base) for seed in range(60)]
    assert params_of(7, base) == shapes[7], "the same seed draws the same shape"
    assert len({(p.groups, p.replicas, p.faults, p.fault_weights) for p in shapes}) > 30
    assert {p.groups for p in shapes} == {1, 2, 3, 4}
    assert all(p.replicas in (2, 3) for p in shapes), "one replica can never meet min_insync"
    assert all(p.moves == 0 for p in shapes if p.groups == 1)
    assert all(p.fault_weights and all(w > 0 for _, w in p.fault_weights) for p in shapes)
    assert any(p.refusals for p in shapes) and not all(p.refusals for p in shapes)
    res = CliRunner().invoke(main, ["sim", "--swarm", "--seed", "7"])
    assert res.exit_code == 0, res.output
    assert res.output.startswith(describe(shapes[7]) + "\n")
    assert f"trace digest {World(7, shapes[7]).run().digest}" in res.output
    assert CliRunner().invoke(main, ["sim", "--swarm", "--seed", "7"]).output == res.output


def test_a_swarm_sweep_runs_each_seed_in_its_own_shape_and_takes_no_scenario() -> None:
    summary = run_many(0, 3, jobs=1, params=SimParams(swarm=True))
    assert summary.seeds == 3 and summary.failed == []
    assert run_seed(2, SimParams(swarm=True)).shape == describe(params_of(2, SimParams(swarm=True)))
    assert World(0, params_of(0, SimParams(swarm=True)))._flags() == " --swarm"
    res = CliRunner().invoke(main, ["sim", "--swarm", "--seeds", "3"])
    assert res.exit_code == 0 and "seeds 3 steps" in res.output, res.output
    args = ["sim", "--swarm", "--seed", "1", "--scenario", "lost-claim"]
    assert CliRunner().invoke(main, args).exit_code == 2
