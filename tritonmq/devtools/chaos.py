"""`tritonmq chaos`: real brokers, real signals, a seeded nemesis, and a checker.

A dev cluster of real processes (isolated, so that ZooKeeper links can be cut
through :mod:`tritonmq.devtools.netproxy`) serves several producers and durable
subscribers while :mod:`tritonmq.devtools.nemesis` kills, freezes, stops and cuts
its brokers. Then everything is healed, the subscribers drain, and
:mod:`tritonmq.devtools.checker` says whether any acknowledged record was lost,
duplicated, reordered or made up.

Producers publish ``b"<producer>:<seq>"`` values over topics of every group, one
batch at a time, at a bounded rate. Every durable subscription covers every topic:
two broadcast ones, each with one consumer, and one shared one with two members.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import platform
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from tritonmq.client import Client
from tritonmq.core.slots import SlotMap
from tritonmq.devtools.checker import Checker, Mode, Verdict, record_value
from tritonmq.devtools.cluster import DevCluster
from tritonmq.devtools.nemesis import FaultRecord, Nemesis, schedule
from tritonmq.errors import TritonError

# name -> (mode, members): what a user of a real broker would run side by side.
SUBSCRIPTIONS: dict[str, tuple[Mode, int]] = {
    "audit": (Mode.BROADCAST, 1),
    "mirror": (Mode.BROADCAST, 1),
    "workers": (Mode.SHARED, 2),
}
QUIET = 2.0  # seconds without a delivery before the drain checks for completeness
AFTER_HEAL = 2.0  # seconds of publishing into the healed cluster before producers stop


@dataclass(frozen=True, slots=True)
class ChaosOptions:
    seed: int = 1
    duration: float = 60.0  # seconds of faults (the run is longer: start, heal, drain)
    faults: int | None = None  # stop after this many faults
    groups: int = 2
    replicas: int = 3
    producers: int = 3
    topics_per_group: int = 3
    rate: int = 1500  # records per second over all producers
    batch: int = 10
    publish_timeout: float = 30.0
    drain_timeout: float = 90.0
    data: bool = False  # brokers keep segment files; whole-group kills and damaged files too


@dataclass
class ChaosReport:
    options: ChaosOptions
    verdict: Verdict
    faults: list[FaultRecord] = field(default_factory=list)
    seconds: float = 0.0

    def as_json(self) -> dict[str, Any]:
        v = self.verdict.as_dict()
        details = v.pop("details")
        return {
            "verdict": v,
            "ok": self.verdict.ok,
            "seed": self.options.seed,
            "options": {k: getattr(self.options, k) for k in self.options.__slots__},
            "seconds": round(self.seconds, 1),
            "cluster": f"{self.options.groups} group(s) x {self.options.replicas} brokers",
            "machine": {
                "cpus": os.cpu_count(),
                "python": platform.python_version(),
                "platform": platform.platform(),
            },
            "fault_log": [r.describe() for r in self.faults],
            "details": details,
        }

    def table(self) -> Table:
        """The verdict's columns, narrow enough for an 80-column terminal."""
        o = self.options
        t = Table(
            title=f"chaos seed {o.seed}: {o.groups} group{'s' * (o.groups != 1)} x "
            f"{o.replicas} brokers, {self.seconds:.0f} s",
            box=box.SIMPLE_HEAD,
            padding=0,
            pad_edge=False,
            show_edge=False,
        )
        for col in Verdict.COLUMNS:
            t.add_column(col, justify="right", min_width=len(col))
        v = self.verdict
        t.add_row(*(f"{getattr(v, c):,}" for c in Verdict.COLUMNS[:-1]), f"{v.longest_pause:.2f}s")
        return t


def pick_topics(slots: dict[str, Any], groups: list[str], per_group: int) -> list[str]:
    """``per_group`` topic names owned by each group, interleaved."""
    smap = SlotMap.from_dict(slots)
    by_group: dict[str, list[str]] = {g: [] for g in groups}
    for i in itertools.count():
        t = f"chaos-{i}"
        mine = by_group[smap.group_of(t)]
        if len(mine) < per_group:
            mine.append(t)
        if all(len(v) == per_group for v in by_group.values()):
            break
    return [t for ts in zip(*by_group.values(), strict=True) for t in ts]


