"""The operator's commands: ``tritonmq topics``, ``subscriptions [TOPIC]`` (with ``delete``
and ``reset``) and ``top``. Registered on the main command by :func:`add_commands`.

Each reads ZooKeeper (slot map, group state, durable subscriptions and their stored
offsets) and asks every group's primary for ``stats`` (an admin op: a token with
``admin`` when the brokers require tokens), then joins the two (:mod:`tritonmq.opsview`).
Every command has ``--json`` (the rows, with stable keys). Exit status 2: a bad argument
or a cluster that cannot be read (ZooKeeper unreachable, nothing registered). A group
whose primary does not answer within ``--timeout``, or refuses (no admin token), shows
what ZooKeeper holds, with a warning on stderr naming why.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import click

from tritonmq.cli_admin import (
    Unreachable,
    ca_file_option,
    delete,
    read_token,
    reset,
    token_option,
)
from tritonmq.cli_context import topic_callback, zk_option
from tritonmq.errors import (
    CoordinationError,
    Forbidden,
    TokenExpired,
    TritonError,
    Unauthenticated,
)
from tritonmq.opsview import (
    Snapshot,
    fmt,
    fmt_age,
    fmt_bytes,
    fmt_rate,
    fmt_seconds,
    subscription_rows,
    topic_rows,
)

F = TypeVar("F", bound=Callable[..., Any])
REFUSALS = (Forbidden, Unauthenticated, TokenExpired)  # no admin token
PIPE_WIDTH = 400  # columns of a table printed to a pipe (a table only takes what it needs)


def cluster_options(f: F) -> F:
    """The options of every command that reads the cluster: where, as whom, how long, --json."""
    for option in reversed(
        [
            zk_option,
            click.option("--chroot", default="/tritonmq", show_default=True),
            ca_file_option,
            token_option,
            click.option(
                "--timeout",
                type=click.FloatRange(0.1, 300),
                default=5.0,
                show_default=True,
                help="Seconds to wait for ZooKeeper and for each group's primary.",
            ),
            click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table."),
        ]
    ):
        f = option(f)
    return f


class Reader:
    """Reads snapshots of one cluster: a ZooKeeper session and a client kept open across
    reads (``top`` reads once a second; the client's links follow each primary)."""

    def __init__(
        self, zk_hosts: str, chroot: str, ca_file: str | None, token: str | None, timeout: float
    ) -> None:
        self.zk_hosts, self.chroot, self.timeout = zk_hosts, chroot, timeout
        self.ca_file, self.token = ca_file, token
        self.zk: Any = None
        self.client: Any = None
        self.slot_map: Any = None  # the last read (top reads every second)

    async def __aenter__(self) -> Reader:
        from tritonmq.client import Client
        from tritonmq.coord.zkclient import new_client

        if "/" in self.zk_hosts or not self.zk_hosts.strip():
            raise click.BadParameter("HOST:PORT[,HOST:PORT...]", param_hint="--zk")
        if not self.chroot.startswith("/"):
            raise click.BadParameter("a ZooKeeper path, starting with /", param_hint="--chroot")
        zk = new_client(self.zk_hosts, timeout=2.0)
        try:
            await asyncio.to_thread(zk.start, self.timeout)
        except Exception as e:
            await asyncio.to_thread(zk.close)
            raise Unreachable(f"cannot reach ZooKeeper at {self.zk_hosts}: {e}") from None
        self.zk = zk
        url = f"zk://{self.zk_hosts}{self.chroot}"
        self.client = Client(
            url,
            timeout=self.timeout,
            connect_timeout=self.timeout,
            ca_file=self.ca_file,
            token=self.token,
        )
        try:
            await self.client.connect()
        except TritonError as e:
            await self.__aexit__()
            raise Unreachable(f"cannot read the cluster at {url}: {e}") from None
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.client is not None:
            await self.client.close()
        if self.zk is not None:
            await asyncio.to_thread(_stop, self.zk)

    async def read(self, topic: str | None = None) -> Snapshot:
        from tritonmq.coord.inspect import read_cluster, read_subscriptions
        from tritonmq.coord.slots import read_slot_map

        try:
            cluster = await asyncio.to_thread(read_cluster, self.zk, self.chroot, with_slots=False)
            self.slot_map = await asyncio.to_thread(
                read_slot_map, self.zk, self.chroot, self.slot_map
            )
            cluster["slots"] = self.slot_map.as_dict() if self.slot_map else None
            subs = await asyncio.to_thread(read_subscriptions, self.zk, self.chroot)
        except CoordinationError as e:
            raise Unreachable(str(e)) from None
        except Exception as e:
            raise Unreachable(f"cannot read {self.chroot} in ZooKeeper: {e}") from None
        if not cluster["groups"]:
            raise Unreachable(
                f"no broker group is registered under {self.chroot} at {self.zk_hosts}"
            )
        snap = Snapshot(cluster, subs)
        groups = sorted(snap.groups)
        if topic is not None:
            groups = [g for g in groups if g == snap.group_of(topic)]
        answers = await asyncio.gather(*(self._stats(g, topic) for g in groups))
        for g, got in zip(groups, answers, strict=True):
            if isinstance(got, str):
                snap.unanswered[g] = got
            else:
                snap.stats[g] = got
        snap.taken_at = time.time()  # ages are judged from when the answers were in
        return snap

    async def _stats(self, group: str, topic: str | None) -> Any:
        try:
            async with asyncio.timeout(self.timeout):
                return await self.client.group_stats(group, topic or "")
        except REFUSALS as e:
            return f"{e.code}: {e} (stats need a token with the admin claim)"
        except TimeoutError:
            return f"its primary did not answer within {self.timeout:g}s"
        except TritonError as e:
            return f"{e.code}: {e}" if e.code else str(e)


def _stop(zk: Any) -> None:
    zk.stop()
    zk.close()


def read_once(
    zk_hosts: str,
    chroot: str,
    ca_file: str | None,
    token_file: str | None,
    timeout: float,
    topic: str | None = None,
) -> Snapshot:
    """One snapshot (exit status 2 when the cluster cannot be read), with a warning on
    stderr for each group whose primary did not answer."""
    token = read_token(token_file)

    async def run() -> Snapshot:
        async with Reader(zk_hosts, chroot, ca_file, token, timeout) as r:
            return await r.read(topic)

    snap = asyncio.run(run())
    _warn(snap)
    return snap


def _warn(snap: Snapshot) -> None:
    for g, why in sorted(snap.unanswered.items()):
        click.echo(f"warning: group {g}: {why}; showing what ZooKeeper holds", err=True)


def _print_json(rows: Any) -> None:
    click.echo(json.dumps(rows, indent=2))


def _table(title: str, columns: list[str], right: set[str]) -> Any:
    from rich.table import Table

    table = Table(title=title)
    for c in columns:
        table.add_column(c, justify="right" if c in right else "left")
    return table


def _ago(age: str) -> str:
    return {"-": "-", "0": "now"}.get(age, f"{age} ago")


def topics_table(rows: list[dict[str, Any]], now: float, title: str = "TritonMQ topics") -> Any:
    cols = ["topic", "group", "slot", "records", "bytes", "rate", "last publish", "consumers"]
    table = _table(title, [*cols, "subscriptions"], {*cols[2:], "subscriptions"})
    for r in rows:
        table.add_row(
            r["topic"],
            fmt(r["group"]),
            fmt(r["slot"]),
            fmt(r["records"]),
            fmt_bytes(r["bytes"]),
            fmt_rate(r["rate"]),
            _ago(fmt_age(r["last_publish_ms"], now)),
            fmt(r["consumers"]),
            str(r["subscriptions"]),
        )
    return table


def subscriptions_table(
    rows: list[dict[str, Any]], title: str = "TritonMQ durable subscriptions"
) -> Any:
    cols = ["topic", "subscription", "mode", "owner", "group", "offset", "head", "lag", "lag age"]
    table = _table(title, [*cols, "consumers"], {"offset", "head", "lag", "lag age", "consumers"})
    for r in rows:
        table.add_row(
            r["topic"],
            r["name"],
            r["mode"],
            r["owner"] or "anonymous",
            fmt(r["group"]),
            str(r["offset"]),
            fmt(r["head"]),
            fmt(r["lag"]),
            fmt_seconds(r["lag_s"]),
            fmt(r["consumers"]),
        )
    return table


def console() -> Any:
    """stdout's console; when it is not a terminal (a pipe, a file), wide enough that no
    cell is cut short: a script or grep reads whole names."""
    from rich.console import Console

    return Console() if sys.stdout.isatty() else Console(width=PIPE_WIDTH)


@click.command("topics")
@click.argument("topic", required=False, callback=topic_callback)
@cluster_options
def topics(
    topic: str | None,
    zk_hosts: str,
    chroot: str,
    ca_file: str | None,
    token_file: str | None,
    timeout: float,
    as_json: bool,
) -> None:
    """Per topic: group, slot, retained records and bytes, publish rate, consumers and
    durable subscriptions (every topic a primary holds or that has a subscription)."""
    snap = read_once(zk_hosts, chroot, ca_file, token_file, timeout, topic)
    rows = topic_rows(snap, topic)
    if as_json:
        _print_json(rows)
        return
    console().print(topics_table(rows, snap.taken_at))


class _ListByDefault(click.Group):
    """``subscriptions [TOPIC]`` lists; ``subscriptions delete|reset ...`` administer. A first
    argument that names no subcommand is the list's (``list`` is also spelled out)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if not args or (args[0] not in self.commands and args[0] not in ("--help", "-h")):
            args = ["list", *args]
        return super().parse_args(ctx, args)


@click.group("subscriptions", cls=_ListByDefault)
def subscriptions() -> None:
    """Durable subscriptions: list them (`tritonmq subscriptions [TOPIC]`), delete or reset
    one (`delete TOPIC NAME`, `reset TOPIC NAME --to earliest|latest|TS`; dry runs unless
    --execute)."""


@subscriptions.command("list")
@click.argument("topic", required=False, callback=topic_callback)
@cluster_options
def list_subscriptions(
    topic: str | None,
    zk_hosts: str,
    chroot: str,
    ca_file: str | None,
    token_file: str | None,
    timeout: float,
    as_json: bool,
) -> None:
    """Per durable subscription (of TOPIC, or all): mode, owner, offset, the group's commit
    point (head), lag in records and how long its oldest unacknowledged record has waited,
    and connected consumers."""
    snap = read_once(zk_hosts, chroot, ca_file, token_file, timeout, topic)
    rows = subscription_rows(snap, topic)
    if as_json:
        _print_json(rows)
        return
    console().print(subscriptions_table(rows))


subscriptions.add_command(delete)
subscriptions.add_command(reset)


def add_commands(main: click.Group) -> None:
    from tritonmq.cli_top import top

    main.add_command(topics)
    main.add_command(subscriptions)
    main.add_command(top)


@contextmanager
def progress(message: str) -> Iterator[Callable[[str], None]]:
    """A spinner with ``message`` on stderr while a long command runs, when stderr is a
    terminal (stdout, the results, is untouched); yields a function that updates it."""
    if not sys.stderr.isatty():
        yield lambda _text: None
        return
    from rich.console import Console

    started = time.monotonic()
    with Console(stderr=True).status(message) as status:

        def update(text: str) -> None:
            status.update(f"{text} ({time.monotonic() - started:.0f}s)")

        yield update
