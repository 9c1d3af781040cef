"""Real clusters for integration tests: real ZooKeeper, real broker processes, real signals."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tritonmq.devtools.cluster import DevCluster, wait_for
from tritonmq.devtools.zkensemble import ZooKeeperEnsemble
from tritonmq.devtools.zkserver import ZooKeeperServer


@pytest.fixture
def make_cluster(zk_server: ZooKeeperServer, tmp_path: Any) -> Iterator[Callable[..., DevCluster]]:
    """Start clusters on the session's ZooKeeper (or ``zk``), each under its own chroot;
    ``isolated=True`` puts partition proxies in the way, ``tls=True`` serves wss:// with a
    local CA (``cluster.ca_file``). Stopped at teardown."""
    started: list[DevCluster] = []

    def make(
        groups: int = 1,
        replicas: int = 3,
        broker_args: list[str] | None = None,
        *,
        isolated: bool = False,
        zk: str | None = None,
        settings: dict[str, Any] | None = None,
        tls: bool = False,
        data: bool = False,
    ) -> DevCluster:
        workdir = tmp_path / f"cluster{len(started)}"
        config = None
        if settings:
            workdir.mkdir(parents=True, exist_ok=True)
            config = workdir / "broker.toml"
            config.write_text(
                "[broker]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in settings.items())
            )
        c = DevCluster(
            groups,
            replicas,
            zk=zk or zk_server.hostport,
            chroot=f"/t-{uuid.uuid4().hex[:8]}",
            workdir=workdir,
            config=str(config) if config else None,
            broker_args=broker_args,
            isolated=isolated,
            tls=tls,
            data=data,
        )
        started.append(c)
        return c.start(timeout=60)

    yield make
    for c in started:
        c.stop()


@pytest.fixture
def cluster(make_cluster: Callable[..., DevCluster]) -> DevCluster:
    """A healthy 1 group x 3 replicas cluster that keeps records 5 minutes (retention), so
    tests can publish first and replay from ``earliest`` without a subscription holding them."""
    return make_cluster(settings={"retention_s": 300.0})


@pytest.fixture
def zk_ensemble(tmp_path: Any) -> Iterator[ZooKeeperEnsemble]:
    """A fresh 3-server ZooKeeper ensemble (request it before make_cluster: it outlives it)."""
    with ZooKeeperEnsemble(3, data_dir=tmp_path / "zks") as ensemble:
        yield ensemble


def group_info(c: DevCluster, group: str = "g1") -> dict[str, Any]:
    return c.status()["groups"][group]


def wait_new_primary(c: DevCluster, old: str, timeout: float = 30.0, group: str = "g1") -> str:
    def changed() -> str | None:
        g = group_info(c, group)
        p = g["primary"]
        return p if p != old and p in g["members"] else None

    return str(wait_for(changed, timeout, f"a primary other than {old}"))


def wait_in_isr(c: DevCluster, bid: str, timeout: float = 30.0, group: str = "g1") -> None:
    wait_for(lambda: bid in group_info(c, group)["isr"], timeout, f"{bid} to be back in the ISR")


def process_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def zk_url(c: DevCluster) -> str:
    return f"zk://{c.zk_hosts}{c.chroot}"


# `tritonmq ARGS...` started so that a hang can be shown (a Ctrl-C test that fails shows
# where): SIGUSR1 dumps every thread's stack, SIGUSR2 every asyncio task's.
_SHOWABLE = """
import asyncio, faulthandler, signal, sys
faulthandler.register(signal.SIGUSR1, all_threads=True)
def tasks(*_):
    try:
        running = asyncio.all_tasks()
    except RuntimeError:
        print("no event loop is running", file=sys.stderr)
        return
    for t in running:
        print(f"--- {t!r}", file=sys.stderr)
        t.print_stack(file=sys.stderr)
    sys.stderr.flush()
signal.signal(signal.SIGUSR2, tasks)
from tritonmq.cli import main
sys.argv[0] = "tritonmq"
main()
"""
SHOWABLE_TRITONMQ = [sys.executable, "-c", _SHOWABLE]


def show_and_kill(proc: subprocess.Popen[str]) -> str:
    """What a hung ``SHOWABLE_TRITONMQ`` process was doing: its tasks and threads, then
    it is killed; returns its stderr."""
    for sig in (signal.SIGUSR2, signal.SIGUSR1):
        proc.send_signal(sig)
        time.sleep(1)  # for the dump to be written
    proc.kill()
    _, err = proc.communicate()
    return str(err)
