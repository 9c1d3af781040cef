"""`tritonmq slots`: the slot map as ZooKeeper holds it, per slot its owner, era, history
and any move in progress (docs/replication.md, "Slot moves"), and what it weighs: the
retained records and bytes and publish rate summed over its topics, from the same
``stats`` reads as `tritonmq topics` (:func:`tritonmq.opsview.slot_figures`). Read-only.

Registered on the main command from cli.py. Exit status 2: a bad argument, a cluster
that cannot be read (ZooKeeper unreachable or refusing our credential) or one without
a slot map (`tritonmq init` has not run under that chroot). A group whose primary does
not answer (or no broker at all) leaves its slots' figures empty (``null`` in JSON),
with a warning on stderr, as `tritonmq topics` does.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from tritonmq.cli_admin import Unreachable
from tritonmq.cli_ops import cluster_options, console, read_once
from tritonmq.core.slothistory import SlotHistory
from tritonmq.errors import TritonError

NO_FIGURES: dict[str, Any] = {"topics": None, "records": None, "bytes": None, "rate": None}


def slot_row(n: int, h: SlotHistory, figures: dict[str, Any] | None = None) -> dict[str, Any]:
    """One slot as ``--json`` prints it (stable keys); ``figures`` as
    :func:`~tritonmq.opsview.slot_figures` gives them (None: not known)."""
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
        **(figures or NO_FIGURES),
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
@cluster_options
def slots(
    slot_numbers: tuple[int, ...],
    zk_hosts: str,
    chroot: str,
    ca_file: str | None,
    token_file: str | None,
    timeout: float,
    as_json: bool,
) -> None:
    """The slot map: per slot (all, or the SLOTs given) its owner, era, history and move,
    and its topics' retained records and bytes and publish rate (from each primary).

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
    figures = _figures(zk_hosts, chroot, ca_file, token_file, timeout)
    if as_json:
        out = {
            "version": read.map_version,
            "slots": [slot_row(n, h, figures.get(n)) for n, h in rows],
        }
        click.echo(json.dumps(out, indent=2))
        return
    from rich.table import Table

    from tritonmq.opsview import fmt, fmt_bytes, fmt_rate

    table = Table(title=f"TritonMQ slots (map version {read.map_version})")
    for col in ("slot", "owner", "era", "state", "writes above", "move", "history"):
        table.add_column(col)
    for col in ("topics", "records", "bytes", "rate"):
        table.add_column(col, justify="right")
    for n, h in rows:
        f = figures.get(n, NO_FIGURES)
        table.add_row(
            str(n),
            h.owner,
            str(h.era),
            h.state.value,
            str(h.after),
            _move_text(h),
            _history_text(h),
            fmt(f["topics"]),
            fmt(f["records"]),
            fmt_bytes(f["bytes"]),
            fmt_rate(f["rate"]),
        )
    console().print(table)


def _figures(
    zk_hosts: str, chroot: str, ca_file: str | None, token_file: str | None, timeout: float
) -> dict[int, dict[str, Any]]:
    """Per slot its figures from each group's primary, as `tritonmq topics` reads them;
    none (with a warning) when no primary can be asked at all."""
    from tritonmq.opsview import slot_figures

    try:
        snap = read_once(zk_hosts, chroot, ca_file, token_file, timeout)
    except Unreachable as e:
        click.echo(f"warning: no per-slot figures: {e.message}", err=True)
        return {}
    return slot_figures(snap)
