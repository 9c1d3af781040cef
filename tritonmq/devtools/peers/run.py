"""Run TritonMQ and the peers through the shapes, alternating, and report the table."""

from __future__ import annotations

import os
import platform
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from tritonmq.devtools.peers import INSTALL_HINT, System, load, run_async
from tritonmq.devtools.peers.shapes import HIGHER_IS_BETTER, Sizes, measure, rows


class PeerMissing(Exception):
    """A peer's server or client package is not installed."""


@dataclass
class PeersReport:
    sizes: Sizes
    systems: dict[str, dict[str, str]] = field(default_factory=dict)  # key -> title, setup
    runs: list[dict[str, Any]] = field(default_factory=list)  # system, round, results
    started: str = ""
    loadavg_start: tuple[float, ...] = ()
    loadavg_end: tuple[float, ...] = ()

    def median(self, key: str) -> dict[str, float]:
        """``key``'s median over its rounds, per measure."""
        mine = [r["results"] for r in self.runs if r["system"] == key]
        return {m: statistics.median(r[m] for r in mine) for m in (mine[0] if mine else {})}

    def ratios(self, peer: str) -> dict[str, float]:
        """TritonMQ / ``peer`` per measure (its medians)."""
        t, p = self.median("tritonmq"), self.median(peer)
        return {m: t[m] / p[m] if p.get(m) else float("nan") for m in t}

    def as_dict(self) -> dict[str, Any]:
        peers = [k for k in self.systems if k != "tritonmq"]
        return {
            "sizes": asdict(self.sizes),
            "systems": self.systems,
            "runs": self.runs,
            "median": {k: self.median(k) for k in self.systems},
            "ratio_tritonmq_over": {k: self.ratios(k) for k in peers},
            "started": self.started,
            "loadavg_start": self.loadavg_start,
            "loadavg_end": self.loadavg_end,
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
        }


def systems_for(peers: list[str]) -> list[System]:
    """TritonMQ and ``peers``; a PeerMissing naming everything that is not installed."""
    systems = [load(k) for k in ["tritonmq", *peers]]
    if lacks := [m for s in systems for m in s.missing()]:
        raise PeerMissing(f"not installed: {', '.join(lacks)}; {INSTALL_HINT} installs them")
    return systems


def run_peers(
    peers: list[str], sizes: Sizes, on_phase: Callable[[str], None] | None = None
) -> PeersReport:
    """Each round: each system on fresh servers, every shape, servers stopped."""
    from tritonmq.broker.main import tune_gc

    phase = on_phase or (lambda _what: None)
    systems = systems_for(peers)
    tune_gc()  # the load holds many futures: keep full collections out of its latencies
    report = PeersReport(sizes, started=time.strftime("%Y-%m-%d %H:%M:%S %z"))
    report.loadavg_start = os.getloadavg()
    for s in systems:
        report.systems[s.key] = {"title": s.title, "setup": s.describe()}
    for round_no in range(1, sizes.rounds + 1):
        for s in systems:
            phase(f"bench: round {round_no}/{sizes.rounds}: starting {s.title}")
            s.start()
            try:
                results = run_async(measure(s, sizes, round_no, phase))
            finally:
                s.stop()
            report.runs.append({"system": s.key, "round": round_no, "results": results})
    report.loadavg_end = os.getloadavg()
    return report


def _fmt(key: str, v: float) -> str:
    if v != v:  # nan
        return "-"
    return f"{v:,.0f}" if key in HIGHER_IS_BETTER else f"{v:,.2f}"


def report_table(report: PeersReport) -> Any:
    """The rich table: a row per measure, a column per system, then TritonMQ / each peer."""
    from rich.table import Table

    s = report.sizes
    keys = list(report.systems)
    peers = keys[1:]
    rounds = s.rounds
    table = Table(
        title=(
            f"TritonMQ and peers, {s.size}-byte records, loopback, median of {rounds} "
            f"round{'s' if rounds > 1 else ''}"
        ),
        caption=(
            "ratio = TritonMQ / peer: above 1 TritonMQ is faster for msg/s, "
            "below 1 it is faster for ms"
        ),
    )
    table.add_column("measure")
    for k in keys:
        table.add_column(report.systems[k]["title"], justify="right")
    short = {"nats": "NATS", "redis": "Redis"}
    for p in peers:
        table.add_column(f"TritonMQ / {short.get(p, p)}", justify="right")
    medians = {k: report.median(k) for k in keys}
    ratios = {p: report.ratios(p) for p in peers}
    for key, label in rows(s):
        cells = [_fmt(key, medians[k].get(key, float("nan"))) for k in keys]
        cells += [
            "-" if (r := ratios[p].get(key, float("nan"))) != r else f"{r:.2f}" for p in peers
        ]
        table.add_row(label, *cells)
    return table


def bench_peers(peers: list[str], sizes: Sizes, json_path: str | None) -> None:
    """The command: run, print the table and the setups, write the JSON. Exit 1 when a peer
    is not installed or a system fails."""
    import json
    import sys

    import click
    from rich.console import Console

    from tritonmq.cli_ops import progress
    from tritonmq.errors import TritonError

    try:
        systems_for(peers)
    except PeerMissing as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(1)
    try:
        with progress("bench --against") as phase:
            report = run_peers(peers, sizes, on_phase=phase)
    except (TritonError, Exception) as e:  # a peer's own errors too: say it, no traceback
        click.echo(f"error: {type(e).__name__}: {e}", err=True)
        sys.exit(1)
    # wide enough that no cell wraps when the output goes to a file or a pipe
    console = Console() if sys.stdout.isatty() else Console(width=200)
    console.print(report_table(report))
    for info in report.systems.values():
        console.print(f"  {info['setup']}", highlight=False)
    la0 = " ".join(f"{x:.1f}" for x in report.loadavg_start)
    la1 = " ".join(f"{x:.1f}" for x in report.loadavg_end)
    console.print(
        f"  {report.started}, {os.cpu_count()} cpus, load average {la0} before, {la1} after",
        highlight=False,
    )
    if json_path:
        with open(json_path, "w") as f:
            json.dump(report.as_dict(), f, indent=2)
