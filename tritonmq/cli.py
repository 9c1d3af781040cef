"""The `tritonmq` command: zk, broker, dev, status, pub, sub, demo, init (topics,
subscriptions and top are in cli_ops.py and cli_top.py; token in cli_admin.py; bench, chaos
and sim in cli_tools.py).

Bad input exits with status 2 and a one-line message (click's convention).
"""

from __future__ import annotations

import json
import signal
import sys
import time
from typing import Any

import click

from tritonmq import cli_slots, cli_tools
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
    """TritonMQ: a replicated publish/subscribe broker, served from memory (files behind it)."""
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


main.add_command(cli_tools.bench)  # tritonmq bench, chaos, sim (tritonmq/cli_tools.py)
main.add_command(cli_tools.chaos)
main.add_command(cli_tools.sim)
add_commands(
    main
)  # token, and the hidden old name `subscription delete|reset` (tritonmq/cli_admin.py)
add_ops_commands(main)  # topics, subscriptions [TOPIC] | delete | reset, top (tritonmq/cli_ops.py)
