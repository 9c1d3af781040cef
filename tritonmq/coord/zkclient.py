"""The one place kazoo clients are built, with the cluster's ZooKeeper credential.

Every znode under the chroot is created with a digest ACL that grants everything to
the cluster's credential and nothing to anyone else (issue 8, attack 3): without the
credential a ZooKeeper client gets NoAuth on every read and write of the cluster's
state, members, slot map, subscriptions and offsets.

The credential is ``user:password``, read from a file (the broker setting
``zk_auth_file``, or env ``TRITONMQ_ZK_AUTH_FILE``) or from env ``TRITONMQ_ZK_AUTH``;
never from a command-line argument, which any local user can read in ``ps``.

An optional second identity, the *reader* (``zk_reader_file``, or env
``TRITONMQ_ZK_READER_FILE``), may only read what a zk:// client routes by: the slot
map and the groups' members and state. Subscriptions and offsets stay the cluster
credential's alone. A zk:// client given the reader's file (as its
``TRITONMQ_ZK_AUTH_FILE``) can route, and can neither rewrite the cluster nor read
other applications' subscriptions.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, TypeVar

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import (
    ConnectionLoss,
    NoAuthError,
    NoNodeError,
    OperationTimeoutError,
    SessionExpiredError,
)
from kazoo.security import ACL, make_digest_acl

from tritonmq.coord import paths
from tritonmq.errors import ConfigError, CoordinationError

ENV_AUTH: Final = "TRITONMQ_ZK_AUTH"
ENV_AUTH_FILE: Final = "TRITONMQ_ZK_AUTH_FILE"
ENV_READER_FILE: Final = "TRITONMQ_ZK_READER_FILE"
BLIPS = (ConnectionLoss, SessionExpiredError, OperationTimeoutError)
"""What a ZooKeeper operation raises while the server is out of reach for a moment."""
KEEP_TRYING: Final = {"max_tries": -1, "max_delay": 0.5}
"""kazoo's ``connection_retry`` for a session that must outlive a ZooKeeper outage (kazoo's
default gives up reconnecting after one try and closes the client for good)."""
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class ZkCredential:
    """A ZooKeeper digest identity (the password never shows in a repr or a log)."""

    user: str
    password: str = field(repr=False)

    @classmethod
    def parse(cls, text: str, where: str) -> ZkCredential:
        user, sep, password = text.strip().partition(":")
        if not sep or not user or not password:
            raise ConfigError(f"{where} must hold a ZooKeeper credential 'user:password'")
        return cls(user, password)

    @property
    def auth_data(self) -> list[tuple[str, str]]:
        return [("digest", f"{self.user}:{self.password}")]

    @property
    def acl(self) -> list[ACL]:
        """What every znode of the cluster carries: all rights to this identity, none to others."""
        return [make_digest_acl(self.user, self.password, all=True)]


@dataclass(frozen=True, slots=True)
class ClusterAcls:
    """The ACL of each znode: all rights to ``owner``; read to ``reader`` where routing needs it."""

    owner: ZkCredential
    reader: ZkCredential | None = None

    @property
    def public(self) -> list[ACL]:
        """The chroot, slot map, groups, members and state: what a zk:// client reads."""
        if self.reader is None:
            return self.owner.acl
        return [*self.owner.acl, make_digest_acl(self.reader.user, self.reader.password, read=True)]

    @property
    def private(self) -> list[ACL]:
        """Subscriptions and offsets: the cluster credential's alone."""
        return self.owner.acl

    def for_path(self, chroot: str, path: str) -> list[ACL]:
        for root in (paths.subscriptions(chroot), paths.offsets(chroot)):
            if path == root or path.startswith(root + "/"):
                return self.private
        return self.public


def reader_from(file: str = "", env: Mapping[str, str] | None = None) -> ZkCredential | None:
    """The read-only identity named by ``file`` (a setting), else by the environment."""
    env = os.environ if env is None else env
    path = file or env.get(ENV_READER_FILE, "")
    return read_credential(path) if path else None


def read_credential(path: str | Path) -> ZkCredential:
    try:
        text = Path(path).read_text()
    except OSError as e:
        raise ConfigError(f"cannot read the ZooKeeper credential file {path}: {e}") from e
    return ZkCredential.parse(text, f"the file {path}")


def credential_from(file: str = "", env: Mapping[str, str] | None = None) -> ZkCredential | None:
    """The credential named by ``file`` (a setting), else by the environment; None if neither."""
    env = os.environ if env is None else env
    if file:
        return read_credential(file)
    if env.get(ENV_AUTH_FILE):
        return read_credential(env[ENV_AUTH_FILE])
    if env.get(ENV_AUTH):
        return ZkCredential.parse(env[ENV_AUTH], f"${ENV_AUTH}")
    return None


