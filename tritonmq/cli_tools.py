"""`tritonmq bench`, `chaos` and `sim`: the developer's tools, split out of cli.py for size
(cli.py adds them to the `tritonmq` group)."""

from __future__ import annotations

import signal
import sys
from typing import Any, NoReturn

import click

from tritonmq.errors import TritonError


def _fail(message: str) -> NoReturn:
    raise click.UsageError(message)


def _group_counts(_ctx: click.Context, _param: click.Parameter, value: str | None) -> Any:
    from tritonmq.devtools.benchgroups import parse_groups

    try:
        return None if value is None else parse_groups(value)
    except ValueError as e:
        raise click.BadParameter(str(e)) from None


def _peer_names(_ctx: click.Context, _param: click.Parameter, value: str | None) -> Any:
    from tritonmq.devtools.peers import parse_against

    try:
        return None if value is None else parse_against(value)
    except ValueError as e:
        raise click.BadParameter(str(e)) from None


@click.command()
@click.option(
    "--zk", "zk_hosts", default=None, help="Measure this cluster instead of starting a 1x3 one."
)
@click.option("--records", type=click.IntRange(100), default=200_000, show_default=True)
@click.option(
    "--size",
    type=click.IntRange(8, 1 << 20),
    default=100,
    show_default=True,
    help="Bytes per record.",
)
@click.option(
    "--rate",
    type=click.IntRange(1),
    default=5000,
    show_default=True,
    help="msg/s for the latency run.",
)
@click.option("--seconds", type=click.FloatRange(1), default=5.0, show_default=True)
@click.option(
    "--json", "json_path", type=click.Path(dir_okay=False), default=None, help="Write results here."
)
@click.option(
    "--groups",
    "group_counts",
    default=None,
    callback=_group_counts,
    help="Instead: acknowledged publish with each of these group counts x 3 (e.g. 1,2,3).",
)
@click.option(
    "--topics",
    type=click.IntRange(1, 10_000),
    default=64,
    show_default=True,
    help="With --groups: topics, spread over all slots.",
)
@click.option(
    "--producers",
    type=click.IntRange(1, 64),
    default=4,
    show_default=True,
    help="With --groups: producer clients sharing the records.",
)
@click.option(
    "--storage",
    type=click.Choice(["memory", "files", "both"]),
    default="memory",
    show_default=True,
    help="Brokers in memory only, with segment files (a data_dir each), or both in one run"
    " alternating (memory, files, memory, files) with the ratio files/memory.",
)
@click.option(
    "--against",
    "against",
    default=None,
    callback=_peer_names,
    help="Instead: TritonMQ and these peers (nats,redis) through the same load shapes, "
    "alternating, with ratios (docs/benchmarks.md; needs scripts/bootstrap --bench).",
)
@click.option(
    "--quick",
    is_flag=True,
    help="With --against: each shape for about a second, one round (keeps the harness working).",
)
@click.option(
    "--rounds",
    type=click.IntRange(1, 20),
    default=2,
    show_default=True,
    help="With --against: rounds of every system, alternating.",
)
def bench(
    zk_hosts: str | None,
    records: int,
    size: int,
    rate: int,
    seconds: float,
    json_path: str | None,
    group_counts: list[int] | None,
    topics: int,
    producers: int,
    storage: str,
    against: list[str] | None,
    quick: bool,
    rounds: int,
) -> None:
    """Throughput and latency of acknowledged publishing and delivery on a 1x3 cluster;
    with --groups, acknowledged publish over --topics topics (spread over all slots) by
    --producers, on a fresh cluster per group count; with --against, TritonMQ and its peers
    through the same load shapes in one run."""
    import asyncio
    import platform

    from rich.console import Console
    from rich.table import Table

    from tritonmq.cli_ops import progress

    if quick and against is None:
        _fail("--quick goes with --against")
    if against is not None:
        if zk_hosts is not None or group_counts is not None or storage != "memory":
            _fail("--against starts its own servers: not with --zk, --groups or --storage")
        from tritonmq.devtools.peers.run import bench_peers
        from tritonmq.devtools.peers.shapes import Sizes
        from tritonmq.devtools.peers.shapes import quick as quick_sizes

        sizes = Sizes(size=size, rate=rate, seconds=seconds, records=records, rounds=rounds)
        bench_peers(against, quick_sizes(sizes) if quick else sizes, json_path)
        return
    if group_counts is not None:
        if zk_hosts is not None:
            _fail("--groups starts a fresh cluster per group count: not with --zk")
        from tritonmq.devtools.benchgroups import bench_groups

        bench_groups(group_counts, records, size, topics, producers, json_path)
        return
    from tritonmq.devtools.bench import run_bench, write_json
    from tritonmq.devtools.cluster import DevCluster

    modes = {"memory": [False], "files": [True], "both": [False, True, False, True]}[storage]
    if zk_hosts is not None and storage != "memory":
        _fail("--storage starts its own clusters: not with --zk")
    results: dict[bool, list[Any]] = {False: [], True: []}
    for data in modes:
        cluster = None
        try:
            what = "with segment files" if data else "in memory"
            with progress(f"bench: starting a 1x3 cluster {what}") as phase:
                zk = zk_hosts
                if zk is None:
                    cluster = DevCluster(1, 3, data=data).start()
                    zk = str(cluster.zk_hosts)
                run = run_bench(f"zk://{zk}", records, size, rate, seconds, on_phase=phase)
                results[data].append(asyncio.run(run))
        except TritonError as e:
            click.echo(f"error: {e}", err=True)
            sys.exit(1)
        finally:
            if cluster is not None:
                cluster.stop()
    table = Table(title=f"TritonMQ 1 group x 3 replicas, {size}-byte records")
    table.add_column("measure")
    shown = [d for d in (False, True) if results[d]]
    for d in shown:
        table.add_column("segment files" if d else "memory only", justify="right")
    if len(shown) == 2:
        table.add_column("files / memory", justify="right")
    rows = (
        ("acknowledged publish, msg/s", "publish_acked_msgs_per_s", "{:,.0f}"),
        ("end to end 1->1, msg/s", "e2e_msgs_per_s", "{:,.0f}"),
        (f"latency p50 at {rate:,} msg/s, us", "latency_p50_us", "{:,.0f}"),
        (f"latency p99 at {rate:,} msg/s, us", "latency_p99_us", "{:,.0f}"),
    )
    for label, attr, fmt in rows:
        # the median of the runs of each mode (two each with --storage both)
        vals = [sorted(getattr(r, attr) for r in results[d])[len(results[d]) // 2] for d in shown]
        cells = [fmt.format(v) for v in vals]
        if len(vals) == 2:
            cells.append(f"{vals[1] / vals[0]:.2f}" if vals[0] else "-")
        table.add_row(label, *cells)
    Console().print(table)
    if json_path:
        r = (results[True] or results[False])[-1]
        write_json(
            r,
            json_path,
            {"python": platform.python_version(), "cpus": __import__("os").cpu_count()},
        )


@click.command()
@click.option("--seed", type=int, default=1, show_default=True, help="Decides the fault schedule.")
@click.option(
    "--duration",
    type=click.FloatRange(1),
    default=60.0,
    show_default=True,
    help="Seconds of faults (start, healing and draining come on top).",
)
@click.option("--faults", type=click.IntRange(1), default=None, help="Stop after this many faults.")
@click.option("--groups", type=click.IntRange(1, 16), default=2, show_default=True)
@click.option(
    "--rate",
    type=click.IntRange(10, 20_000),
    default=1500,
    show_default=True,
    help="Records per second over all producers.",
)
@click.option(
    "--json", "json_path", type=click.Path(dir_okay=False), default=None, help="Write results here."
)
@click.option(
    "--workdir",
    type=click.Path(file_okay=False),
    default=None,
    help="Keep broker logs and ZooKeeper data here (default: a temp dir, removed).",
)
@click.option(
    "--data",
    is_flag=True,
    help="Brokers keep segment files; faults include killing a whole group at once and"
    " flipping a byte of a backup's segment.",
)
def chaos(
    seed: int,
    duration: float,
    faults: int | None,
    groups: int,
    rate: int,
    json_path: str | None,
    workdir: str | None,
    data: bool,
) -> None:
    """Faults against a real cluster under load, then check: exit 1 on any lost, duplicated,
    reordered or phantom record."""
    from pathlib import Path

    from rich.console import Console

    from tritonmq.devtools.chaos import ChaosOptions, run_chaos, write_json

    def on_sigterm(_sig: int, _frame: Any) -> None:
        raise KeyboardInterrupt  # unwinds like Ctrl-C: every process started is stopped

    signal.signal(signal.SIGTERM, on_sigterm)
    console = Console()
    opts = ChaosOptions(
        seed=seed, duration=duration, faults=faults, groups=groups, rate=rate, data=data
    )
    try:
        report = run_chaos(opts, console, workdir=Path(workdir) if workdir else None)
    except TritonError as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(1)
    except KeyboardInterrupt:
        click.echo("interrupted; every process it started is stopped", err=True)
        sys.exit(130)
    console.print(report.table())
    if json_path:
        write_json(report, json_path)
    if not report.verdict.ok:
        click.echo(
            f"FAILED: seed {seed}: lost {report.verdict.lost}, dup {report.verdict.dup}, "
            f"order_violations {report.verdict.order_violations}, "
            f"phantom {report.verdict.phantom}",
            err=True,
        )
        sys.exit(1)


@click.command()
@click.option("--seed", type=int, default=None, help="Run this one seed and print its trace.")
@click.option("--seeds", type=click.IntRange(1), default=None, help="Run this many seeds.")
@click.option("--start", type=click.IntRange(0), default=0, show_default=True)
@click.option("--jobs", type=click.IntRange(1, 64), default=1, show_default=True)
@click.option("--groups", type=click.IntRange(1, 16), default=1, show_default=True)
@click.option("--replicas", type=click.IntRange(1, 7), default=3, show_default=True)
@click.option("--faults", type=click.IntRange(0, 100), default=5, show_default=True)
@click.option("--scenario", default=None, help="A fixed fault list (tritonmq/sim/scenarios.py).")
@click.option("--refusals", is_flag=True, help="Also draw live processes refusing connections.")
@click.option("--check-whole", is_flag=True, help="After healing, every replica is in the ISR.")
@click.option(
    "--moves", type=click.IntRange(0, 50), default=3, show_default=True, help="Slot moves a run."
)
@click.option(
    "--swarm",
    is_flag=True,
    help="Each seed also draws the cluster's shape and fault mix (printed with the result).",
)
@click.option(
    "--disks",
    is_flag=True,
    help="Brokers keep segment files: crashes keep what was written; whole-group crashes,"
    " torn tails and flipped bits are drawn too.",
)
def sim(
    seed: int | None,
    seeds: int | None,
    start: int,
    jobs: int,
    groups: int,
    replicas: int,
    faults: int,
    scenario: str | None,
    refusals: bool,
    check_whole: bool,
    moves: int,
    swarm: bool,
    disks: bool,
) -> None:
    """Deterministic simulator: whole clusters, seeded faults, invariants after every step."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from tritonmq.sim.runner import run_many, run_seed
    from tritonmq.sim.scenarios import SCENARIOS, with_scenario
    from tritonmq.sim.world import SimParams

    if (seed is None) == (seeds is None):
        _fail("give either --seed S (replay one) or --seeds N (run many)")
    params = SimParams(
        groups=groups,
        replicas=replicas,
        faults=faults,
        refusals=refusals,
        check_whole=check_whole,
        moves=moves,
        swarm=swarm,
        disks=disks,
    )
    if swarm and scenario is not None:
        _fail("--swarm draws the faults; it takes no --scenario")
    if scenario is not None:
        if scenario not in SCENARIOS:
            _fail(f"no scenario {scenario!r}; known: {', '.join(sorted(SCENARIOS))}")
        params = with_scenario(params, scenario)
    flags = f" --scenario {scenario}" if scenario else ""
    flags += (" --refusals" if refusals else "") + (" --check-whole" if check_whole else "")
    flags += " --disks" if disks else ""
    flags = " --swarm" if swarm else flags
    if seed is not None:
        r = run_seed(seed, params)
        if r.shape:
            click.echo(r.shape)
        click.echo(r.trace)
        click.echo(f"steps {r.steps} faults {r.faults} trace digest {r.digest}")
        sys.exit(1 if r.violation else 0)
    assert seeds is not None
    columns = (
        TextColumn("seeds"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("violations {task.fields[bad]}"),
    )
    # on stderr, and only on a terminal: stdout holds the results, the same either way
    tty = sys.stderr.isatty()
    with Progress(*columns, transient=True, console=Console(stderr=True), disable=not tty) as bar:
        task = bar.add_task("sim", total=seeds, bad=0)
        bad = 0

        def advance(r: object) -> None:
            nonlocal bad
            bad += 1 if getattr(r, "violation", None) else 0
            bar.update(task, advance=1, bad=bad)

        summary = run_many(start, seeds, jobs, params, advance)
    click.echo(
        f"seeds {summary.seeds} steps {summary.steps} faults {summary.faults}"
        f" violations {len(summary.failed)}"
    )
    for r in summary.failed[:20]:
        click.echo(f"  seed {r.seed}: {r.violation}")
        if r.shape:
            click.echo(f"    {r.shape}")
    if summary.failed:
        click.echo(f"replay one with: tritonmq sim --seed {summary.failed[0].seed}{flags}")
    sys.exit(1 if summary.failed else 0)
