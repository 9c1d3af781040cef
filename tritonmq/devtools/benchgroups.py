"""`tritonmq bench --groups 1,2,3`: does acknowledged-publish throughput grow with groups?

For each group count G a fresh local cluster of G groups x 3 replicas is started, and the
same load runs against it: ``producers`` clients (one load-generator process) publish
``records`` 100-byte records in total over ``topics`` topics spread evenly over all
slots (so over all groups), batches pipelined, each counted on its ``puback`` (on all
three replicas of its group). Throughput is from the first send to the last ack. On a
machine with fewer cores than brokers this measures the cores, not the design: every
broker is a single-threaded Python process (docs/benchmarks.md).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from tritonmq.client import Client
from tritonmq.core.slots import DEFAULT_SLOTS, slot_of

REPLICAS = 3  # per group, as in `tritonmq bench`
MAX_GROUPS = 8  # 24 broker processes: far past where a developer machine says anything
IN_FLIGHT = 16  # pipelined batches per producer, as in `tritonmq bench`
BATCH = 1000  # records per publish_many, at most


def parse_groups(text: str) -> list[int]:
    """``--groups``: "1,2,3" -> [1, 2, 3], in the order given; a ValueError saying what is
    allowed for anything else (empty items, non-integers, out of range, repeats)."""
    items = [t.strip() for t in text.split(",")]
    if not all(t.isascii() and t.isdigit() for t in items):
        raise ValueError(f"group counts separated by commas (1,2,3), not {text!r}")
    counts = [int(t) for t in items]
    if bad := [n for n in counts if not 1 <= n <= MAX_GROUPS]:
        raise ValueError(f"each group count must be 1..{MAX_GROUPS}, not {bad[0]}")
    if len(set(counts)) != len(counts):
        raise ValueError(f"each group count once, not {text!r}")
    return counts


def spread_topics(count: int, slots: int = DEFAULT_SLOTS) -> list[str]:
    """``count`` topic names, the i-th in slot ``i % slots``: every slot (so every group,
    whatever the map) gets its share of the load."""
    names: list[str] = []
    j = 0
    while len(names) < count:
        want = len(names) % slots
        name = f"bench.groups.{j}"
        j += 1
        if slot_of(name, slots) == want:
            names.append(name)
    return names


@dataclass
class GroupsRun:
    """One group count's figures (``runs`` in the JSON)."""

    groups: int
    brokers: int
    acked: int  # records acknowledged (each on all replicas of its group)
    seconds: float
    msgs_per_s: float
    topics_per_group: dict[str, int]


@dataclass
class GroupsReport:
    """What ``--json`` writes: the load, then one entry per group count."""

    records: int
    size: int
    topics: int
    producers: int
    replicas: int = REPLICAS
    runs: list[GroupsRun] = field(default_factory=list)

    def as_dict(self, extra: dict[str, Any] | None = None) -> dict[str, Any]:
        return {**asdict(self), **(extra or {})}


def shares(records: int, topics: list[str], producers: int) -> list[list[tuple[str, int]]]:
    """Per producer, its (topic, records) pairs: records spread evenly over the topics
    and the topics dealt round-robin to the producers."""
    n = len(topics)
    out: list[list[tuple[str, int]]] = [[] for _ in range(producers)]
    for i, topic in enumerate(topics):
        k = records // n + (1 if i < records % n else 0)
        if k:
            out[i % producers].append((topic, k))
    return out


async def _produce(client: Client, work: list[tuple[str, int]], payload: bytes) -> int:
    """Publish ``work`` in batches of up to BATCH, topics interleaved, IN_FLIGHT batches
    pipelined; the number of records acknowledged."""
    left = dict(work)
    pending: list[asyncio.Future[Any]] = []
    acked = 0
    while left:
        for topic in list(left):
            k = min(BATCH, left[topic])
            left[topic] -= k
            if not left[topic]:
                del left[topic]
            pending.append(asyncio.ensure_future(client.publish_many(topic, [payload] * k)))
            if len(pending) >= IN_FLIGHT:
                acked += len(await pending.pop(0))
    for acks in await asyncio.gather(*pending):
        acked += len(acks)
    return acked


