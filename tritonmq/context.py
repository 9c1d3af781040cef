"""The local context: where the cluster `tritonmq dev` runs is, for commands given none.

`tritonmq dev` writes a small JSON file naming its ZooKeeper, chroot, broker URLs, the
credential files it generated and its CA (with ``--tls``), and removes it when it stops.
Every CLI command and ``Client()`` without a URL use it, as ``nats`` uses its current
context, so that ``tritonmq sub chat`` and ``tritonmq pub chat hello`` need no flags.

Where (the XDG base directory convention, like other tools' state):
``$TRITONMQ_CONTEXT`` if set (a file path), else ``$XDG_STATE_HOME/tritonmq/context.json``,
else ``~/.local/state/tritonmq/context.json``.

What wins, first to last: a flag (or an argument to ``Client``), its environment variable
(``$TRITONMQ_URL``, ``$TRITONMQ_ZK``, ``$TRITONMQ_ZK_AUTH_FILE``, ``$TRITONMQ_CA_FILE``), the
context, the built-in default. The context's credential and CA are used only for the cluster
it names, whether its address came from the context or was given and is the same.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlparse

from tritonmq.errors import ConfigError

ENV_CONTEXT: Final = "TRITONMQ_CONTEXT"
ENV_URL: Final = "TRITONMQ_URL"
ENV_ZK: Final = "TRITONMQ_ZK"
DEFAULT_CHROOT: Final = "/tritonmq"
DEV_PORT: Final = 4350
"""Where `tritonmq dev` listens unless told otherwise: ZooKeeper on 4350, its brokers on
4351, 4352, ... (g1b1, g1b2, g1b3, g2b1, ...)."""


def context_path(env: Mapping[str, str] | None = None) -> Path:
    """Where the local context is read and written (see the module docstring)."""
    env = os.environ if env is None else env
    if env.get(ENV_CONTEXT):
        return Path(env[ENV_CONTEXT])
    base = Path(env["XDG_STATE_HOME"]) if env.get("XDG_STATE_HOME") else None
    if base is None or not base.is_absolute():  # the spec: a relative one is ignored
        base = Path.home() / ".local" / "state"
    return base / "tritonmq" / "context.json"


@dataclass(frozen=True, slots=True)
class LocalContext:
    """A running `tritonmq dev` cluster, as its context file describes it."""

    path: Path
    zk: str
    chroot: str
    zk_auth_file: str
    ca_file: str | None
    pid: int
    brokers: tuple[str, ...] = ()
    pids: tuple[tuple[str, int], ...] = ()  # (broker id, pid) of its broker processes

    @property
    def url(self) -> str:
        return f"zk://{self.zk}{self.chroot}"

    @property
    def alive(self) -> bool:
        """Is the `tritonmq dev` that wrote it still running (it removes the file when it
        stops, unless it was killed)?"""
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    def check_alive(self) -> LocalContext:
        if not self.alive:
            raise ConfigError(
                f"the local context {self.path} names a `tritonmq dev` (pid {self.pid}) that "
                "is no longer running: start `tritonmq dev` again, or say which cluster "
                f"(--zk/--url, ${ENV_ZK}/${ENV_URL})"
            )
        return self

    def names(self, url: str) -> bool:
        """Is ``url`` (zk://, ws://, wss://) this cluster's?"""
        parsed = urlparse(url)
        if parsed.scheme == "zk":
            return parsed.netloc == self.zk and (parsed.path or DEFAULT_CHROOT) == self.chroot
        return url.rstrip("/") in self.brokers

    def names_zk(self, zk_hosts: str) -> bool:
        return zk_hosts == self.zk


def load_context(env: Mapping[str, str] | None = None) -> LocalContext | None:
    """The local context, None if there is none; a file that is not one is a ConfigError."""
    path = context_path(env)
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise ConfigError(f"cannot read the local context {path}: {e}") from e
    try:
        data: Any = json.loads(text)
        brokers = tuple(str(b["url"]) for b in data.get("brokers", ()))
        pids = tuple((str(b["id"]), int(b["pid"])) for b in data.get("brokers", ()) if "id" in b)
        return LocalContext(
            path,
            str(data["zk"]),
            str(data.get("chroot") or DEFAULT_CHROOT),
            str(data["zk_auth_file"]),
            str(data["ca_file"]) if data.get("ca_file") else None,
            int(data["pid"]),
            brokers,
            pids,
        )
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise ConfigError(f"{path} is not a tritonmq context file ({e!r}): remove it") from e


def context_for(url: str, env: Mapping[str, str] | None = None) -> LocalContext | None:
    """The running local context if it names ``url``'s cluster (a context that cannot be
    read is none: the caller said which cluster)."""
    try:
        ctx = load_context(env)
    except ConfigError:
        return None
    return ctx if ctx is not None and ctx.alive and ctx.names(url) else None


def client_url(url: str | None, env: Mapping[str, str] | None = None) -> str:
    """What ``Client(url)`` connects to: ``url``, else ``$TRITONMQ_URL``, else the local
    context's; a ConfigError if none says."""
    env = os.environ if env is None else env
    if url:
        return url
    if env.get(ENV_URL):
        return env[ENV_URL]
    ctx = load_context(env)
    if ctx is None:
        raise ConfigError(
            f"no cluster to connect to: give a URL (zk://HOST:PORT or ws://HOST:PORT), set "
            f"${ENV_URL}, or run `tritonmq dev` (it writes {context_path(env)})"
        )
    return ctx.check_alive().url


def write_context(path: Path, state: Mapping[str, Any], pid: int) -> None:
    """Write the context of a dev cluster (its ``state()``) for process ``pid``, atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{pid}.tmp")
    tmp.write_text(json.dumps({**state, "pid": pid}, indent=2) + "\n")
    tmp.replace(path)


def remove_context(path: Path, pid: int) -> None:
    """Remove the context at ``path`` if it is still ``pid``'s (another dev may have taken
    its place since)."""
    try:
        if int(json.loads(path.read_text()).get("pid", -1)) == pid:
            path.unlink()
    except (OSError, ValueError, TypeError, AttributeError):
        pass
