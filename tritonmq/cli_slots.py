"""`tritonmq slots`: the slot map as ZooKeeper holds it, per slot its owner, era, history
and any move in progress (docs/replication.md, "Slot moves"). Read-only.

Registered on the main command from cli.py. Exit status 2: a bad argument, a cluster
that cannot be read (ZooKeeper unreachable or refusing our credential) or one without
a slot map (`tritonmq init` has not run under that chroot).
"""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from tritonmq.core.slothistory import SlotHistory
from tritonmq.errors import TritonError


def slot_row(n: int, h: SlotHistory) -> dict[str, Any]:
    """One slot as ``--json`` prints it (stable keys)."""
    move = None
    if h.move is not None:
        move = {"to": h.move.to, "state": h.state.value, "until": h.move.until}
    return {
        "slot": n,
        "owner": h.owner,
        "era": h.era,
        "state": h.state.value,
        "after": h.after,
        "writer": h.writer,
        "move": move,
        "history": [
            {"era": e.era, "group": e.group, "after": e.after, "until": e.until} for e in h.history
        ],
    }


def _history_text(h: SlotHistory) -> str:
    return ", ".join(f"{e.era}:{e.group} ({e.after}..{e.until}]" for e in h.history) or "-"


def _move_text(h: SlotHistory) -> str:
    if h.move is None:
        return "-"
    sealed = f" at {h.move.until}" if h.move.until is not None else ""
    return f"to {h.move.to}, {h.state.value}{sealed}"


@click.command()
@click.argument("slot_numbers", metavar="[SLOT]...", nargs=-1, type=click.IntRange(0))
@click.option("--zk", "zk_hosts", default="127.0.0.1:2181", show_default=True)
@click.option("--chroot", default="/tritonmq", show_default=True)
@click.option(
    "--timeout",
    type=click.FloatRange(0.1, 300),
    default=10.0,
    show_default=True,
    help="Seconds to wait for ZooKeeper.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def slots(
    slot_numbers: tuple[int, ...], zk_hosts: str, chroot: str, timeout: float, as_json: bool
) -> None:
    """The slot map: per slot (all, or the SLOTs given) its owner, era, history and move.

    A slot's records of era e are the ts range (after..until] of the group that held
    it; the current era's are the owner's ts above `after`.
    """
    from tritonmq.coord.slots import fetch_slot_histories

    try:
        read = fetch_slot_histories(zk_hosts, chroot, timeout)
    except TritonError as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(2)
    if read is None:
        click.echo(f"error: no slot map under {chroot} at {zk_hosts} (run tritonmq init)", err=True)
        sys.exit(2)
    count = len(read.slots)
    if bad := [n for n in slot_numbers if n >= count]:
        raise click.BadParameter(
            f"{', '.join(map(str, bad))}: the cluster has slots 0..{count - 1}",
            param_hint="SLOT",
        )
    chosen = sorted(set(slot_numbers)) if slot_numbers else range(count)
    rows = [(n, read.slots[n]) for n in chosen]
    if as_json:
        out = {"version": read.map_version, "slots": [slot_row(n, h) for n, h in rows]}
        click.echo(json.dumps(out, indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"TritonMQ slots (map version {read.map_version})")
    for col in ("slot", "owner", "era", "state", "writes above", "move", "history"):
        table.add_column(col)
    for n, h in rows:
        table.add_row(
            str(n),
            h.owner,
            str(h.era),
            h.state.value,
            str(h.after),
            _move_text(h),
            _history_text(h),
        )
    Console().print(table)
