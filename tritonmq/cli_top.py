"""``tritonmq top``: a live view of a cluster for watching it work (and fail over).

Once a second (``--interval``) it reads a :class:`~tritonmq.opsview.Snapshot` (ZooKeeper
and every group primary's ``stats``) and redraws: per group its epoch, primary, ISR,
retained bytes against ``max_bytes``, publish rate, the worst subscription lag, and the
failovers seen since it started (a new epoch or primary in ZooKeeper); the busiest
topics; the subscriptions furthest behind; and the last failovers with their time.
``--once`` prints one frame (or, with ``--json``, its rows) and exits. When stdout is not
a terminal, frames are printed one after another (like ``top -b``).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from dataclasses import dataclass, field
from typing import Any

import click

from tritonmq.cli_admin import read_token
from tritonmq.cli_ops import (
    Reader,
    Unreachable,
    cluster_options,
    console,
    subscriptions_table,
    topics_table,
)
from tritonmq.opsview import (
    Snapshot,
    fmt,
    fmt_bytes,
    fmt_rate,
    fmt_seconds,
    group_rows,
    subscription_rows,
    topic_rows,
)

EVENTS_KEPT = 8


@dataclass
class Watch:
    """What ``top`` has seen since it started: failovers per group, and when."""

    last: dict[str, tuple[Any, Any]] = field(default_factory=dict)  # group -> (epoch, primary)
    failovers: dict[str, int] = field(default_factory=dict)
    events: list[str] = field(default_factory=list)

    def saw(self, snap: Snapshot) -> None:
        clock = time.strftime("%H:%M:%S", time.localtime(snap.taken_at))
        for g, info in sorted(snap.groups.items()):
            now = (info.get("epoch"), info.get("primary"))
            before = self.last.get(g)
            self.last[g] = now
            if before is None or before == now:
                continue
            if before[1] != now[1]:
                self.failovers[g] = self.failovers.get(g, 0) + 1
                what = f"primary {before[1]} -> {now[1]}"
            else:
                what = "re-elected"
            self.events.append(f"{clock}  {g}: {what} (epoch {before[0]} -> {now[0]})")
        del self.events[:-EVENTS_KEPT]


def groups_table(rows: list[dict[str, Any]]) -> Any:
    from rich.table import Table

    table = Table(title="groups")
    right = {"epoch", "records", "memory", "rate", "max lag", "oldest", "failovers"}
    cols = ["group", "epoch", "primary", "isr", "records", "memory", "rate", "max lag"]
    for c in [*cols, "oldest", "failovers"]:
        table.add_column(c, justify="right" if c in right else "left")
    for r in rows:
        isr = ", ".join(r["isr"]) + f" ({len(r['isr'])}/{len(r['members'])})"
        if r["under_replicated"]:
            isr = f"[bold red]{isr}[/]"
        used = fmt_bytes(r["bytes"])
        if r["bytes"] is not None and r["max_bytes"]:
            used += f" ({100 * r['bytes'] / r['max_bytes']:.0f}%)"
        primary = fmt(r["primary"]) if r["answered"] else f"{fmt(r['primary'])} [red](no answer)[/]"
        table.add_row(
            r["group"],
            fmt(r["epoch"]),
            primary,
            isr,
            fmt(r["records"]),
            used,
            fmt_rate(r["rate"]),
            fmt(r["max_lag"]),
            fmt_seconds(r["max_lag_s"]),
            str(r["failovers_seen"]),
        )
    return table


def frame(snap: Snapshot, watch: Watch, shown: int, zk_hosts: str, note: str = "") -> Any:
    """One screen: groups, the busiest topics, the subscriptions furthest behind, failovers."""
    from rich.console import Group
    from rich.text import Text

    topics = sorted(
        topic_rows(snap),
        key=lambda r: (-(r["rate"] or 0), -(r["bytes"] or 0), r["topic"]),
    )
    subs = sorted(subscription_rows(snap), key=lambda r: (-(r["lag"] or 0), r["topic"], r["name"]))
    clock = time.strftime("%H:%M:%S", time.localtime(snap.taken_at))
    seen = sum(watch.failovers.values())
    head = Text(f"TritonMQ at {zk_hosts}  {clock}  failovers seen: {seen}", style="bold")
    parts: list[Any] = [head]
    if note:
        parts.append(Text(note, style="red"))
    parts.append(groups_table(group_rows(snap, watch.failovers)))
    parts.append(topics_table(topics[:shown], snap.taken_at, f"topics (busiest {shown})"))
    parts.append(subscriptions_table(subs[:shown], f"subscriptions (furthest behind {shown})"))
    parts.append(Text("failovers:\n  " + ("\n  ".join(watch.events) or "none seen")))
    return Group(*parts)


def snapshot_json(snap: Snapshot, watch: Watch) -> dict[str, Any]:
    return {
        "taken_at": snap.taken_at,
        "groups": group_rows(snap, watch.failovers),
        "topics": topic_rows(snap),
        "subscriptions": subscription_rows(snap),
        "failovers": list(watch.events),
    }


@click.command("top")
@cluster_options
@click.option("--once", is_flag=True, help="Print one frame and exit (with --json: its rows).")
@click.option(
    "--interval",
    type=click.FloatRange(0.2, 60),
    default=1.0,
    show_default=True,
    help="Seconds between refreshes.",
)
@click.option(
    "--rows",
    "shown",
    type=click.IntRange(1, 1000),
    default=10,
    show_default=True,
    help="Topics and subscriptions shown: the busiest, the furthest behind.",
)
def top(
    zk_hosts: str,
    chroot: str,
    ca_file: str | None,
    token_file: str | None,
    timeout: float,
    as_json: bool,
    once: bool,
    interval: float,
    shown: int,
) -> None:
    """A live view of the cluster, refreshed every second until Ctrl-C: per group its
    epoch, primary, ISR, retained bytes, publish rate, worst lag and the failovers seen;
    the busiest topics; the subscriptions furthest behind."""
    token = read_token(token_file)
    watch = Watch()

    async def one() -> Snapshot:
        async with Reader(zk_hosts, chroot, ca_file, token, timeout) as r:
            return await r.read()

    async def live() -> None:
        from rich.live import Live

        out = console()
        async with Reader(zk_hosts, chroot, ca_file, token, timeout) as r:
            snap = await r.read()
            watch.saw(snap)
            note = ""
            if not out.is_terminal:  # batch mode (like top -b): one frame after another
                while True:
                    out.print(frame(snap, watch, shown, zk_hosts, note))
                    sys.stdout.flush()
                    snap, note = await next_read(r, snap)
            with Live(frame(snap, watch, shown, zk_hosts), console=out) as view:
                while True:
                    snap, note = await next_read(r, snap)
                    view.update(frame(snap, watch, shown, zk_hosts, note))

    began = time.monotonic()

    async def next_read(r: Reader, last: Snapshot) -> tuple[Snapshot, str]:
        """The next snapshot, ``interval`` after the last read began; while ZooKeeper cannot
        be read, the last one again with a note saying so."""
        nonlocal began
        await asyncio.sleep(max(0.0, interval - (time.monotonic() - began)))
        began = time.monotonic()
        try:
            snap = await r.read()
        except Unreachable as e:
            return last, f"{time.strftime('%H:%M:%S')} {e.message}; showing the last read"
        watch.saw(snap)
        return snap, ""

    try:
        if once:
            snap = asyncio.run(one())
            watch.saw(snap)
            if as_json:
                click.echo(json.dumps(snapshot_json(snap, watch), indent=2))
            else:
                console().print(frame(snap, watch, shown, zk_hosts))
            return
        if as_json:
            raise click.UsageError("--json needs --once (a live view has no JSON form)")
        asyncio.run(live())
    except KeyboardInterrupt:
        pass