async def measure(
    url: str, groups: int, records: int, size: int, topics: int, producers: int
) -> GroupsRun:
    """One run against the cluster at ``url`` (``groups`` groups of REPLICAS)."""
    names = spread_topics(topics)
    payload = b"x" * size
    clients = [Client(url, max_in_flight=32) for _ in range(producers)]
    try:
        for c in clients:
            await c.connect()
        per_group: dict[str, int] = {}
        for t in names:
            g = clients[0].group_of(t)
            per_group[g] = per_group.get(g, 0) + 1
        work = shares(records, names, producers)
        # warm-up, not counted: one record per topic opens every producer's links
        await asyncio.gather(
            *(
                _produce(c, [(t, 1) for t, _ in w], payload)
                for c, w in zip(clients, work, strict=True)
            )
        )
        t0 = time.perf_counter()
        done = await asyncio.gather(
            *(_produce(c, w, payload) for c, w in zip(clients, work, strict=True))
        )
        seconds = time.perf_counter() - t0
    finally:
        await asyncio.gather(*(c.close() for c in clients))
    acked = sum(done)
    return GroupsRun(
        groups,
        groups * REPLICAS,
        acked,
        round(seconds, 3),
        round(acked / seconds, 1),
        dict(sorted(per_group.items())),
    )


def run_groups(
    counts: list[int],
    records: int,
    size: int,
    topics: int,
    producers: int,
    on_phase: Callable[[str], None] | None = None,
) -> GroupsReport:
    """Start a fresh cluster per group count, measure it, stop it."""
    from tritonmq.broker.main import tune_gc
    from tritonmq.devtools.cluster import DevCluster

    phase = on_phase or (lambda _what: None)
    tune_gc()
    report = GroupsReport(records, size, topics, producers)
    for g in counts:
        phase(f"bench: starting {g} group(s) x {REPLICAS}")
        cluster = DevCluster(g, REPLICAS)
        try:
            cluster.start()
            phase(f"bench: {records:,} records over {topics} topics, {g} group(s)")
            url = f"zk://{cluster.zk_hosts}{cluster.chroot}"
            report.runs.append(asyncio.run(measure(url, g, records, size, topics, producers)))
        finally:
            cluster.stop()
    return report


def report_table(report: GroupsReport) -> Any:
    """The rich table `bench --groups` prints."""
    from rich.table import Table

    table = Table(
        title=(
            f"TritonMQ acknowledged publish by groups (x {report.replicas} replicas): "
            f"{report.records:,} x {report.size}-byte records, {report.topics} topics, "
            f"{report.producers} producers"
        )
    )
    for col in ("groups", "brokers", "acknowledged", "seconds", "msg/s", "vs first"):
        table.add_column(col, justify="right")
    base = report.runs[0].msgs_per_s if report.runs else 0.0
    for r in report.runs:
        table.add_row(
            str(r.groups),
            str(r.brokers),
            f"{r.acked:,}",
            f"{r.seconds:.2f}",
            f"{r.msgs_per_s:,.0f}",
            f"{r.msgs_per_s / base:.2f}x" if base else "-",
        )
    return table


def bench_groups(
    counts: list[int],
    records: int,
    size: int,
    topics: int,
    producers: int,
    json_path: str | None,
) -> None:
    """The command: run, print the table, write the JSON (exit 1 on a cluster error)."""
    import json
    import platform
    import sys

    import click

    from tritonmq.cli_ops import console, progress
    from tritonmq.errors import TritonError

    try:
        with progress("bench --groups") as phase:
            report = run_groups(counts, records, size, topics, producers, on_phase=phase)
    except TritonError as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(1)
    console().print(report_table(report))
    if json_path:
        extra = {"python": platform.python_version(), "cpus": os.cpu_count()}
        with open(json_path, "w") as f:
            json.dump(report.as_dict(extra), f, indent=2)
