"""A local cluster of real processes: ZooKeeper plus broker groups.

Used by `tritonmq dev`, the demo, the benchmark and the integration tests, so
that all of them kill and restart the same real processes the same way.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

from tritonmq.coord.inspect import fetch_cluster
from tritonmq.coord.zkserver import ZooKeeperServer, free_port
from tritonmq.errors import CoordinationError


@dataclass
class BrokerProc:
    group: str
    id: str
    port: int
    log_path: Path
    proc: subprocess.Popen[bytes] | None = None
    url: str = ""
    extra: list[str] = field(default_factory=list)

    @property
    def pid(self) -> int:
        return self.proc.pid if self.proc else -1

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


def wait_for(pred: Callable[[], Any], timeout: float, what: str, interval: float = 0.05) -> Any:
    """Poll ``pred`` until it returns something truthy; raise TimeoutError naming ``what``."""
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


class DevCluster:
    def __init__(
        self,
        groups: int = 1,
        replicas: int = 3,
        *,
        zk: str | None = None,
        config: str | None = None,
        workdir: str | Path | None = None,
        broker_args: list[str] | None = None,
        chroot: str = "/tritonmq",
    ) -> None:
        self.n_groups = groups
        self.replicas = replicas
        self.zk_hosts = zk
        self.config = config
        self.chroot = chroot
        self.broker_args = broker_args or []
        self._tmp = None if workdir else tempfile.TemporaryDirectory(prefix="tritonmq-dev-")
        self.workdir = Path(workdir) if workdir else Path(self._tmp.name)  # type: ignore[union-attr]
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.zk_server: ZooKeeperServer | None = None
        self.brokers: dict[str, BrokerProc] = {}

    # --- lifecycle -----------------------------------------------------------------

    def start(self, timeout: float = 60.0) -> Self:
        if self.zk_hosts is None:
            self.zk_server = ZooKeeperServer(data_dir=self.workdir / "zk")
            self.zk_hosts = self.zk_server.start()
        for g in range(1, self.n_groups + 1):
            for r in range(1, self.replicas + 1):
                group, bid = f"g{g}", f"g{g}b{r}"
                self.brokers[bid] = BrokerProc(group, bid, free_port(), self.workdir / f"{bid}.log")
        for b in self.brokers.values():
            self._spawn(b)
        for b in self.brokers.values():
            self._await_url(b, timeout)
        self.wait_healthy(timeout)
        return self

    def stop(self) -> None:
        for b in self.brokers.values():
            if b.alive and b.proc is not None:
                b.proc.send_signal(signal.SIGCONT)
                b.proc.terminate()
        for b in self.brokers.values():
            if b.proc is not None:
                try:
                    b.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    b.proc.kill()
                    b.proc.wait()
        if self.zk_server is not None:
            self.zk_server.stop()
        if self._tmp is not None:
            self._tmp.cleanup()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- brokers -------------------------------------------------------------------

    def _spawn(self, b: BrokerProc) -> None:
        cmd = [
            sys.executable, "-m", "tritonmq", "broker",
            "--zk", str(self.zk_hosts), "--group", b.group, "--id", b.id,
            "--listen", f"127.0.0.1:{b.port}", "--chroot", self.chroot,
        ]  # fmt: skip
        if self.config:
            cmd += ["--config", self.config]
        cmd += self.broker_args + b.extra
        logf = open(b.log_path, "ab")  # noqa: SIM115 - handed to the child
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        b.proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=logf, env=env, start_new_session=True
        )
        logf.close()

    def _await_url(self, b: BrokerProc, timeout: float) -> None:
        assert b.proc is not None and b.proc.stdout is not None
        line = b.proc.stdout.readline().decode().split()
        if len(line) != 3 or line[0] != "broker":
            raise CoordinationError(
                f"broker {b.id} did not start; see {b.log_path}:\n{self.log_tail(b.id)}"
            )
        b.url = line[2]

    def log_tail(self, bid: str, n: int = 20) -> str:
        try:
            return "\n".join(
                self.brokers[bid].log_path.read_text(errors="replace").splitlines()[-n:]
            )
        except OSError:
            return ""

    def kill(self, bid: str, sig: int = signal.SIGKILL) -> None:
        b = self.brokers[bid]
        assert b.proc is not None
        b.proc.send_signal(sig)
        if sig in (signal.SIGKILL, signal.SIGTERM):
            b.proc.wait(timeout=30)

    def restart(self, bid: str, timeout: float = 30.0) -> BrokerProc:
        b = self.brokers[bid]
        if b.alive:
            self.kill(bid)
        self._spawn(b)
        self._await_url(b, timeout)
        return b

    # --- views ---------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        return fetch_cluster(str(self.zk_hosts), self.chroot)

    def primary(self, group: str = "g1") -> str | None:
        g = self.status()["groups"].get(group)
        return g["primary"] if g else None

    def healthy(self) -> bool:
        st = self.status()["groups"]
        for g in range(1, self.n_groups + 1):
            info = st.get(f"g{g}")
            if (
                not info
                or len(info["isr"]) < self.replicas
                or info["primary"] not in info["members"]
            ):
                return False
        return True

    def wait_healthy(self, timeout: float = 60.0) -> None:
        wait_for(self.healthy, timeout, "every group to have a primary and a full ISR", 0.1)

    def state(self) -> dict[str, Any]:
        return {
            "zk": self.zk_hosts,
            "brokers": [
                {"group": b.group, "id": b.id, "url": b.url, "pid": b.pid}
                for b in self.brokers.values()
            ],
        }

    def write_state(self, path: str | Path) -> None:
        tmp = Path(f"{path}.tmp")
        tmp.write_text(json.dumps(self.state(), indent=2))
        tmp.replace(path)

    @property
    def urls(self) -> list[str]:
        return [b.url for b in self.brokers.values()]
