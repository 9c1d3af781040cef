"""A ZooKeeper ensemble of child processes on loopback: to test failover of coordination.

Kept apart from :mod:`tritonmq.devtools.zkserver`, which runs each member.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path
from typing import Self

from tritonmq.devtools.zkserver import ZooKeeperServer, free_ports
from tritonmq.errors import CoordinationError

_HOST = "127.0.0.1"


class ZooKeeperEnsemble:
    """``n`` servers on loopback forming one quorum, to test failover; members index from 0."""

    def __init__(self, n: int = 3, data_dir: str | Path | None = None, tick_ms: int = 200) -> None:
        self._tmp_dir: Path | None = None
        if data_dir is None:
            root = self._tmp_dir = Path(tempfile.mkdtemp(prefix="tritonmq-zks-"))
        else:
            root = Path(data_dir).resolve()
        ports = free_ports(3 * n)
        peers = [f"server.{i + 1}={_HOST}:{ports[3 * i + 1]}:{ports[3 * i + 2]}" for i in range(n)]
        self.members = [
            ZooKeeperServer(ports[3 * i], root / f"zk{i + 1}", tick_ms, myid=i + 1, peers=peers)
            for i in range(n)
        ]

    @property
    def hostport(self) -> str:
        """The connect string of all members, e.g. for KazooClient(hosts=...)."""
        return ",".join(m.hostport for m in self.members)

    def start(self, timeout: float = 30.0) -> str:
        """Spawn every member, wait until each is leader or follower; return the connect string."""
        deadline = time.monotonic() + timeout
        try:
            for m in self.members:
                m.spawn()
            for m in self.members:
                m.wait_ready(deadline, ("leader", "follower"))
        except BaseException:
            self.stop()
            raise
        return self.hostport

    def kill(self, i: int) -> None:
        """SIGKILL member ``i``."""
        self.members[i].kill()

    def restart(self, i: int, timeout: float = 30.0) -> None:
        """Start member ``i`` again (after kill) and wait until it rejoined the quorum."""
        self.members[i].kill()
        self.members[i].start(timeout)

    def leader_index(self) -> int | None:
        """Index of the member whose ``srvr`` says leader, None while there is none."""
        for i, m in enumerate(self.members):
            if m.mode() == "leader":
                return i
        return None

    def wait_leader(self, timeout: float = 30.0) -> int:
        deadline = time.monotonic() + timeout
        while (leader := self.leader_index()) is None:
            if time.monotonic() >= deadline:
                raise CoordinationError(f"no ZooKeeper leader within {timeout} s")
            time.sleep(0.05)
        return leader

    def stop(self) -> None:
        """Stop every member and remove a temporary root directory. Idempotent."""
        for m in self.members:
            m.stop()
        if self._tmp_dir is not None:
            shutil.rmtree(self._tmp_dir, ignore_errors=True)
            self._tmp_dir = None

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