class _Run:
    """One run's moving parts on the event loop; every task it starts is kept and ended."""

    def __init__(self, cluster: DevCluster, opts: ChaosOptions, progress: Progress) -> None:
        self.cluster = cluster
        self.opts = opts
        self.progress = progress
        self.url = f"zk://{cluster.zk_hosts}{cluster.chroot}"
        self.topics = pick_topics(cluster.status()["slots"], cluster.groups, opts.topics_per_group)
        self.checker = Checker(self.topics, {n: m for n, (m, _) in SUBSCRIPTIONS.items()})
        self.nemesis = Nemesis(cluster, self._acked_since)
        self.last_ack_at: dict[str, float] = {}  # group -> when a publish was last acked
        self.records: list[FaultRecord] = []
        self.stop_producing = asyncio.Event()
        self.last_delivery = time.monotonic()
        self.consumer_errors: Counter[str] = Counter()
        self.publish_errors: Counter[str] = Counter()
        self.tasks: list[asyncio.Task[None]] = []
        self.final_heal: float | None = None
        self.current_fault = "before the first fault"
        self.by_fault: dict[str, Counter[str]] = {}  # the latest fault begun -> violations seen
        self.longest_pause = (0.0, "")  # seconds, and the latest fault begun when it began

    async def run(self) -> tuple[Verdict, list[FaultRecord]]:
        t_faults = self.progress.add_task("faults", total=self.opts.faults, stats="")
        async with contextlib.AsyncExitStack() as stack:
            stack.push_async_callback(self._end_tasks)
            stack.callback(self.nemesis.stopping.set)
            await asyncio.to_thread(self.nemesis.start)
            stack.callback(self.nemesis.close)
            ready: list[asyncio.Future[None]] = []
            for name, (mode, members) in SUBSCRIPTIONS.items():
                for m in range(members):
                    client = await stack.enter_async_context(Client(self.url))
                    for topic in self.topics:
                        fut = asyncio.get_running_loop().create_future()
                        ready.append(fut)
                        self._spawn(self._consume(client, name, f"{name}-{m}", topic, mode, fut))
            stack.push_async_callback(self._end_tasks)  # again: before the clients close
            # And first of all on the way out: the nemesis stops holding faults and restarts
            # nothing, so that its thread (which asyncio.run joins) ends while clients close.
            stack.callback(self.nemesis.stopping.set)
            async with asyncio.timeout(60):
                await asyncio.gather(*ready)
            producers = [self._spawn(self._produce(p)) for p in range(self.opts.producers)]
            self._spawn(self._show(t_faults))
            await self._unleash(t_faults)
            self.progress.update(t_faults, description="healing")
            self.final_heal = await asyncio.to_thread(self.nemesis.heal_all)
            if self.final_heal is None:
                self.progress.console.print("final heal: not every group is back to full health")
            await asyncio.sleep(AFTER_HEAL)
            self.stop_producing.set()
            await asyncio.gather(*producers)
            self.progress.update(t_faults, description="draining")
            await self._drain()
            await self._end_tasks()  # consumers end before their clients close
        return self.checker.verdict(len(self.records), self._extra()), self.records

    def _acked_since(self, group: str, t: float) -> bool:
        return self.last_ack_at.get(group, 0.0) > t

    def _spawn(self, coro: Any) -> asyncio.Task[None]:
        task = asyncio.ensure_future(coro)
        self.tasks.append(task)
        return task

    async def _end_tasks(self) -> None:
        tasks, self.tasks = self.tasks, []
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _unleash(self, t_faults: Any) -> None:
        deadline = time.monotonic() + self.opts.duration
        faults = schedule(self.opts.seed, self.cluster.groups, self.opts.data)
        for fault in itertools.islice(faults, self.opts.faults):
            if time.monotonic() >= deadline:
                break
            self.progress.update(t_faults, description=fault.describe())
            self.current_fault = fault.describe()
            rec = await asyncio.to_thread(self.nemesis.apply, fault)
            self.records.append(rec)
            self.progress.advance(t_faults)
            if rec.healed_in is None or rec.note or not self.progress.console.is_terminal:
                self.progress.console.print(rec.describe())  # a log to follow without a tty
            await asyncio.sleep(fault.gap)

    async def _consume(
        self,
        client: Client,
        name: str,
        member: str,
        topic: str,
        mode: Mode,
        ready: asyncio.Future[None],
    ) -> None:
        """A durable subscriber, as an application would run one: on an error it
        re-subscribes (resuming from the subscription's stored offset)."""
        while True:
            try:
                async with client.subscribe(topic, subscription=name, mode=mode.value) as sub:
                    if not ready.done():
                        ready.set_result(None)
                    async for msg in sub:
                        self._deliver(name, member, topic, msg.ts, msg.value)
                        self.last_delivery = time.monotonic()
                        await msg.ack()
            except TritonError as e:
                self.consumer_errors[f"{type(e).__name__}: {e}"[:200]] += 1
                await asyncio.sleep(0.5)
            except Exception as e:  # not a typed error: a client bug, reported as such
                self.consumer_errors[f"untyped {type(e).__name__}: {e}"[:200]] += 1
                await asyncio.sleep(0.5)

    def _deliver(self, name: str, member: str, topic: str, ts: int, value: bytes) -> None:
        """Check one delivery; blame what it breaks on the latest fault begun."""
        c = self.checker
        before = (c.dup, c.order_violations, c.phantom)
        c.delivered(name, member, topic, ts, value)
        after = (c.dup, c.order_violations, c.phantom)
        if after != before:
            seen = self.by_fault.setdefault(self.current_fault, Counter())
            for kind, b, a in zip(("dup", "order", "phantom"), before, after, strict=True):
                if a != b:
                    seen[f"{kind} {name}"] += a - b

    async def _produce(self, producer: int) -> None:
        opts, topics = self.opts, self.topics
        interval = opts.batch * opts.producers / opts.rate
        last_ack: tuple[float, str] | None = None  # when, and the latest fault begun then
        async with Client(self.url, timeout=opts.publish_timeout) as client:
            seq = 0
            next_at = time.monotonic()
            for i in itertools.count():
                if self.stop_producing.is_set():
                    break
                topic = topics[(producer + i) % len(topics)]
                seqs = range(seq, seq + opts.batch)
                seq += opts.batch
                for s in seqs:
                    self.checker.sent(producer, s, topic)
                try:
                    acks = await client.publish_many(
                        topic, [record_value(producer, s) for s in seqs]
                    )
                except Exception as e:  # the outcome is unknown: the record may be stored
                    typed = isinstance(e, TritonError | TimeoutError)
                    # An untyped error is a client bug: reported as such.
                    self.publish_errors[type(e).__name__ if typed else f"untyped {e!r}"[:200]] += 1
                    for s in seqs:
                        self.checker.unknown(producer, s)
                else:
                    now = time.monotonic()
                    for s, ack in zip(seqs, acks, strict=True):
                        self.checker.acked(producer, s, ack.ts, now)
                    self.last_ack_at[acks[0].group] = now
                    if last_ack is not None and now - last_ack[0] > self.longest_pause[0]:
                        self.longest_pause = (now - last_ack[0], last_ack[1])
                    last_ack = (now, self.current_fault)
                next_at += interval
                delay = next_at - time.monotonic()
                if delay > 0:
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(delay):
                            await self.stop_producing.wait()
                else:
                    next_at = time.monotonic()  # behind (a stall): no burst to catch up
        self.checker.producer_stopped(producer, time.monotonic())

    async def _drain(self) -> None:
        """Wait until every subscription holds every acknowledged record, or the deadline."""
        deadline = time.monotonic() + self.opts.drain_timeout
        while time.monotonic() < deadline:
            await asyncio.sleep(0.5)
            if time.monotonic() - self.last_delivery < QUIET:
                continue
            missing = await asyncio.to_thread(self.checker.missing)
            if not any(missing.values()):
                return

    async def _show(self, t_faults: Any) -> None:
        while True:
            c = self.checker.counts()
            self.progress.update(
                t_faults,
                stats=f"acked {c['acked']:,}  delivered {self.checker.deliveries:,}  "
                f"unknown {c['unknown']:,}",
            )
            await asyncio.sleep(0.5)

    def _extra(self) -> dict[str, Any]:
        return {
            "topics": self.topics,
            "subscriptions": {n: f"{m.value} x{k}" for n, (m, k) in SUBSCRIPTIONS.items()},
            "unhealed": sum(r.healed_in is None for r in self.records),
            "final_heal_s": None if self.final_heal is None else round(self.final_heal, 2),
            "longest_heal_s": round(
                max((r.healed_in or 0.0 for r in self.records), default=0.0), 2
            ),
            "longest_sigterm_exit_s": round(self.nemesis.longest_term_exit, 2),
            "fault_kinds": dict(Counter(r.fault.kind.value for r in self.records)),
            "publish_errors": dict(self.publish_errors),
            "consumer_errors": dict(self.consumer_errors),
            "violations_by_fault": {f: dict(v) for f, v in self.by_fault.items()},
            "longest_pause_began_during": self.longest_pause[1],
        }


