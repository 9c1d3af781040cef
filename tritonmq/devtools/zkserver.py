"""Run Debian's ZooKeeper as a child process: for tests, the demo and ``tritonmq zk``.

No service manager is assumed, so the broker's tooling starts ZooKeeper itself, on
loopback ports, with a short tick so that sessions of 1-2 s are allowed and failures
are noticed quickly.
"""

from __future__ import annotations

import ctypes
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Self

from tritonmq.errors import CoordinationError

# Where Debian's `zookeeper`, `libslf4j-java` and `liblog4j1.2-java` put their jars.
JAVA_DIR = Path("/usr/share/java")
# zookeeper.jar's manifest pulls in its own dependencies; the other two make it log.
_JARS = ("zookeeper.jar", "slf4j-log4j12.jar", "log4j-1.2.jar")
_MAIN = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
_HOST = "127.0.0.1"
_LOG4J = """\
log4j.rootLogger=INFO, CONSOLE
log4j.appender.CONSOLE=org.apache.log4j.ConsoleAppender
log4j.appender.CONSOLE.layout=org.apache.log4j.PatternLayout
log4j.appender.CONSOLE.layout.ConversionPattern=%d{ISO8601} %-5p [%t] %c{1}: %m%n
"""
_PR_SET_PDEATHSIG = 1
_LIBC = ctypes.CDLL(None) if sys.platform == "linux" else None  # loaded before any fork


def free_port() -> int:
    """A loopback TCP port that was free a moment ago (the kernel picks it)."""
    return free_ports(1)[0]