class FromEnv:
    """The default of :func:`new_client`: the credential the environment names."""


FROM_ENV: Final = FromEnv()


def new_client(
    hosts: str,
    *,
    timeout: float = 2.0,
    auth: ZkCredential | None | FromEnv = FROM_ENV,
    reader: ZkCredential | None = None,
    **kwargs: Any,
) -> KazooClient:
    """A kazoo client that authenticates with ``auth`` and creates znodes only it may touch
    (and ``reader`` may read; subscriptions and offsets are created with
    :attr:`ClusterAcls.private` by who creates them).

    ``auth=None`` is an unauthenticated client (an ``insecure_cluster``, or a test
    playing the outsider)."""
    cred = credential_from() if isinstance(auth, FromEnv) else auth
    if cred is None:
        return KazooClient(hosts=hosts, timeout=timeout, **kwargs)
    acl = ClusterAcls(cred, reader).public
    return KazooClient(
        hosts=hosts, timeout=timeout, auth_data=cred.auth_data, default_acl=acl, **kwargs
    )


def denied(what: str) -> CoordinationError:
    """The error for a NoAuth answer: ZooKeeper refused us, say which credential to give."""
    return CoordinationError(
        f"ZooKeeper refused to let us read {what}: no or wrong credential "
        f"(set {ENV_AUTH_FILE} to the cluster's credential file, or {ENV_AUTH})"
    )


def _chain(chroot: str, group: str | None) -> list[str]:
    out = [paths.root(chroot)]
    if group is not None:
        out += [paths.groups(chroot), paths.group(chroot, group), paths.members(chroot, group)]
    return out


def secure(zk: KazooClient, chroot: str, acls: ClusterAcls, group: str | None = None) -> None:
    """Put the cluster's ACL on the chroot (and ``group``'s path down to its members),
    creating them if missing. A node some earlier, insecure run left open to anyone is
    closed; one that another credential owns is an error (someone else's cluster, or a
    squatter: refuse to run under it)."""
    for path in _chain(chroot, group):
        zk.ensure_path(path)
        _set_acl(zk, path, acls.public)


def secure_tree(zk: KazooClient, chroot: str, acls: ClusterAcls) -> int:
    """:func:`secure` every znode under ``chroot`` (`tritonmq init` on an existing cluster);
    the number of znodes whose ACL changed."""
    zk.ensure_path(paths.root(chroot))
    changed = 0
    todo = [paths.root(chroot)]
    while todo:
        path = todo.pop()
        changed += _set_acl(zk, path, acls.for_path(chroot, path))
        try:
            todo += [f"{path}/{c}" for c in zk.get_children(path)]
        except NoNodeError:
            continue
    return changed


def _set_acl(zk: KazooClient, path: str, want: list[ACL]) -> int:
    try:
        acls, stat = zk.get_acls(path)
        if sorted(map(str, acls)) == sorted(map(str, want)):
            return 0
        zk.set_acls(path, want, version=stat.aversion)
    except NoNodeError:
        return 0
    except NoAuthError as e:
        raise CoordinationError(
            f"{path} in ZooKeeper belongs to another credential; not ours to use"
        ) from e
    return 1


def wait_connected(zk: KazooClient, deadline: float) -> bool:
    """Until ``zk``'s session is connected (a new one after an expiry) or the monotonic
    ``deadline``; True when connected."""
    back = threading.Event()

    def listener(state: str) -> bool:
        if state == KazooState.CONNECTED:
            back.set()
            return True  # remove the listener
        return False

    zk.add_listener(listener)
    try:
        if zk.connected:
            return True
        return back.wait(max(0.0, deadline - time.monotonic())) or zk.connected
    finally:
        zk.remove_listener(listener)


def through_blips(
    zk: KazooClient,
    op: Callable[[], T],
    deadline: float,
    on_blip: Callable[[BaseException], None],
    *,
    what: str = "ZooKeeper",
) -> T:
    """``op()``, again each time it fails with one of :data:`BLIPS`, once the session is
    connected again, until the monotonic ``deadline``; ``on_blip(error)`` is told of each
    failure. CoordinationError when ZooKeeper is still out of reach at the deadline. The
    session needs :data:`KEEP_TRYING` (else kazoo stops reconnecting)."""
    while True:
        try:
            return op()
        except BLIPS as e:
            on_blip(e)
            if not wait_connected(zk, deadline) or time.monotonic() >= deadline:
                raise CoordinationError(
                    f"{what} out of reach until the deadline (last error: {type(e).__name__})"
                ) from e
            # connected again: a connection lost between the wake-up and the call fails it
            # again, and the next wait blocks until kazoo reports the next reconnection
