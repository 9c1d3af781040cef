"""A local cluster of real processes: ZooKeeper plus broker groups.

Used by `tritonmq dev`, the demo, the benchmark, `tritonmq chaos` and the
integration tests, so that all of them kill and restart the same real processes
the same way.

Brokers listen on port 0 and print the address they got: no port is picked ahead
of the bind, so no other process can take it in between. A restart asks for the
broker's old port again (its URL stays the same) and takes a fresh one if that
port was taken while it was down.

An *isolated* cluster can also be partitioned. Each broker then listens on a
loopback address of its own (127.0.0.11, 127.0.0.12, ...: all of 127.0.0.0/8
is loopback on Linux) and dials replication links from it; other brokers
replicate from it through a :class:`~tritonmq.devtools.netproxy.Proxy` (advertised as
its ``advertise_repl`` URL), and it reaches ZooKeeper through proxies of its
own. Cutting a proxy for one source address is a network partition between
two brokers, or between a broker and ZooKeeper, while clients keep using the
brokers' real URLs.

Local use stays one command although the cluster is locked (issue 8): the cluster
generates a ZooKeeper credential, a read-only one for zk:// clients and a cluster
secret into its work directory (files of mode 0600), hands them to its brokers
through the environment (``TRITONMQ_ZK_AUTH_FILE``, ``TRITONMQ_ZK_READER_FILE``,
``TRITONMQ_CLUSTER_SECRET_FILE``), and when this process
has no ZooKeeper credential of its own it points ``TRITONMQ_ZK_AUTH_FILE`` at the
generated one, so that zk:// clients and the CLI it runs reach the cluster. When
``TRITONMQ_ZK_AUTH_FILE`` is already set, the cluster uses that credential instead
(a test session shares one across its clusters).

A *tls* cluster makes a local CA and a broker certificate in its work directory
(:mod:`tritonmq.devtools.certs`), for every address its brokers and proxies use;
its brokers serve ``wss://`` and verify each other with that CA, and clients need
:attr:`DevCluster.ca_file` (``Client(url, ca_file=...)``, ``--ca-file``).

A cluster can *join* a running one (:meth:`DevCluster.joining`, `tritonmq dev --join`):
it adds groups after the running cluster's last, on its ZooKeeper and chroot with its
credentials and cluster secret, and starts and stops only its own brokers. The new
groups own no slot until the operator moves some to them (`tritonmq rebalance`).
"""

from __future__ import annotations

import json
import os
import secrets
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

from kazoo.exceptions import NoNodeError

from tritonmq.broker.credentials import ENV_SECRET, ENV_SECRET_FILE
from tritonmq.coord import paths
from tritonmq.coord.inspect import fetch_cluster
from tritonmq.coord.slots import init_cluster
from tritonmq.coord.zkclient import (
    ENV_AUTH,
    ENV_AUTH_FILE,
    ENV_READER_FILE,
    ZkCredential,
    new_client,
    read_credential,
)
from tritonmq.devtools.certs import DEFAULT_HOSTS, DevCerts, make_dev_certs
from tritonmq.devtools.netproxy import Proxy
from tritonmq.devtools.zkserver import ZooKeeperServer
from tritonmq.errors import ConfigError, CoordinationError

# Isolated brokers get 127.0.0.11, 127.0.0.12, ...: clear of 127.0.0.1 and not past .254.
_FIRST_HOST = 11
_MAX_ISOLATED = 254 - _FIRST_HOST + 1
# How a broker that could not bind its listen port says so (errno 98, EADDRINUSE).
_ADDR_IN_USE = "address already in use"


@dataclass
class BrokerProc:
    group: str
    id: str
    port: int  # 0 until the broker has bound one and said which
    log_path: Path
    proc: subprocess.Popen[bytes] | None = None
    url: str = ""
    extra: list[str] = field(default_factory=list)
    host: str = "127.0.0.1"  # the address it listens on and, isolated, dials from
    zk: str = ""  # its ZooKeeper connect string when not the cluster's (isolated: proxies)
    repl_url: str = ""  # what it advertises for replication (isolated: its proxy)

    @property
    def pid(self) -> int:
        return self.proc.pid if self.proc else -1

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