def run_chaos(
    opts: ChaosOptions,
    console: Console,
    *,
    workdir: Path | None = None,
    on_cluster: Callable[[DevCluster], None] | None = None,
) -> ChaosReport:
    """Start the cluster, run, stop every process it started (also on error or Ctrl-C)."""
    cluster = DevCluster(opts.groups, opts.replicas, workdir=workdir, isolated=True, data=opts.data)
    t0 = time.monotonic()
    try:
        with console.status("starting ZooKeeper and brokers"):
            cluster.start()
        if on_cluster is not None:
            on_cluster(cluster)
        progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.completed} faults"),
            TextColumn("{task.fields[stats]}"),
            TimeElapsedColumn(),
            console=console,
        )
        with progress:
            verdict, records = asyncio.run(_run_once(cluster, opts, progress))
    finally:
        cluster.stop()
    verdict.details["pids"] = list(cluster.spawned)
    return ChaosReport(opts, verdict, records, time.monotonic() - t0)


async def _run_once(
    cluster: DevCluster, opts: ChaosOptions, progress: Progress
) -> tuple[Verdict, list[FaultRecord]]:
    return await _Run(cluster, opts, progress).run()


def write_json(report: ChaosReport, path: str | Path) -> None:
    Path(path).write_text(json.dumps(report.as_json(), indent=2, default=str) + "\n")
