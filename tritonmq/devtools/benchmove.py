"""The publish pause a slot move causes (issue 11; docs/benchmarks.md, "Slot moves").

A fresh local cluster of 2 groups x 3 replicas; one producer publishes 100-byte records
one at a time (each awaited: the pause is what a producer waiting on its acks sees) to
a topic whose slot then moves between the groups ``moves`` times, a second apart. For
each move: how long the slot took from ``begin_move`` to ``normal`` at the new owner,
and the longest gap between two acknowledgements while it moved (a second after it
included), next to the median gap outside moves.

    python -m tritonmq.devtools.benchmove --moves 10 [--json FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import statistics
import time
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import asdict, dataclass

AFTER_S = 1.0  # a move's window for the pause ends this long after it completed


@dataclass(frozen=True)
class MoveFigures:
    to: str
    move_s: float  # begin_move -> normal at the new owner, as ZooKeeper showed it
    pause_s: float  # the longest gap between two acks from begin_move to AFTER_S past normal


def pause_within(acks: Sequence[float], start: float, end: float) -> float:
    """The longest gap between consecutive ack times that touches ``[start, end]`` (the
    gap that spans ``start`` counts: the producer waited through it)."""
    i = max(0, bisect_left(acks, start) - 1)
    j = min(len(acks), bisect_right(acks, end) + 1)
    window = acks[i:j]
    return max((b - a for a, b in zip(window, window[1:], strict=False)), default=end - start)


def median_gap_outside(acks: Sequence[float], windows: Sequence[tuple[float, float]]) -> float:
    gaps = [
        b - a
        for a, b in zip(acks, acks[1:], strict=False)
        if not any(b >= s and a <= e + AFTER_S for s, e in windows)
    ]
    return statistics.median(gaps) if gaps else 0.0


@dataclass(frozen=True)
class MoveBench:
    moves: list[MoveFigures]
    median_gap_outside_moves_s: float
    pause_median_s: float
    pause_max_s: float
    acked: int


async def run(moves: int) -> MoveBench:
    from tritonmq.client import Client
    from tritonmq.coord.slots import apply_slot_step, read_slot
    from tritonmq.coord.zkclient import new_client
    from tritonmq.core.slothistory import SlotState, begin_move
    from tritonmq.core.slots import slot_of
    from tritonmq.devtools.cluster import DevCluster

    cluster = DevCluster(2, 3)
    cluster.start(timeout=60)
    zk = new_client(str(cluster.zk_hosts), timeout=2.0, auth=cluster.zk_auth)
    zk.start(timeout=10)
    try:
        topic = "bench.move"
        n = slot_of(topic, 64)
        acks: list[float] = []
        stop = asyncio.Event()

        async def produce() -> None:
            url = f"zk://{cluster.zk_hosts}{cluster.chroot}"
            async with Client(url) as client:
                while not stop.is_set():
                    await client.publish(topic, b"x" * 100)
                    acks.append(time.monotonic())

        producer = asyncio.create_task(produce())
        await asyncio.sleep(2.0)
        figures, windows = [], []
        for _ in range(moves):
            owner = (await asyncio.to_thread(read_slot, zk, cluster.chroot, n)).history.owner
            to = "g2" if owner == "g1" else "g1"
            t0 = time.monotonic()
            step = functools.partial(begin_move, to=to)
            await asyncio.to_thread(apply_slot_step, zk, cluster.chroot, n, step)
            while True:
                h = (await asyncio.to_thread(read_slot, zk, cluster.chroot, n)).history
                if h.state is SlotState.NORMAL:
                    break
                await asyncio.sleep(0.005)
            t1 = time.monotonic()
            await asyncio.sleep(AFTER_S)
            windows.append((t0, t1))
            figures.append(MoveFigures(to, t1 - t0, pause_within(acks, t0, t1 + AFTER_S)))
        stop.set()
        await producer
    finally:
        zk.stop()
        zk.close()
        cluster.stop()
    pauses = [f.pause_s for f in figures]
    gap = median_gap_outside(acks, windows)
    return MoveBench(figures, gap, statistics.median(pauses), max(pauses), len(acks))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--moves", type=int, default=10)
    ap.add_argument("--json", dest="json_file", default="")
    args = ap.parse_args()
    if args.moves < 1:
        ap.error("--moves must be at least 1")
    out = asyncio.run(run(args.moves))
    for i, m in enumerate(out.moves):
        print(
            f"move {i + 1} to {m.to}: {m.move_s * 1000:.0f} ms,"
            f" longest ack gap {m.pause_s * 1000:.0f} ms"
        )
    print(
        f"pause median {out.pause_median_s * 1000:.0f} ms, max {out.pause_max_s * 1000:.0f} ms;"
        f" median ack gap outside moves {out.median_gap_outside_moves_s * 1000:.1f} ms"
    )
    if args.json_file:
        with open(args.json_file, "w") as f:
            json.dump(asdict(out), f, indent=2)


if __name__ == "__main__":
    main()
