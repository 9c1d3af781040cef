"""Swarm testing: each seed also draws the cluster's shape and its fault mix.

A fixed setting explores one corner: the same groups, the same fault odds, seed after
seed. In swarm mode (``tritonmq sim --swarm``) the seed first draws the shape (groups,
replicas, slot moves, how many faults and which kinds are likely, refusals, the
``group-whole`` check, busy topics, slow loads, the offset store's interval) and then
runs as any seed of that shape would. The draw uses a generator of its own, seeded from
the seed, so ``tritonmq sim --swarm --seed N`` replays it exactly, and :func:`describe`
prints it with the result.
"""

from __future__ import annotations

import dataclasses
import random

from tritonmq.sim.faults import DRAWN
from tritonmq.sim.params import BrokerParams, SimParams

_SALT = 0x5A4D  # the shape's generator is not the run's: a swarm seed's run draws as usual


def draw(seed: int, base: SimParams) -> SimParams:
    """``base`` with the shape seed ``seed`` draws (``swarm`` stays on, for the replay)."""
    rng = random.Random(seed * 65_537 + _SALT)
    groups = rng.randint(1, 4)
    # One replica can never meet min_insync 2, and its crash loses what it acknowledged.
    replicas = rng.choice((2, 3, 3))
    moves = rng.choice((0, 3, 6, 10)) if groups >= 2 else 0
    moved_topics = rng.choice((1, 1, 2, 4)) if moves else 1
    faults = rng.randint(0, 12)
    # Every kind's weight 0..4, at least one above 0: some seeds are all crashes, some
    # have no crash at all.
    weights = [(kind, rng.randint(0, 4)) for kind, _ in DRAWN]
    if not any(w for _, w in weights):
        i = rng.randrange(len(weights))
        weights[i] = (weights[i][0], 1)
    kept = tuple((k, w) for k, w in weights if w)
    refusals = rng.random() < 0.5
    check_whole = rng.random() < 0.7
    busy = rng.choice((0, 0, 3, 10))
    slow_loads = rng.choice((0.0, 0.0, 0.3, 0.8))
    interval = rng.choice((None, None, (0.2, 0.6), (0.2, 1.5)))
    filter_at_read = rng.random() < 0.5
    disks = rng.random() < 0.5  # drawn last: the draws before it stay those of earlier seeds
    return dataclasses.replace(
        base,
        groups=groups,
        replicas=replicas,
        moves=moves,
        moved_topics=moved_topics,
        faults=faults,
        fault_weights=kept,
        refusals=refusals,
        check_whole=check_whole,
        busy=busy,
        slow_loads=slow_loads,
        offset_intervals=interval,
        broker=dataclasses.replace(base.broker, filter_loads_at_read=filter_at_read),
        swarm=True,
        disks=disks,
    )


def describe(p: SimParams) -> str:
    """The shape of ``p`` on one line, as a swarm run prints it."""
    d, b = SimParams(), BrokerParams()
    parts = [f"groups {p.groups}", f"replicas {p.replicas}", f"faults {p.faults}"]
    if p.moves and p.groups >= 2:
        parts.append(f"moves {p.moves}" + (f" x{p.moved_topics}" if p.moved_topics > 1 else ""))
    weights = p.fault_weights or DRAWN
    parts.append("weights " + ",".join(f"{k.value}={w}" for k, w in weights))
    on_off = (("refusals", p.refusals), ("check-whole", p.check_whole), ("disks", p.disks))
    parts += [name for name, on in on_off if on]
    if p.busy != d.busy:
        parts.append(f"busy {p.busy}")
    if p.slow_loads:
        parts.append(f"slow-loads {p.slow_loads}")
    if p.offset_intervals is not None:
        lo, hi = p.offset_intervals
        parts.append(f"offset-interval {lo}-{hi}")
    if p.broker.filter_loads_at_read != b.filter_loads_at_read:
        parts.append("loads-filtered-at-read")
    return "shape: " + ", ".join(parts)
