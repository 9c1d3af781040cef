"""The `tritonmq` command: zk, broker, dev, status, pub, sub, bench, demo, init, chaos, sim
(topics, subscriptions and top are in cli_ops.py and cli_top.py; token in cli_admin.py).

Bad input exits with status 2 and a one-line message (click's convention).
"""

from __future__ import annotations

import json
import signal
import sys
import time
from typing import Any

import click

from tritonmq import cli_slots
from tritonmq.cli_admin import add_commands, ca_file_option, read_token, token_option
from tritonmq.cli_context import URL_HELP, ZK_HELP, resolve_url, topic_callback, zk_option
from tritonmq.cli_ops import add_commands as add_ops_commands
from tritonmq.context import DEV_PORT
from tritonmq.errors import ConfigError, CoordinationError, TritonError


def _fail(message: str) -> None:
    raise click.UsageError(message)


@click.group()
@click.version_option(package_name="tritonmq")
@click.option(
    "-v", "--verbose", is_flag=True, help="Show the ZooKeeper client's (kazoo's) own log lines."
)
@click.pass_context
def main(ctx: click.Context, verbose: bool) -> None:
    """TritonMQ: a replicated, in-memory publish/subscribe broker."""
    if not verbose and ctx.invoked_subcommand != "broker":  # a broker logs as it is told
        quiet_kazoo()


def quiet_kazoo() -> None:
    """kazoo logs each failed try and state change as a warning, which Python prints on
    stderr when nothing configured logging: a command says what went wrong in one line."""
    import logging

    kazoo = logging.getLogger("kazoo")
    kazoo.addHandler(logging.NullHandler())
    kazoo.propagate = False


@main.command()
@click.option(
    "--port", type=click.IntRange(0, 65535), default=None, help="Client port (default: a free one)."
)
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Keep data here (default: a temp dir).",
)
def zk(port: int | None, data_dir: str | None) -> None:
    """Run a standalone ZooKeeper (Debian's) until Ctrl-C; prints host:port when it serves."""
    from tritonmq.devtools.zkserver import run_foreground

    sys.exit(run_foreground(port, data_dir))


main.add_command(cli_slots.slots)  # tritonmq slots (tritonmq/cli_slots.py)
main.add_command(cli_slots.rebalance)  # tritonmq rebalance (tritonmq/cli_slots.py)


@main.command()
@click.option("--zk", "zk_hosts", default=None, help="ZooKeeper HOST:PORT[,...].")
@click.option("--group", default=None, help="Broker group name.")
@click.option("--id", "broker_id", default=None, help="Broker id, unique within the group.")
@click.option("--listen", default=None, help="HOST:PORT to listen on (port 0: any).")
@click.option(
    "--config",
    "config_file",
    type=click.Path(dir_okay=False),
    default=None,
    help="TOML settings file.",
)
@click.option("--chroot", default=None, help="ZooKeeper path all znodes live under.")
@click.option("--replicas", type=click.IntRange(1, 16), default=None)
@click.option("--min-insync", type=click.IntRange(1, 16), default=None)
@click.option("--session-timeout", type=click.FloatRange(0.4, 60), default=None, help="Seconds.")
@click.option(
    "--retention-s",
    type=click.FloatRange(0),
    default=None,
    help="Keep records this many seconds (setting retention_s; default 0).",
)
@click.option(
    "--data-dir",
    default=None,
    metavar="DIR",
    help="Keep the log in segment files here too (setting data_dir; default: memory only).",
)
@click.option(
    "--advertise-repl",
    default=None,
    metavar="URL",
    help="ws:// URL other brokers replicate from (default: the client URL).",
)
@click.option("--tls-cert", default=None, metavar="PEM", help="Certificate: serve wss://.")
@click.option("--tls-key", default=None, metavar="PEM", help="Private key of --tls-cert.")
@click.option("--tls-ca", default=None, metavar="PEM", help="CA a backup checks its primary by.")
@click.option("--log-level", default=None)
def broker(
    zk_hosts: str | None,
    group: str | None,
    broker_id: str | None,
    listen: str | None,
    config_file: str | None,
    chroot: str | None,
    replicas: int | None,
    min_insync: int | None,
    session_timeout: float | None,
    retention_s: float | None,
    data_dir: str | None,
    advertise_repl: str | None,
    tls_cert: str | None,
    tls_key: str | None,
    tls_ca: str | None,
    log_level: str | None,
) -> None:
    """Run one broker process."""
    from tritonmq.broker.credentials import load_credentials
    from tritonmq.broker.main import run_broker
    from tritonmq.config import load_config
    from tritonmq.tlsconfig import replication_context, server_context

    try:
        cfg = load_config(
            config_file,
            zk=zk_hosts,
            group=group,
            id=broker_id,
            listen=listen,
            chroot=chroot,
            replicas=replicas,
            min_insync=min_insync,
            session_timeout=session_timeout,
            retention_s=retention_s,
            data_dir=data_dir,
            advertise_repl=advertise_repl,
            tls_cert=tls_cert,
            tls_key=tls_key,
            tls_ca=tls_ca,
            log_level=log_level,
        )
        server_context(cfg)  # unreadable or mismatched TLS files: exit 2 now, not at bind
        replication_context(cfg)
    except TritonError as e:
        _fail(str(e))
    if ":" not in cfg.listen:
        _fail("--listen must be HOST:PORT")
    try:
        creds = load_credentials(cfg)
    except TritonError as e:
        _fail(str(e))
    try:
        code = run_broker(cfg, creds)
    except CoordinationError as e:  # ZooKeeper unreachable or refusing: a line, not a traceback
        click.echo(f"Error: {e}", err=True)
        sys.exit(1)
    sys.exit(code)


