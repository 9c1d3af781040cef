"""`tritonmq bench --against nats,redis`: TritonMQ and its peers through the same load.

Every system is one module here with the same interface (:class:`System`, :class:`Conn`):
it starts its servers as child processes on loopback ports, and its connections supply
only the primitives the load needs (a confirmed publish, a confirmed batch, a subscriber
that counts what it receives). The load shapes themselves live once, in ``shapes.py``.

* ``tritonmq``: a dev cluster, 1 group x 3 replicas, in memory (``tritonmq.py``);
* ``nats``: three ``nats-server`` processes in one cluster with JetStream, a memory stream
  with 3 replicas per topic (``nats.py``);
* ``redis``: a ``redis-server`` primary and two ``replicaof`` replicas, XADD + WAIT 2
  (``redis.py``).

The peers' servers come from Debian (``apt-get install nats-server redis-server``) and their
clients from the ``bench`` extra (nats-py, redis[hiredis]): ``scripts/bootstrap --bench``.
"""

from __future__ import annotations

import asyncio
import shutil
import socket
import subprocess
import time
from collections.abc import Awaitable, Callable, Sequence
from importlib.util import find_spec
from pathlib import Path
from typing import IO, Any, Protocol

PEERS = ("nats", "redis")  # what --against takes, in the order the table shows them
INSTALL_HINT = "scripts/bootstrap --bench"


class Conn(Protocol):
    """One client connection, as an application would hold it."""

    async def create(self, topic: str) -> None:
        """Make ``topic`` ready to take records (a stream where the system needs one)."""

    async def drop(self, topic: str) -> None:
        """Forget ``topic`` and its records."""

    async def publish(self, topic: str, value: bytes) -> None:
        """One record; returns once the system confirms it replicated."""

    async def publish_batch(self, topic: str, values: list[bytes]) -> None:
        """Records in one call; returns once every one is confirmed replicated."""

    async def subscribe(
        self,
        topic: str,
        on_records: Callable[[int], None],
        on_error: Callable[[BaseException], None],
    ) -> Callable[[], Awaitable[None]]:
        """Receive every record published to ``topic`` from now on, calling ``on_records``
        with how many arrived (``on_error`` if receiving fails); returns once subscribed,
        with a function that stops it."""

    async def close(self) -> None: ...


class System(Protocol):
    """A system under test: its servers, and connections to them."""

    key: str  # as --against names it ("tritonmq" for TritonMQ itself)
    title: str  # its column in the table

    def missing(self) -> list[str]:
        """What must be installed before it can run (nothing: [])."""

    def start(self) -> None:
        """Start its servers (child processes on loopback ports) and wait until they serve."""

    def stop(self) -> None:
        """Stop them by pid, remove their files. Idempotent."""

    async def connect(self) -> Conn: ...

    def describe(self) -> str:
        """One line: versions and how it is configured."""


def parse_against(text: str) -> list[str]:
    """``--against``: "nats,redis" -> ["nats", "redis"] (table order); a ValueError saying
    what is allowed for anything else."""
    items = [t.strip().lower() for t in text.split(",")]
    if not all(items) or any(t not in PEERS for t in items):
        raise ValueError(f"peers separated by commas, each one of {', '.join(PEERS)}: not {text!r}")
    if len(set(items)) != len(items):
        raise ValueError(f"each peer once, not {text!r}")
    return [p for p in PEERS if p in items]


def load(key: str) -> System:
    """The system named ``key``: tritonmq, nats or redis."""
    if key == "tritonmq":
        from tritonmq.devtools.peers.tritonmq import TritonMQ

        return TritonMQ()
    if key == "nats":
        from tritonmq.devtools.peers.nats import NatsJetStream

        return NatsJetStream()
    if key == "redis":
        from tritonmq.devtools.peers.redis import RedisReplicated

        return RedisReplicated()
    raise ValueError(f"no system {key!r}")


def missing_parts(binary: str, modules: Sequence[str], pip: str) -> list[str]:
    """What of ``binary`` (a Debian package of that name) and ``modules`` (from the bench
    extra, as ``pip`` names them) is not installed."""
    lack = []
    if shutil.which(binary) is None:
        lack.append(f"{binary} (apt-get install {binary})")
    if not all(find_spec(m) is not None for m in modules):
        lack.append(f"{pip} (pip install -e '.[bench]')")
    return lack


def version_of(cmd: list[str]) -> str:
    """The first line a ``--version`` command prints, or "?"."""
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "?"
    return out.strip().splitlines()[0] if out.strip() else "?"


class Children:
    """Server processes this process started: each with its log file, stopped by pid."""

    def __init__(self) -> None:
        self.procs: list[tuple[str, subprocess.Popen[bytes]]] = []
        self._logs: list[IO[bytes]] = []

    def spawn(self, argv: list[str], log: Path) -> subprocess.Popen[bytes]:
        from tritonmq.devtools.zkserver import _die_with_parent

        f = open(log, "wb")  # closed in stop()
        self._logs.append(f)
        p = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=f,
            stderr=subprocess.STDOUT,
            preexec_fn=_die_with_parent,  # never outlives a killed bench
        )
        self.procs.append((argv[0], p))
        return p

    def check(self) -> None:
        """Raise if one of them exited."""
        for name, p in self.procs:
            if p.poll() is not None:
                raise RuntimeError(f"{name} (pid {p.pid}) exited with {p.returncode}")

    def stop(self, grace: float = 10.0) -> None:
        for _name, p in self.procs:
            if p.poll() is None:
                p.terminate()
        for _name, p in self.procs:
            try:
                p.wait(grace)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.procs.clear()
        for f in self._logs:
            f.close()
        self._logs.clear()


def pkg_version(name: str) -> str:
    """An installed distribution's version, or "?"."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return "?"


def await_port(port: int, timeout: float, check: Callable[[], None]) -> None:
    """Until something accepts on 127.0.0.1:``port``; ``check`` raises if the server died."""
    deadline = time.monotonic() + timeout
    while True:
        check()
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"nothing listens on 127.0.0.1:{port} after {timeout:.0f}s"
                ) from None
            time.sleep(0.05)


def run_async(coro: Awaitable[Any]) -> Any:
    """Run ``coro`` on a fresh uvloop event loop (the load's loop, as the brokers')."""
    from tritonmq.broker.main import new_event_loop

    async def main() -> Any:
        return await coro

    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        return runner.run(main())