def free_ports(n: int) -> list[int]:
    """``n`` distinct free ports: all sockets stay bound until all are picked."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((_HOST, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def java_command() -> list[str]:
    """``java ... -cp <jars>``, or a CoordinationError that says how to get them."""
    java = shutil.which("java")
    jars = [JAVA_DIR / name for name in _JARS]
    missing = [str(j) for j in jars if not j.is_file()]
    if java is None or missing:
        what = ", ".join((["java on PATH"] if java is None else []) + missing)
        raise CoordinationError(
            f"ZooKeeper is not installed (missing {what}): run scripts/bootstrap"
        )
    return [java, "-Xmx256m", "-cp", ":".join(str(j) for j in jars)]


def four_letter_word(port: int, word: str = "srvr", timeout: float = 1.0) -> str:
    """Send a four-letter command to a local ZooKeeper and return its whole reply."""
    with socket.create_connection((_HOST, port), timeout=timeout) as sock:
        sock.sendall(word.encode("ascii"))
        chunks = []
        while chunk := sock.recv(4096):
            chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", "replace")


def server_mode(port: int, timeout: float = 1.0) -> str | None:
    """The ``Mode:`` of a server (standalone, leader, follower), None if it does not serve."""
    try:
        reply = four_letter_word(port, "srvr", timeout)
    except OSError:
        return None
    for line in reply.splitlines():
        if line.startswith("Mode:"):
            return line.partition(":")[2].strip()
    return None


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    # A JVM must not outlive a test run that was killed: it would hold its ports.
    if _LIBC is not None:
        _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


class ZooKeeperServer:
    """One ZooKeeper server process: standalone, or a member of a ZooKeeperEnsemble."""

    def __init__(
        self,
        port: int | None = None,
        data_dir: str | Path | None = None,
        tick_ms: int = 200,
        *,
        myid: int | None = None,
        peers: Sequence[str] = (),
    ) -> None:
        """``myid`` and ``peers`` (``server.N=...`` lines) are set by ZooKeeperEnsemble."""
        self.port = port if port is not None else free_port()
        self.tick_ms = tick_ms
        self._given_dir = Path(data_dir).resolve() if data_dir is not None else None
        self._tmp_dir: Path | None = None
        self._myid = myid
        self._peers = list(peers)
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def hostport(self) -> str:
        return f"{_HOST}:{self.port}"

    @property
    def pid(self) -> int | None:
        """The child's pid while it runs, else None."""
        return self._proc.pid if self.running and self._proc is not None else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def data_dir(self) -> Path:
        if self._given_dir is not None:
            return self._given_dir
        if self._tmp_dir is None:
            self._tmp_dir = Path(tempfile.mkdtemp(prefix="tritonmq-zk-"))
        return self._tmp_dir

    @property
    def log_path(self) -> Path:
        return self.data_dir / "zookeeper.log"

    def mode(self) -> str | None:
        return server_mode(self.port) if self.running else None

    def start(self, timeout: float = 30.0) -> str:
        """Spawn the server and wait until it answers ``srvr`` with a Mode; return host:port."""
        self.spawn()
        modes = ("leader", "follower") if self._peers else None
        self.wait_ready(time.monotonic() + timeout, modes)
        return self.hostport

    def spawn(self) -> None:
        """Write the configuration and start the JVM without waiting for it."""
        if self.running:
            return
        cmd = java_command()
        data = self.data_dir
        data.mkdir(parents=True, exist_ok=True)
        cfg = data / "zoo.cfg"
        cfg.write_text(self._config(data))
        log4j = data / "log4j.properties"
        log4j.write_text(_LOG4J)
        if self._myid is not None:
            (data / "myid").write_text(f"{self._myid}\n")
        cmd += [f"-Dlog4j.configuration=file:{log4j}", _MAIN, str(cfg)]
        # PDEATHSIG fires when the *thread* that forked exits: only safe from the main thread.
        in_main = threading.current_thread() is threading.main_thread()
        with open(self.log_path, "ab") as log:  # the child keeps its own descriptor
            self._proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=data,
                start_new_session=True,  # a Ctrl-C at a terminal is ours to handle, not the JVM's
                preexec_fn=_die_with_parent if in_main else None,
            )

    def wait_ready(self, deadline: float, modes: Sequence[str] | None = None) -> None:
        """Poll ``srvr`` until its Mode is one of ``modes`` (any Mode if None)."""
        while True:
            if not self.running:
                code = self._proc.returncode if self._proc is not None else None
                raise CoordinationError(f"ZooKeeper exited with status {code}:\n{self.log_tail()}")
            mode = server_mode(self.port, timeout=0.5)
            if mode is not None and (modes is None or mode in modes):
                return
            if time.monotonic() >= deadline:
                raise CoordinationError(
                    f"ZooKeeper on {self.hostport} not serving in time (mode {mode}):\n"
                    f"{self.log_tail()}"
                )
            time.sleep(0.05)

    def log_tail(self, lines: int = 30) -> str:
        if self._given_dir is None and self._tmp_dir is None:
            return "(no log)"
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def kill(self) -> None:
        """SIGKILL the child (a crash); the data directory is kept for a restart."""
        self._end(grace=0.0)

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM, then SIGKILL after ``timeout``; removes a temporary data dir. Idempotent."""
        self._end(grace=timeout)
        if self._tmp_dir is not None:
            shutil.rmtree(self._tmp_dir, ignore_errors=True)
            self._tmp_dir = None

    def _end(self, grace: float) -> None:
        proc = self._proc
        if proc is None or proc.poll() is not None:
            return
        if grace > 0:
            proc.terminate()
            try:
                proc.wait(grace)
                return
            except subprocess.TimeoutExpired:
                pass
        proc.kill()
        proc.wait()

    def _config(self, data: Path) -> str:
        t = self.tick_ms
        lines = [
            f"tickTime={t}",
            f"dataDir={data}",
            f"clientPort={self.port}",
            f"clientPortAddress={_HOST}",
            "admin.enableServer=false",
            "4lw.commands.whitelist=srvr,ruok,mntr",
            f"minSessionTimeout={2 * t}",
            f"maxSessionTimeout={20 * t}",
        ]
        if self._peers:
            lines += ["initLimit=10", "syncLimit=5", *self._peers]
        return "\n".join(lines) + "\n"

    def __enter__(self) -> Self:
        if not self.running:
            self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def run_foreground(port: int | None, data_dir: str | None) -> int:
    """``tritonmq zk``: print host:port, serve until SIGINT/SIGTERM, then stop the child."""
    stop = threading.Event()
    previous = {s: signal.signal(s, lambda *_: stop.set()) for s in (signal.SIGINT, signal.SIGTERM)}
    server = ZooKeeperServer(port=port, data_dir=data_dir)
    try:
        try:
            print(server.start(), flush=True)
        except CoordinationError as exc:
            print(f"tritonmq zk: {exc}", file=sys.stderr)
            return 1
        while not stop.wait(0.5):
            if not server.running:
                print(f"tritonmq zk: ZooKeeper exited:\n{server.log_tail()}", file=sys.stderr)
                return 1
        return 0
    finally:
        server.stop()
        for s, handler in previous.items():
            signal.signal(s, handler)