@main.command()
@click.option("--groups", type=click.IntRange(1, 64), default=1, show_default=True)
@click.option("--replicas", type=click.IntRange(1, 9), default=3, show_default=True)
@click.option("--zk", "zk_hosts", default=None, help="Use this ZooKeeper instead of starting one.")
@click.option(
    "--state-file",
    type=click.Path(dir_okay=False),
    default=None,
    help="Write cluster state JSON here.",
)
@click.option("--config", "config_file", type=click.Path(exists=True, dir_okay=False), default=None)
@click.option("--tls", is_flag=True, help="Serve wss:// with a local CA's certificates.")
@click.option(
    "--join",
    "join_file",
    type=click.Path(exists=True, dir_okay=False),
    default=None,
    help="Add groups (up to --groups in all) to the running dev cluster whose --state-file this is.",
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=DEV_PORT,
    show_default=True,
    help="ZooKeeper's port; the brokers take the next ones (0: any free ports).",
)
@click.option(
    "--restart/--no-restart",
    default=True,
    show_default=True,
    help="Start a broker that exits again, on its port (not if it exits within 10 s of that).",
)
def dev(
    groups: int,
    replicas: int,
    zk_hosts: str | None,
    state_file: str | None,
    config_file: str | None,
    tls: bool,
    join_file: str | None,
    port: int,
    restart: bool,
) -> None:
    """Run a local cluster (ZooKeeper + brokers) until Ctrl-C or SIGTERM.

    A broker that exits is reported on stderr (its pid, exit status or signal, log) and
    started again on its port, unless --no-restart or it exited within 10 s of a restart.

    Its brokers keep records an hour (retention_s = 3600, unless --config sets it; the
    brokers' own default is 0), so `pub` then `sub --from earliest` shows the record.
    Each broker also keeps its log in segment files under the cluster's directory, so a
    broker it restarts comes back with its records.

    It listens on fixed ports: ZooKeeper on --port (4350), the brokers on the ports after
    it, and writes the local context (its ZooKeeper, credentials and CA) to
    $TRITONMQ_CONTEXT, else $XDG_STATE_HOME/tritonmq/context.json, else
    ~/.local/state/tritonmq/context.json: other commands and Client() without a URL use
    it, so `tritonmq sub chat` and `tritonmq pub chat hello` need no flags. It removes the
    file when it stops.

    With --tls it makes a CA and broker certificates in its work directory and prints
    the CA file's path (the context names it too). With --join it adds groups to a
    running one instead, on any free ports (they own no slot until `tritonmq rebalance
    --execute` gives them some) and stops only those.
    """
    import os

    from tritonmq.context import context_path, remove_context, write_context
    from tritonmq.devtools.cluster import DevCluster, dev_retention_args, taken_ports

    if join_file is not None:
        if zk_hosts or tls:
            raise click.UsageError("--join takes the cluster's ZooKeeper and TLS from its state")
        try:
            with open(join_file) as f:
                joined = json.load(f)
            cluster = DevCluster.joining(joined, groups, replicas, config=config_file)
        except (OSError, ValueError, ConfigError) as e:
            raise click.UsageError(f"cannot join with {join_file}: {e}") from e
        cluster.broker_args = dev_retention_args(cluster.config)
    else:
        cluster = DevCluster(
            groups,
            replicas,
            zk=zk_hosts,
            config=config_file,
            tls=tls,
            broker_args=dev_retention_args(config_file),
            port=port,
            data=True,  # each broker keeps segment files under the cluster's directory
        )
        ports = cluster.ports()
        if ports and ports[-1] > 65535:
            cluster.stop()
            _fail(f"--port {port} leaves no room for {len(ports)} ports below 65536")
        taken = taken_ports(ports)
        if taken:
            cluster.stop()
            which = f"port {taken[0]} is" if len(taken) == 1 else f"ports {taken} are"
            _fail(
                f"{which} taken (dev needs {ports[0]}-{ports[-1]}): stop what listens there "
                "(another `tritonmq dev`?) or give --port (0: any free ports)"
            )
    context = context_path() if join_file is None else None
    stop = False

    def on_signal(_sig: int, _frame: Any) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        cluster.start()
        click.echo(f"zookeeper {cluster.zk_hosts}")
        click.echo(f"export TRITONMQ_ZK_AUTH_FILE={cluster.zk_auth_file}")
        click.echo(f"# read-only, for zk:// clients: {cluster.zk_reader_file}")
        if cluster.ca_file:
            click.echo(f"ca-file {cluster.ca_file}")
        for b in cluster.brokers.values():
            click.echo(f"broker {b.group}/{b.id} {b.url} pid {b.pid}")
        if context is not None:
            write_context(context, cluster.state(), os.getpid())
            click.echo(f"context {context} (commands and Client() without a cluster use it)")
        if state_file:
            cluster.write_state(state_file)
        if join_file is not None:
            added = ", ".join(cluster.groups)
            click.echo(f"added {added}; `tritonmq rebalance --execute` gives them slots")
        click.echo("ready; Ctrl-C stops the cluster", err=True)

        def save() -> None:  # the context and state name each broker's pid and URL
            if context is not None:
                write_context(context, cluster.state(), os.getpid())
            if state_file:
                cluster.write_state(state_file)

        watch = BrokerWatch(cluster, restart=restart, on_change=save)
        while not stop:
            time.sleep(0.2)
            watch.check(lambda: stop)
    except TritonError as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(1)
    finally:
        if context is not None:
            remove_context(context, os.getpid())
        cluster.stop()


