"""The `tritonmq` command: zk, broker, dev, status, pub, sub, bench, demo.

Bad input exits with status 2 and a one-line message (click's convention).
"""

from __future__ import annotations

import json
import signal
import sys
import time
from typing import Any

import click

from tritonmq.errors import TritonError


def _fail(message: str) -> None:
    raise click.UsageError(message)


@click.group()
@click.version_option(package_name="tritonmq")
def main() -> None:
    """TritonMQ: a replicated, in-memory publish/subscribe broker."""


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
    from tritonmq.coord.zkserver import run_foreground

    sys.exit(run_foreground(port, data_dir))


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
    log_level: str | None,
) -> None:
    """Run one broker process."""
    from tritonmq.broker.main import run_broker
    from tritonmq.config import load_config

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
            log_level=log_level,
        )
    except TritonError as e:
        _fail(str(e))
    if ":" not in cfg.listen:
        _fail("--listen must be HOST:PORT")
    sys.exit(run_broker(cfg))


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
def dev(
    groups: int,
    replicas: int,
    zk_hosts: str | None,
    state_file: str | None,
    config_file: str | None,
) -> None:
    """Run a local cluster (ZooKeeper + brokers) until Ctrl-C or SIGTERM."""
    from tritonmq.cluster import DevCluster

    cluster = DevCluster(groups, replicas, zk=zk_hosts, config=config_file)
    stop = False

    def on_signal(_sig: int, _frame: Any) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        cluster.start()
        click.echo(f"zookeeper {cluster.zk_hosts}")
        for b in cluster.brokers.values():
            click.echo(f"broker {b.group}/{b.id} {b.url} pid {b.pid}")
        if state_file:
            cluster.write_state(state_file)
        click.echo("ready; Ctrl-C stops the cluster", err=True)
        while not stop:
            time.sleep(0.2)
    except TritonError as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(1)
    finally:
        cluster.stop()


@main.command()
@click.option("--zk", "zk_hosts", default="127.0.0.1:2181", show_default=True)
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
    if as_json:
        out = {
            "groups": {
                g: {
                    "epoch": v["epoch"],
                    "primary": v["primary"],
                    "isr": v["isr"],
                    "members": sorted(v["members"]),
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
        members = ", ".join(f"{m} {u}" for m, u in v["members"].items())
        table.add_row(g, str(v["epoch"]), str(v["primary"]), ", ".join(v["isr"]), members)
    Console().print(table)
