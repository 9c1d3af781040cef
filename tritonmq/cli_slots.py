"""`tritonmq slots`: the slot map as ZooKeeper holds it, per slot its owner, era, history
and any move in progress (docs/replication.md, "Slot moves"), and what it weighs: the
retained records and bytes and publish rate summed over its topics, from the same
``stats`` reads as `tritonmq topics` (:func:`tritonmq.opsview.slot_figures`). Read-only.

`tritonmq slots move SLOT... --to GROUP` starts moves (``begin_move`` by CAS; the two
groups' primaries do the rest, docs/replication.md M2) and waits for each slot to reach
``normal`` again, printing its outcome; `tritonmq slots roll-back SLOT...` abandons moves
that have not completed (M7).

Registered on the main command from cli.py. Exit status 2: a bad argument (a slot out
of range, an unknown group, a move already running, nothing to roll back), a cluster
that cannot be read (ZooKeeper unreachable or refusing our credential) or one without
a slot map (`tritonmq init` has not run under that chroot), or ZooKeeper out of reach
until ``--timeout`` passed while waiting (the moves may still complete: look with
`tritonmq slots`); 1: a move that did not complete within ``--timeout`` (or was rolled back
meanwhile). A ZooKeeper blip (a lost connection or session) while a command reads, writes
or waits is waited out within ``--timeout``, with a warning on stderr, never a traceback. A group whose primary does
not answer (or no broker at all) leaves its slots' figures empty (``null`` in JSON),
with a warning on stderr, as `tritonmq topics` does.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

import click

from tritonmq.cli_admin import Unreachable, ca_file_option, token_option
from tritonmq.cli_context import zk_option
from tritonmq.cli_ops import cluster_options, console, read_once
from tritonmq.core.slothistory import SlotHistory
from tritonmq.errors import TritonError

T = TypeVar("T")
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


class _SlotsGroup(click.Group):
    """`tritonmq slots [SLOT]...` lists (the hidden ``show``); `slots move|roll-back` act."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if not args or args[0] not in self.commands:
            args = ["show", *args]
        return super().parse_args(ctx, args)

    def format_usage(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        formatter.write_usage(ctx.command_path, "[SLOT]... [OPTIONS] | move | roll-back")


@click.group(cls=_SlotsGroup)
def slots() -> None:
    """The slot map (`tritonmq slots [SLOT]...`, see `tritonmq slots show --help`), and
    moving slots between groups (`move`, `roll-back`)."""


@slots.command("show")
@click.argument("slot_numbers", metavar="[SLOT]...", nargs=-1, type=click.IntRange(0))
@cluster_options
def show(
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

    To move slots: `tritonmq slots move SLOT... --to GROUP`, `tritonmq slots roll-back
    SLOT...` (see their --help).
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


# --- moves ----------------------------------------------------------------------------

chroot_option = click.option("--chroot", default="/tritonmq", show_default=True)


class Blips:
    """Runs ZooKeeper operations of one command through blips until its deadline, warning
    on stderr once per outage (:func:`tritonmq.coord.zkclient.through_blips`)."""

    def __init__(self, zk: Any, deadline: float) -> None:
        self.zk, self.deadline = zk, deadline
        self.out = False  # in an outage now
        self.seen = 0  # blips so far

    def __call__(self, op: Callable[[], T]) -> T:
        from tritonmq.coord.zkclient import through_blips

        try:
            got = through_blips(self.zk, op, self.deadline, self._lost)
        except TritonError as e:
            _fail(
                f"{e}; what was started may still complete: look with `tritonmq slots`"
                if self.seen
                else str(e)
            )
        if self.out:
            self.out = False
            click.echo("ZooKeeper is back; going on", err=True)
        return got

    def _lost(self, e: BaseException) -> None:
        self.seen += 1
        if not self.out:
            self.out = True
            left = max(0.0, self.deadline - time.monotonic())
            click.echo(
                f"warning: lost ZooKeeper ({type(e).__name__}); waiting for it up to {left:.0f}s",
                err=True,
            )


def _session(zk_hosts: str, chroot: str, timeout: float = 10.0) -> Any:
    """A ZooKeeper session with the cluster's credential (from the environment) that
    reconnects through outages, and the slots as read; exit 2 when either cannot be had
    within ``timeout``."""
    from tritonmq.coord.slots import read_slot_histories
    from tritonmq.coord.zkclient import KEEP_TRYING, new_client

    if "/" in zk_hosts or not zk_hosts.strip():
        raise click.BadParameter("HOST:PORT[,HOST:PORT...]", param_hint="--zk")
    try:
        zk = new_client(zk_hosts, timeout=2.0, connection_retry=dict(KEEP_TRYING))
        zk.start(timeout=min(10.0, timeout))
    except Exception as e:
        _fail(f"cannot reach ZooKeeper at {zk_hosts}: {e}")
    try:
        read = Blips(zk, time.monotonic() + timeout)(lambda: read_slot_histories(zk, chroot))
    except SystemExit:
        zk.stop()
        raise
    except Exception as e:
        zk.stop()
        _fail(f"cannot read the slot map under {chroot}: {e}")
    if read is None:
        zk.stop()
        _fail(f"no slot map under {chroot} at {zk_hosts} (run tritonmq init)")
    return zk, read


def _fail(message: str) -> NoReturn:
    click.echo(f"error: {message}", err=True)
    sys.exit(2)


def _check_slots(numbers: tuple[int, ...], count: int) -> list[int]:
    if bad := [n for n in numbers if n >= count]:
        raise click.BadParameter(
            f"{', '.join(map(str, bad))}: the cluster has slots 0..{count - 1}", param_hint="SLOT"
        )
    return sorted(set(numbers))


@slots.command("move")
@click.argument("slot_numbers", metavar="SLOT...", nargs=-1, required=True, type=click.IntRange(0))
@click.option("--to", "to", required=True, help="The group that will own the slots.")
@click.option("--no-wait", is_flag=True, help="Start the moves and return.")
@click.option(
    "--timeout",
    type=click.FloatRange(0.1, 3600),
    default=60.0,
    show_default=True,
    help="Seconds to wait for every move to complete.",
)
@zk_option
@chroot_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of lines.")
def move(
    slot_numbers: tuple[int, ...],
    to: str,
    no_wait: bool,
    timeout: float,
    zk_hosts: str,
    chroot: str,
    as_json: bool,
) -> None:
    """Move each SLOT to group TO: its owner seals it (new writes are refused, naming TO),
    TO takes over the dedup state of its recent records and then writes it. No record is
    copied: the old group keeps what it holds of the slot (docs/replication.md, M2)."""
    from kazoo.exceptions import NoNodeError

    from tritonmq.coord import paths
    from tritonmq.core.slothistory import begin_move

    deadline = time.monotonic() + timeout
    zk, read = _session(zk_hosts, chroot, timeout)
    blips = Blips(zk, deadline)
    try:
        chosen = _check_slots(slot_numbers, len(read.slots))

        def children() -> set[str]:
            try:  # the groups that ever ran
                return set(zk.get_children(paths.groups(chroot)))
            except NoNodeError:
                return set()

        groups = blips(children)
        groups |= {h.owner for h in read.slots}
        if to not in groups:
            known = ", ".join(sorted(groups)) or "none"
            _fail(f"no group {to!r} in the cluster (groups: {known})")
        for n in chosen:  # every slot checked before any is written
            try:
                begin_move(read.slots[n], to)
            except TritonError as e:
                _fail(f"slot {n}: {e}")
        for n in chosen:
            _begin(blips, chroot, n, to)
        if no_wait:
            _report([(n, "moving", read.slots[n].owner) for n in chosen], as_json)
            return
        outcomes = _wait(blips, chroot, chosen, to, deadline)
    finally:
        zk.stop()
        zk.close()
    _report(outcomes, as_json)
    if any(state != "moved" for _, state, _ in outcomes):
        sys.exit(1)


def _begin(blips: Blips, chroot: str, n: int, to: str) -> None:
    """Begin slot ``n``'s move to ``to`` by CAS. After a blip the write's outcome is unknown:
    a slot found moving to ``to`` (or owned by it) is this write's work, not an error."""
    from tritonmq.coord.slots import apply_slot_step, read_slot
    from tritonmq.core.slothistory import begin_move

    seen = blips.seen
    try:
        blips(lambda: apply_slot_step(blips.zk, chroot, n, lambda h: begin_move(h, to)))
    except TritonError as e:
        if blips.seen > seen:
            h = blips(lambda: read_slot(blips.zk, chroot, n)).history
            if (h.move is not None and h.move.to == to) or h.owner == to:
                return
        _fail(f"slot {n}: {e}")


def _wait(blips: Blips, chroot: str, chosen: list[int], to: str, deadline: float) -> list[Outcome]:
    """Each slot's outcome once it is ``normal`` again (moved to ``to``, or rolled back),
    or its state when the monotonic ``deadline`` passed. ZooKeeper blips are waited out."""
    from tritonmq.coord.slots import read_slot_histories
    from tritonmq.core.slothistory import SlotState

    while True:
        read = blips(lambda: read_slot_histories(blips.zk, chroot))
        assert read is not None
        out: list[Outcome] = []
        for n in chosen:
            h = read.slots[n]
            if h.state is SlotState.NORMAL:
                out.append((n, "moved" if h.owner == to else "rolled back", h.owner))
            else:
                out.append((n, h.state.value, h.owner))
        if all(state in ("moved", "rolled back") for _, state, _ in out):
            return out
        if time.monotonic() >= deadline:
            return out
        time.sleep(0.1)


Outcome = tuple[int, str, str]  # slot, "moved" | "rolled back" | its state, its owner


def _report(outcomes: list[Outcome], as_json: bool) -> None:
    if as_json:
        rows = [{"slot": n, "outcome": state, "owner": owner} for n, state, owner in outcomes]
        click.echo(json.dumps({"slots": rows}, indent=2))
        return
    for n, state, owner in outcomes:
        click.echo(f"slot {n}: {state} (owner {owner})")


@slots.command("roll-back")
@click.argument("slot_numbers", metavar="SLOT...", nargs=-1, required=True, type=click.IntRange(0))
@zk_option
@chroot_option
def roll_back_cmd(slot_numbers: tuple[int, ...], zk_hosts: str, chroot: str) -> None:
    """Abandon the moves of SLOTs that have not completed: the owner writes them again, in
    the same era (docs/replication.md, M7). A move that completed meanwhile stays done."""
    from tritonmq.coord.slots import apply_slot_step
    from tritonmq.core.slothistory import roll_back

    zk, read = _session(zk_hosts, chroot)
    blips = Blips(zk, time.monotonic() + 30.0)
    try:
        chosen = _check_slots(slot_numbers, len(read.slots))
        for n in chosen:
            if read.slots[n].move is None:
                _fail(f"slot {n}: no move to roll back")
        for n in chosen:
            try:
                h = blips(lambda n=n: apply_slot_step(zk, chroot, n, roll_back))  # type: ignore[misc]
            except TritonError as e:
                _fail(f"slot {n}: {e} (did it complete meanwhile?)")
            click.echo(f"slot {n}: rolled back (owner {h.owner})")
    finally:
        zk.stop()
        zk.close()


# --- rebalance --------------------------------------------------------------------------


@click.command()
@click.option(
    "--groups",
    "group_list",
    default="",
    help="Comma-separated groups to spread over (default: every group of the cluster); "
    "a group left out gives all its slots away (drain it before removing it).",
)
@click.option("--execute", is_flag=True, help="Run the moves (default: only show them).")
@click.option(
    "--timeout",
    type=click.FloatRange(0.1, 3600),
    default=120.0,
    show_default=True,
    help="With --execute: seconds to wait for every move to complete.",
)
@click.option(
    "--by",
    type=click.Choice(["count", "rate"]),
    default="count",
    show_default=True,
    help="Even out the number of slots, or the publish rate measured now (each group's "
    "primary is asked, as tritonmq slots does).",
)
@zk_option
@chroot_option
@ca_file_option
@token_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of lines.")
def rebalance(
    group_list: str,
    execute: bool,
    timeout: float,
    by: str,
    zk_hosts: str,
    chroot: str,
    ca_file: str | None,
    token_file: str | None,
    as_json: bool,
) -> None:
    """Spread the slots over the groups: evenly by count with the fewest moves, or by the
    publish rate measured now (--by rate). A dry run unless --execute; then as `tritonmq
    slots move`, exit 1 when a move did not complete."""
    from kazoo.exceptions import NoNodeError

    from tritonmq.coord import paths
    from tritonmq.core.rebalance import even_plan, rate_plan

    deadline = time.monotonic() + timeout
    zk, read = _session(zk_hosts, chroot, timeout)
    blips = Blips(zk, deadline)
    try:

        def children(path: str) -> list[str]:
            try:
                return list(zk.get_children(path))
            except NoNodeError:
                return []

        known = set(blips(lambda: children(paths.groups(chroot))))
        known |= {h.owner for h in read.slots}
        groups = [g.strip() for g in group_list.split(",") if g.strip()] or sorted(known)
        if unknown := sorted(set(groups) - known):
            _fail(
                f"no group {', '.join(map(repr, unknown))} in the cluster (groups: {', '.join(sorted(known))})"
            )
        rates: dict[int, float] | None = None
        if by == "rate":
            rates = _rates(zk_hosts, chroot, ca_file, token_file, read)
            plan = rate_plan(read.slots, groups, rates)
        else:
            plan = even_plan(read.slots, groups)
        for to in sorted({m.to for m in plan}) if execute else ():
            live = blips(lambda to=to: children(paths.members(chroot, to)))  # type: ignore[misc]
            if not live:
                _fail(f"group {to} has no live broker: it cannot take slots over")
        after = {g: 0 for g in groups}
        for h in read.slots:
            g = h.move.to if h.move is not None else h.owner
            after[g] = after.get(g, 0) + 1
        for m in plan:
            after[m.source] -= 1
            after[m.to] += 1
        outcomes: list[Outcome] = []
        if execute and plan:
            for m in plan:
                _begin(blips, chroot, m.slot, m.to)
            outcomes = _wait_each(blips, chroot, {m.slot: m.to for m in plan}, deadline)
    finally:
        zk.stop()
        zk.close()
    spread = dict(sorted(after.items()))  # a drained group shows 0
    if as_json:
        out: dict[str, Any] = {
            "moves": [{"slot": m.slot, "from": m.source, "to": m.to} for m in plan],
            "after": spread,
            "executed": execute,
        }
        if rates is not None:  # records/s per group once the moves are done
            where = {n: h.move.to if h.move else h.owner for n, h in enumerate(read.slots)}
            where.update({m.slot: m.to for m in plan})
            out["rate_after"] = {
                g: round(sum(r for n, r in rates.items() if where[n] == g), 1) for g in spread
            }
        if execute:
            out["outcomes"] = [{"slot": n, "outcome": s, "owner": o} for n, s, o in outcomes]
        click.echo(json.dumps(out, indent=2))
    else:
        if execute:
            _report(outcomes, False)
        else:
            for m in plan:
                click.echo(f"slot {m.slot}: {m.source} -> {m.to}")
        what = "moved" if execute else "to move (dry run: --execute runs them)"
        shares = ", ".join(f"{g} {n}" for g, n in spread.items())
        click.echo(f"{len(plan)} slot(s) {what}; then {shares}")
    if execute and any(state != "moved" for _, state, _ in outcomes):
        sys.exit(1)


def _wait_each(blips: Blips, chroot: str, to: dict[int, str], deadline: float) -> list[Outcome]:
    """:func:`_wait` for slots bound to different groups."""
    by_group: dict[str, list[int]] = {}
    for n, g in to.items():
        by_group.setdefault(g, []).append(n)
    out: list[Outcome] = []
    for g, ns in sorted(by_group.items()):
        out += _wait(blips, chroot, sorted(ns), g, deadline)
    return sorted(out)


def _rates(
    zk_hosts: str, chroot: str, ca_file: str | None, token_file: str | None, read: Any
) -> dict[int, float]:
    """Each slot's publish rate now, from its group's primary; exit 2 when a group that
    owns slots does not answer (a plan on half the figures would be wrong)."""
    figures = _figures(zk_hosts, chroot, ca_file, token_file, 10.0)
    missing = sorted(
        {
            read.slots[n].owner
            for n in range(len(read.slots))
            if n not in figures or figures[n]["rate"] is None
        }
    )
    if missing:
        _fail(f"no publish rate from group(s) {', '.join(missing)}: their primaries did not answer")
    return {n: float(f["rate"]) for n, f in figures.items()}