class BrokerWatch:
    """`tritonmq dev`'s eye on its brokers: one line on stderr for each that exits, and,
    with ``restart``, a new process on its port (not again for one that exits within 10 s
    of a restart: it would only crash again; its log says why)."""

    MIN_LIFE_S = 10.0

    def __init__(self, cluster: Any, *, restart: bool, on_change: Any) -> None:
        self.cluster, self.restart, self.on_change = cluster, restart, on_change
        self.started: dict[str, float] = {}  # when each was restarted
        self.reported: set[int] = set()  # pids already said to have exited

    def check(self, stopping: Any) -> None:
        for b in list(self.cluster.brokers.values()):
            if b.proc is None or b.proc.poll() is None or b.pid in self.reported or stopping():
                continue
            self.reported.add(b.pid)
            code = b.proc.returncode
            how = f"killed by {signal.Signals(-code).name}" if code < 0 else f"status {code}"
            click.echo(f"broker {b.group}/{b.id} (pid {b.pid}) exited: {how}; log {b.log_path}",
                       err=True)  # fmt: skip
            if not self.restart:
                continue
            lived = time.monotonic() - self.started.get(b.id, -self.MIN_LIFE_S)
            if lived < self.MIN_LIFE_S:  # a crash loop: its log says why
                click.echo(f"  not restarting it: it exited {lived:.0f}s after its restart",
                           err=True)  # fmt: skip
                continue
            try:
                self.cluster.restart(b.id)
            except TritonError as e:
                click.echo(f"  cannot restart it: {e}", err=True)
                continue
            self.started[b.id] = time.monotonic()
            click.echo(f"broker {b.group}/{b.id} restarted: {b.url} pid {b.pid}", err=True)
            self.on_change()


