"""Run many seeds (on several cores) and summarise; replay one seed with its trace."""

from __future__ import annotations

import dataclasses
import multiprocessing
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from tritonmq.sim import swarm
from tritonmq.sim.world import Result, SimParams, World


def params_of(seed: int, params: SimParams | None = None) -> SimParams:
    """What seed ``seed`` runs with: ``params``, or in swarm mode the shape it draws."""
    p = params or SimParams()
    return swarm.draw(seed, p) if p.swarm else p


def run_seed(seed: int, params: SimParams | None = None) -> Result:
    p = params_of(seed, params)
    r = World(seed, p).run()
    return dataclasses.replace(r, shape=swarm.describe(p)) if p.swarm else r


@dataclass(slots=True)
class Summary:
    seeds: int = 0
    steps: int = 0
    faults: int = 0
    failed: list[Result] = field(default_factory=list)

    def add(self, r: Result) -> None:
        self.seeds += 1
        self.steps += r.steps
        self.faults += r.faults
        if r.violation:
            self.failed.append(r)


def _run_light(args: tuple[int, SimParams | None]) -> Result:
    r = run_seed(*args)
    return r if r.violation else dataclasses.replace(r, trace="")  # spare the pipe


def iter_results(
    start: int, count: int, jobs: int, params: SimParams | None = None
) -> Iterator[Result]:
    """Results of seeds ``start .. start+count-1``, in completion order."""
    args = [(s, params) for s in range(start, start + count)]
    if jobs <= 1:
        yield from map(_run_light, args)
        return
    # forkserver, not fork: a process with threads (a test session that ran a browser, a
    # kazoo client) forked workers that could start holding a lock no thread would release,
    # and the sweep waited for good
    ctx = multiprocessing.get_context("forkserver")
    with ctx.Pool(jobs) as pool:
        yield from pool.imap_unordered(_run_light, args, chunksize=8)


def run_many(
    start: int,
    count: int,
    jobs: int,
    params: SimParams | None = None,
    on_result: Callable[[Result], None] | None = None,
) -> Summary:
    summary = Summary()
    for r in iter_results(start, count, jobs, params):
        summary.add(r)
        if on_result is not None:
            on_result(r)
    summary.failed.sort(key=lambda r: r.seed)
    return summary