DEV_RETENTION_S = 3600.0
"""What `tritonmq dev`'s brokers keep records for unless its ``--config`` sets
``retention_s``: an hour, so that a record published before anyone subscribed is still
there for ``sub --from earliest`` (the brokers' own default, 0, purges it at once)."""


def dev_retention_args(config: str | None) -> list[str]:
    """The broker flags that give `tritonmq dev`'s brokers :data:`DEV_RETENTION_S`, unless
    ``config`` sets ``retention_s`` itself (a file that cannot be read: its brokers say so)."""
    if config is not None:
        try:
            data = tomllib.loads(Path(config).read_text())
        except (OSError, tomllib.TOMLDecodeError):
            return []
        if "retention_s" in data.get("broker", data):
            return []
    return ["--retention-s", str(DEV_RETENTION_S)]


def taken_ports(ports: list[int], host: str = "127.0.0.1") -> list[int]:
    """Those of ``ports`` something listens on now (as a server binds: SO_REUSEADDR, so a
    port in TIME_WAIT is free)."""
    taken = []
    for port in ports:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind((host, port))
            except OSError:
                taken.append(port)
    return taken


def _write_private(path: Path, text: str) -> None:
    """Write ``text`` to a new file only this user may read (mode 0600 from the start)."""
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text + "\n")


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
        isolated: bool = False,
        tls: bool = False,
        first_group: int = 1,
        credentials: tuple[Path, Path, Path] | None = None,
        port: int = 0,
        data: bool = False,
    ) -> None:
        """``data``: each broker keeps its log in segment files too, under
        ``<workdir>/<broker id>.data`` (kept across its restarts); ``zk``: a connect string (one server or an ensemble) instead of starting a
        ZooKeeper; ``isolated``: put proxies in the way so the network can be partitioned
        (see the module docstring and :meth:`cut_replication`, :meth:`cut_zk`);
        ``tls``: brokers serve ``wss://`` with certificates of a local CA (:attr:`ca_file`);
        ``first_group`` and ``credentials`` (auth, reader, secret files): see :meth:`joining`;
        ``port``: the ZooKeeper it starts listens on ``port`` and its brokers on the ports
        after it, in order (:meth:`ports`; 0: any free ones)."""
        self.first_group = first_group
        self.port = port
        self.data = data
        self.joined = credentials is not None  # the ZooKeeper and the slot map are another's
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
        self.isolated = isolated
        self.repl_proxies: dict[str, Proxy] = {}  # broker id -> proxy in front of it
        self.zk_proxies: dict[str, list[Proxy]] = {}  # broker id -> its way to each ZK server
        self.spawned: list[int] = []  # every process it started, so a harness can check they end
        self.tls = tls
        self.certs: DevCerts | None = None
        self._env_set: str | None = None  # the credential file this cluster put in the env
        if credentials is not None:
            self.zk_auth_file, self.zk_reader_file, self.secret_file = credentials
        else:
            self.zk_auth_file, self.secret_file = self._credentials()
            self.zk_reader_file = self.workdir / "zk.reader"  # for zk:// clients: read-only
            _write_private(self.zk_reader_file, f"reader:{secrets.token_urlsafe(24)}")
        self.zk_auth: ZkCredential = read_credential(self.zk_auth_file)
        self.zk_reader: ZkCredential = read_credential(self.zk_reader_file)

    @classmethod
    def joining(
        cls, state: Mapping[str, Any], groups: int, replicas: int = 3, config: str | None = None
    ) -> DevCluster:
        """A cluster that adds groups to the running dev cluster ``state`` describes (what
        ``tritonmq dev --state`` wrote), up to ``groups`` in all: g<n+1>..g<groups> after
        its last group g<n>, with the running cluster's broker settings unless ``config``
        names others. Raises :class:`ConfigError` for a state it cannot use."""
        try:
            zk, chroot = str(state["zk"]), str(state["chroot"])
            files = (state["zk_auth_file"], state["zk_reader_file"], state["secret_file"])
            have = max(int(str(b["group"]).removeprefix("g")) for b in state["brokers"])
        except (KeyError, TypeError, ValueError) as e:
            raise ConfigError(
                f"not the state of a running dev cluster: {e!r} missing or bad"
            ) from e
        if state.get("ca_file"):
            raise ConfigError("joining a --tls dev cluster is not supported")
        if not all(Path(f).is_file() for f in files):
            raise ConfigError("the cluster's credential files are gone: is it still running?")
        have = max(have, *_groups_in(zk, chroot, read_credential(Path(files[0]))))
        if groups <= have:
            raise ConfigError(f"the cluster has {have} group(s) already: nothing to add")
        creds = (Path(files[0]), Path(files[1]), Path(files[2]))
        return cls(
            groups - have,
            replicas,
            zk=zk,
            chroot=chroot,
            config=config or state.get("config"),
            first_group=have + 1,
            credentials=creds,
        )

    def _credentials(self) -> tuple[Path, Path]:
        """The ZooKeeper credential file (the environment's, else a new one) and a new
        cluster secret, both readable by this user only."""
        secret = self.workdir / "cluster.secret"
        _write_private(secret, secrets.token_urlsafe(32))
        if os.environ.get(ENV_AUTH_FILE):
            return Path(os.environ[ENV_AUTH_FILE]), secret
        auth = self.workdir / "zk.auth"
        _write_private(auth, f"tritonmq:{secrets.token_urlsafe(24)}")
        if not os.environ.get(ENV_AUTH):
            os.environ[ENV_AUTH_FILE] = str(auth)  # this process's clients and CLI: see above
            self._env_set = str(auth)  # taken back by stop(), which removes the file
        return auth, secret

    def ports(self) -> list[int]:
        """The fixed ports it listens on (ZooKeeper's first, if it starts one), [] if any."""
        if not self.port:
            return []
        n = self.n_groups * self.replicas
        zk = [self.port] if self.zk_hosts is None else []
        return [*zk, *range(self.port + 1, self.port + 1 + n)]

    # --- lifecycle -----------------------------------------------------------------

    def start(self, timeout: float = 60.0) -> Self:
        if self.zk_hosts is None:
            zk_port = self.port or None
            self.zk_server = ZooKeeperServer(port=zk_port, data_dir=self.workdir / "zk")
            self.zk_hosts = self.zk_server.start()
            if self.zk_server.pid is not None:
                self.spawned.append(self.zk_server.pid)
        for group in self.groups:
            for r in range(1, self.replicas + 1):
                bid = f"{group}b{r}"
                self.brokers[bid] = self._new_broker(group, bid)
                if self.port and not self.isolated:
                    self.brokers[bid].port = self.port + len(self.brokers)
        if self.tls:
            hosts = [*DEFAULT_HOSTS, *(b.host for b in self.brokers.values())]
            self.certs = make_dev_certs(self.workdir / "tls", hosts)
        if not self.joined:  # a joined cluster's map is the running one's
            init_cluster(
                str(self.zk_hosts),
                self.chroot,
                self.groups,
                64,
                auth=self.zk_auth,
                reader=self.zk_reader,
            )
        for b in self.brokers.values():
            self._spawn(b)
        for b in self.brokers.values():
            self._await_url(b, timeout)  # port 0 (or one `tritonmq dev` checked): no retry
        self.wait_healthy(timeout)
        return self

    def stop(self) -> None:
        self.heal()  # so that a SIGTERMed broker can close its ZooKeeper session
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
        for p in self._proxies():
            p.stop()
        if self.zk_server is not None:
            self.zk_server.stop()
        if self._tmp is not None:
            self._tmp.cleanup()
        if self._env_set is not None and os.environ.get(ENV_AUTH_FILE) == self._env_set:
            del os.environ[ENV_AUTH_FILE]  # its file is gone: the next cluster makes its own
        self._env_set = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- brokers -------------------------------------------------------------------

    def _new_broker(self, group: str, bid: str) -> BrokerProc:
        """A broker to spawn on port 0: the kernel picks its port as it binds, so no other
        process can take the port between a pick and the bind (bug 9)."""
        log_path = self.workdir / f"{bid}.log"
        if not self.isolated:
            return BrokerProc(group, bid, 0, log_path)
        n = len(self.brokers)
        if n >= _MAX_ISOLATED:
            raise CoordinationError(f"an isolated cluster has at most {_MAX_ISOLATED} brokers")
        host = f"127.0.0.{_FIRST_HOST + n}"
        b = BrokerProc(group, bid, 0, log_path, host=host)
        repl = self.repl_proxies[bid] = Proxy(host, 0)  # aimed at the port once it is bound
        repl.start()
        b.repl_url = f"{'wss' if self.tls else 'ws'}://{repl.address}"
        servers, slash, chroot = str(self.zk_hosts).partition("/")
        zks = self.zk_proxies[bid] = []
        for server in servers.split(","):
            zk_host, _, zk_port = server.rpartition(":")
            p = Proxy(zk_host, int(zk_port))
            zks.append(p)
            p.start()
        b.zk = ",".join(p.address for p in zks) + slash + chroot
        return b

    def _spawn(self, b: BrokerProc) -> None:
        cmd = [
            sys.executable, "-m", "tritonmq", "broker",
            "--zk", b.zk or str(self.zk_hosts), "--group", b.group, "--id", b.id,
            "--listen", f"{b.host}:{b.port}", "--chroot", self.chroot,
            "--replicas", str(self.replicas),
        ]  # fmt: skip
        if b.repl_url:
            cmd += ["--advertise-repl", b.repl_url]
        if self.config:
            cmd += ["--config", self.config]
        if self.data:
            cmd += ["--data-dir", str(self.data_dir(b.id))]
        if self.certs is not None:
            c = self.certs
            cmd += ["--tls-cert", str(c.cert), "--tls-key", str(c.key), "--tls-ca", str(c.ca)]
        cmd += self.broker_args + b.extra
        logf = open(b.log_path, "ab")  # noqa: SIM115 - handed to the child
        env = {k: v for k, v in os.environ.items() if k not in (ENV_AUTH, ENV_SECRET)}
        env.update(
            PYTHONUNBUFFERED="1",
            **{
                ENV_AUTH_FILE: str(self.zk_auth_file),
                ENV_READER_FILE: str(self.zk_reader_file),
                ENV_SECRET_FILE: str(self.secret_file),
            },
        )
        b.proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=logf, env=env, start_new_session=True
        )
        logf.close()
        self.spawned.append(b.proc.pid)

    def _await_url(self, b: BrokerProc, timeout: float) -> None:
        """Read the ``broker <id> <url> <repl url>`` line the broker prints once it listens;
        learn its port from it (and aim its replication proxy at its replication port)."""
        line = self._read_ready_line(b, timeout).split()
        if len(line) != 4 or line[0] != "broker":
            raise CoordinationError(
                f"broker {b.id} did not start; see {b.log_path}:\n{self.log_tail(b.id)}"
            )
        b.url = line[2]
        b.port = int(b.url.rpartition(":")[2])
        if b.id in self.repl_proxies:
            self.repl_proxies[b.id].target = (b.host, int(line[3].rpartition(":")[2]))

    def _read_ready_line(self, b: BrokerProc, timeout: float) -> str:
        """The first line of the broker's stdout, or "" if it exits or ``timeout`` passes
        first (then it is killed, so that no half-started broker is left behind)."""
        assert b.proc is not None and b.proc.stdout is not None
        with selectors.DefaultSelector() as sel:
            sel.register(b.proc.stdout, selectors.EVENT_READ)
            if sel.select(timeout):
                return b.proc.stdout.readline().decode()
        b.proc.kill()
        b.proc.wait()
        return ""

    def _start_broker(self, b: BrokerProc, timeout: float) -> None:
        """Spawn ``b`` on its port (0 the first time); if that port was taken while it was
        down, spawn it again on a fresh one: clients and peers find it through ZooKeeper."""
        self._spawn(b)
        try:
            self._await_url(b, timeout)
        except CoordinationError:
            if b.port == 0 or _ADDR_IN_USE not in self.log_tail(b.id).lower():
                raise
            b.port = 0
            self._spawn(b)
            self._await_url(b, timeout)

    def log_tail(self, bid: str, n: int = 20) -> str:
        try:
            return "\n".join(
                self.brokers[bid].log_path.read_text(errors="replace").splitlines()[-n:]
            )
        except OSError:
            return ""

    def data_dir(self, bid: str) -> Path:
        """Where broker ``bid`` keeps its segment files (with ``data``)."""
        return self.workdir / f"{bid}.data"

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
        self._start_broker(b, timeout)
        return b

    def respawn(self, bid: str) -> BrokerProc:
        """Start ``bid`` again (killed first if alive) without waiting for it to be ready
        (it may be waiting for ZooKeeper); :meth:`await_ready` then waits for that."""
        b = self.brokers[bid]
        if b.alive:
            self.kill(bid)
        self._spawn(b)
        return b

    def await_ready(self, bid: str, timeout: float = 30.0) -> None:
        """Until a broker :meth:`respawn` started says it serves (CoordinationError if it
        exits or ``timeout`` passes first)."""
        self._await_url(self.brokers[bid], timeout)

    # --- partitions (isolated clusters) ---------------------------------------------

    def cut_replication(self, a: str, b: str) -> None:
        """Partition brokers ``a`` and ``b`` from each other, both ways; both still reach
        ZooKeeper, their clients and the rest of the group. Held until healed."""
        for x in (a, b):
            self._check_repl_advertised(x)
        self._repl_proxy(a).cut({self.brokers[b].host})
        self._repl_proxy(b).cut({self.brokers[a].host})

    def heal_replication(self, a: str | None = None, b: str | None = None) -> None:
        """Undo :meth:`cut_replication` of ``a`` and ``b``, or (no arguments) every such cut."""
        if a is None or b is None:
            for p in self.repl_proxies.values():
                p.heal()
            return
        self._repl_proxy(a).heal({self.brokers[b].host})
        self._repl_proxy(b).heal({self.brokers[a].host})

    def cut_zk(self, bid: str) -> None:
        """Partition broker ``bid`` from every ZooKeeper server; it still reaches its peers
        and clients. Its session expires after ``session_timeout`` unless healed first."""
        for p in self._zk_proxies(bid):
            p.cut()

    def heal_zk(self, bid: str | None = None) -> None:
        """Undo :meth:`cut_zk` of ``bid``, or of every broker."""
        for b in [bid] if bid is not None else list(self.zk_proxies):
            for p in self._zk_proxies(b):
                p.heal()

    def heal(self) -> None:
        """Undo every cut."""
        for p in self._proxies():
            p.heal()

    def _proxies(self) -> list[Proxy]:
        return [*self.repl_proxies.values(), *(p for ps in self.zk_proxies.values() for p in ps)]

    def _repl_proxy(self, bid: str) -> Proxy:
        if bid not in self.repl_proxies:
            raise CoordinationError(f"no replication proxy for {bid}: start with isolated=True")
        return self.repl_proxies[bid]

    def _zk_proxies(self, bid: str) -> list[Proxy]:
        if bid not in self.zk_proxies:
            raise CoordinationError(f"no ZooKeeper proxy for {bid}: start with isolated=True")
        return self.zk_proxies[bid]

    def _check_repl_advertised(self, bid: str) -> None:
        """A cut of the proxy means nothing if peers dial the broker directly: refuse it."""
        member = self.member(bid)
        want = self.brokers[bid].repl_url
        if member is not None and member.get("repl_url", "") != want:
            raise CoordinationError(
                f"{bid} registered {member} in ZooKeeper, without repl_url {want!r}: peers would "
                "replicate around the proxy (the broker must put advertise_repl in its Member)"
            )

    # --- views ---------------------------------------------------------------------

    def member(self, bid: str) -> dict[str, Any] | None:
        """Broker ``bid``'s member znode (``{"url", "boot", ...}``), None while unregistered."""
        b = self.brokers[bid]
        path = paths.member(self.chroot, b.group, bid)
        zk = new_client(str(self.zk_hosts), timeout=2.0, auth=self.zk_auth)
        try:
            zk.start(timeout=10)
        except Exception as e:
            raise CoordinationError(f"cannot reach ZooKeeper at {self.zk_hosts}: {e}") from e
        try:
            raw, _ = zk.get(path)
        except NoNodeError:
            return None
        finally:
            zk.stop()
            zk.close()
        data: dict[str, Any] = json.loads(raw)
        return data

    @property
    def groups(self) -> list[str]:
        """This cluster's own groups (a joined one: those it added)."""
        return [f"g{g}" for g in range(self.first_group, self.first_group + self.n_groups)]

    def status(self) -> dict[str, Any]:
        return fetch_cluster(str(self.zk_hosts), self.chroot, auth=self.zk_auth)

    def primary(self, group: str = "g1") -> str | None:
        g = self.status()["groups"].get(group)
        return g["primary"] if g else None

    def healthy(self) -> bool:
        st = self.status()["groups"]
        for g in self.groups:
            info = st.get(g)
            if (
                not info
                or len(info["isr"]) < self.replicas
                or info["primary"] not in info["members"]
            ):
                return False
        return True

    def wait_healthy(self, timeout: float = 60.0) -> None:
        wait_for(self.healthy, timeout, "every group to have a primary and a full ISR", 0.1)

    @property
    def ca_file(self) -> str | None:
        """The CA file clients verify a tls cluster's brokers with (None: not a tls cluster)."""
        return str(self.certs.ca) if self.certs is not None else None

    def state(self) -> dict[str, Any]:
        return {
            "zk": self.zk_hosts,
            "chroot": self.chroot,
            # clients and the CLI: export TRITONMQ_ZK_AUTH_FILE=<this> (readable by you only)
            "zk_auth_file": str(self.zk_auth_file),
            # zk:// clients that should only route: TRITONMQ_ZK_AUTH_FILE=<this> (read-only)
            "zk_reader_file": str(self.zk_reader_file),
            # brokers that join the cluster (tritonmq dev --join) need it too
            "secret_file": str(self.secret_file),
            "config": self.config,  # ...and its brokers' settings, unless told others
            "ca_file": self.ca_file,
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


def _groups_in(zk_hosts: str, chroot: str, auth: ZkCredential) -> list[int]:
    """The numbers of the groups registered in the cluster (g3 -> 3)."""
    zk = new_client(zk_hosts, timeout=2.0, auth=auth)
    try:
        zk.start(timeout=10)
    except Exception as e:
        raise ConfigError(f"cannot reach the cluster's ZooKeeper at {zk_hosts}: {e}") from e
    try:
        names = zk.get_children(paths.groups(chroot)) if zk.exists(paths.groups(chroot)) else []
    finally:
        zk.stop()
        zk.close()
    return [int(n[1:]) for n in names if n[:1] == "g" and n[1:].isdigit()]