@main.command()
@zk_option
@click.option("--chroot", default="/tritonmq", show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def status(zk_hosts: str, chroot: str, as_json: bool) -> None:
    """Per group: epoch, primary, ISR and live members."""
    from tritonmq.coord.inspect import fetch_cluster

    try:
        info = fetch_cluster(zk_hosts, chroot)
    except TritonError as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(1)
    pids = _dev_pids(zk_hosts, chroot)
    if as_json:
        out = {
            "groups": {
                g: {
                    "epoch": v["epoch"],
                    "primary": v["primary"],
                    "isr": v["isr"],
                    "members": sorted(v["members"]),
                    "urls": dict(sorted(v["members"].items())),
                    **(
                        {"pids": {m: pids[m] for m in sorted(v["members"]) if m in pids}}
                        if pids
                        else {}
                    ),  # fmt: skip
                }
                for g, v in info["groups"].items()
            }
        }
        click.echo(json.dumps(out, indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title="TritonMQ groups")
    for col in ("group", "epoch", "primary", "isr", "members"):
        table.add_column(col)
    for g, v in info["groups"].items():
        members = "\n".join(  # one a line: id, URL and, under `tritonmq dev`, pid
            f"{m} {u}" + (f" pid {pids[m]}" if m in pids else "") for m, u in v["members"].items()
        )
        table.add_row(g, str(v["epoch"]), str(v["primary"]), ", ".join(v["isr"]), members)
    Console().print(table)


def _dev_pids(zk_hosts: str, chroot: str) -> dict[str, int]:
    """Broker id -> pid, when the cluster is the one the local context's `tritonmq dev`
    runs (its processes are on this machine); else none."""
    from tritonmq.context import load_context

    try:
        ctx = load_context()
    except TritonError:
        return {}
    if ctx is None or not ctx.alive or not ctx.names_zk(zk_hosts) or ctx.chroot != chroot:
        return {}
    return dict(ctx.pids)


def _client_url(url: str | None, zk_hosts: str | None) -> str:
    if url and zk_hosts:
        _fail("give --url or --zk, not both")
    return resolve_url(url, zk_hosts)


_url_option = click.option("--url", default=None, help=URL_HELP)
_zk_option = click.option("--zk", "zk_hosts", default=None, metavar="HOST:PORT", help=ZK_HELP)


@main.command()
@click.argument("topic", callback=topic_callback)
@click.argument("value", required=False)
@_url_option
@_zk_option
@ca_file_option
@token_option
@click.option("--key", default=None, help="Record key (UTF-8).")
@click.option(
    "--durability",
    type=click.Choice(["memory", "written", "synced"]),
    default=None,
    help="When it is acknowledged: in memory, written or fsynced by every in-sync replica"
    " (default: the broker's `durability` setting).",
)
def pub(
    topic: str,
    value: str | None,
    url: str | None,
    zk_hosts: str | None,
    ca_file: str | None,
    token_file: str | None,
    key: str | None,
    durability: str | None,
) -> None:
    """Publish VALUE to TOPIC; with VALUE '-' (or none), publish each line of standard input
    as it comes (a record a line, each acknowledged line printed at once; Ctrl-C keeps
    what was acknowledged and exits 130)."""
    import asyncio

    from tritonmq.client import Client

    target, token = _client_url(url, zk_hosts), read_token(token_file)
    k = key.encode() if key is not None else None
    level = durability or ""

    async def run() -> None:
        async with Client(target, ca_file=ca_file, token=token) as c:
            if value not in (None, "-"):
                a = await c.publish(topic, value.encode(), key=k, durability=level)
                click.echo(f"{a.topic} ts={a.ts} group={a.group}")
                return
            if sys.stdin.isatty():
                click.echo(f"publishing each line to {topic} (Ctrl-D ends)", err=True)
            await _publish_lines(c, topic, k, level)

    try:
        asyncio.run(run())
    except KeyboardInterrupt:
        sys.exit(130)
    except TritonError as e:
        click.echo(f"error: {e.code}: {e}", err=True)
        sys.exit(1)


async def _publish_lines(client: Any, topic: str, key: bytes | None, level: str = "") -> None:
    """Each line of stdin a record, published as soon as it is read, its acknowledgement
    printed as soon as it comes (in order); at most 256 in flight."""
    import asyncio
    import os
    import threading

    loop = asyncio.get_running_loop()
    lines: asyncio.Queue[bytes | None] = asyncio.Queue()

    def read() -> None:
        # A daemon thread reading the descriptor itself: a read that blocks (nothing typed
        # yet) holds no lock of sys.stdin's, so Ctrl-C can end the process at once.
        fd, rest = sys.stdin.fileno(), b""
        try:
            while chunk := os.read(fd, 1 << 16):
                *whole, rest = (rest + chunk).split(b"\n")
                for line in whole:
                    loop.call_soon_threadsafe(lines.put_nowait, line)
            if rest:
                loop.call_soon_threadsafe(lines.put_nowait, rest)
            loop.call_soon_threadsafe(lines.put_nowait, None)
        except RuntimeError:  # the loop is closed: the command is ending (Ctrl-C, an error)
            pass

    threading.Thread(target=read, name="stdin", daemon=True).start()
    acks: asyncio.Queue[asyncio.Future[Any] | None] = asyncio.Queue(maxsize=256)

    async def show() -> None:
        while (pending := await acks.get()) is not None:
            a = await pending
            click.echo(f"{a.topic} ts={a.ts} group={a.group}")
            sys.stdout.flush()

    shower = asyncio.ensure_future(show())
    try:
        while (line := await lines.get()) is not None:
            sent = client.publish(topic, line, key=key, durability=level)
            await acks.put(asyncio.ensure_future(sent))
        await acks.put(None)
        await shower
    finally:
        shower.cancel()


@main.command()
@click.argument("topic", callback=topic_callback)
@_url_option
@_zk_option
@ca_file_option
@token_option
@click.option("--subscription", default=None, help="Subscription name (makes it durable).")
@click.option(
    "--mode",
    type=click.Choice(["broadcast", "shared"]),
    default="broadcast",
    show_default=True,
    help="shared: consumers with the same name split the records.",
)
@click.option(
    "--from", "from_", default="latest", show_default=True, help="latest, earliest or a ts."
)
@click.option(
    "--count", type=click.IntRange(1), default=None, help="Exit after this many messages."
)
@click.option("--json", "as_json", is_flag=True, help="One JSON object per message.")
def sub(
    topic: str,
    url: str | None,
    zk_hosts: str | None,
    ca_file: str | None,
    token_file: str | None,
    subscription: str | None,
    mode: str,
    from_: str,
    count: int | None,
    as_json: bool,
) -> None:
    """Print messages of TOPIC as they arrive (acknowledging each); what it waits for goes
    to stderr."""
    import asyncio

    from tritonmq.client import Client

    if mode == "shared" and not subscription:
        _fail("--mode shared needs --subscription")
    start: str | int = from_
    if from_ not in ("latest", "earliest"):
        if not from_.isdigit():
            _fail("--from must be latest, earliest or a ts")
        start = int(from_)
    target, token = _client_url(url, zk_hosts), read_token(token_file)

    async def run() -> None:
        seen = 0
        client = Client(target, ca_file=ca_file, token=token)
        async with client as c, c.subscribe(topic, subscription, start, mode=mode) as s:
            durable = f" as {subscription} ({mode})" if subscription else ""
            click.echo(
                f"subscribed to {topic}{durable} from {from_}; waiting for records"
                " (Ctrl-C stops)...",
                err=True,
            )
            async for msg in s:
                click.echo(message_json(msg) if as_json else message_line(msg))
                sys.stdout.flush()  # each record as it comes, into a pipe too
                await msg.ack()
                seen += 1
                if count is not None and seen >= count:
                    return

    try:
        asyncio.run(run())
    except KeyboardInterrupt:
        sys.exit(130)  # the shell's convention for a command ended by SIGINT
    except TritonError as e:
        click.echo(f"error: {e.code}: {e}", err=True)
        sys.exit(1)


def _jsonable(v: Any) -> Any:
    """Bytes as text when they are valid UTF-8, else ``{"base64": "..."}``; in headers too."""
    import base64

    if isinstance(v, bytes | bytearray | memoryview):
        try:
            return bytes(v).decode("utf-8")
        except UnicodeDecodeError:
            return {"base64": base64.b64encode(bytes(v)).decode("ascii")}
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_jsonable(x) for x in v]
    return v


def message_json(msg: Any) -> str:
    """`sub --json`: one object a line, ``{"topic", "ts", "key", "value", "headers"}``; key
    null when the record has none, headers {} when none; bytes as :func:`_jsonable` says."""
    return json.dumps(
        {
            "topic": msg.topic,
            "ts": msg.ts,
            "key": _jsonable(msg.key),
            "value": _jsonable(msg.value),
            "headers": _jsonable(msg.headers or {}),
        },
        ensure_ascii=False,
    )


def message_line(msg: Any) -> str:
    """`sub`'s plain output: ``TS<TAB>VALUE``; a value's further lines each begin with a TAB,
    so a line that does not is the next record."""
    return f"{msg.ts}\t" + msg.value.decode("utf-8", "replace").replace("\n", "\n\t")


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


@main.command()
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


@main.command()
@click.option("--records", type=click.IntRange(100), default=20_000, show_default=True)
@click.option(
    "--rate", type=click.IntRange(100), default=4000, show_default=True, help="Records per second."
)
def demo(records: int, rate: int) -> None:
    """Failover demo: publish and subscribe while the primary is SIGKILLed and restarted."""
    from tritonmq.devtools.demo import run_demo

    try:
        sys.exit(run_demo(records, rate))
    except TritonError as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(1)


@main.command()
@zk_option
@click.option("--chroot", default="/tritonmq", show_default=True)
@click.option("--groups", required=True, help="Comma-separated group names, e.g. g1,g2.")
@click.option("--slots", type=click.IntRange(1, 4096), default=64, show_default=True)
@click.option(
    "--insecure", is_flag=True, help="No ZooKeeper credential: leave the chroot open to anyone."
)
def init(zk_hosts: str, chroot: str, groups: str, slots: int, insecure: bool) -> None:
    """Close the chroot to all but the cluster's ZooKeeper credential (from env
    TRITONMQ_ZK_AUTH_FILE or TRITONMQ_ZK_AUTH), then create the slot map (topics ->
    slots -> groups) unless the cluster has one."""
    from tritonmq.coord.slots import init_cluster
    from tritonmq.coord.zkclient import ENV_AUTH, ENV_AUTH_FILE, credential_from

    names = [g.strip() for g in groups.split(",") if g.strip()]
    if not names:
        _fail("--groups needs at least one group name")
    try:
        cred = credential_from()
    except TritonError as e:
        _fail(str(e))
    if cred is None and not insecure:
        _fail(f"no ZooKeeper credential: set {ENV_AUTH_FILE} or {ENV_AUTH} (or give --insecure)")
    try:
        smap = init_cluster(zk_hosts, chroot, names, slots, auth=cred)
    except TritonError as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(1)
    counts = {g: smap.owners.count(g) for g in smap.groups}
    click.echo(f"{smap.slots} slots: " + ", ".join(f"{g} {n}" for g, n in counts.items()))


@main.command()
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


@main.command()
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


add_commands(
    main
)  # token, and the hidden old name `subscription delete|reset` (tritonmq/cli_admin.py)
add_ops_commands(main)  # topics, subscriptions [TOPIC] | delete | reset, top (tritonmq/cli_ops.py)
