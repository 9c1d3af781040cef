"""The slot map in ZooKeeper: ``/cluster`` {"slots", "version"} and ``/slots/<n>`` {"group", "state"}.

Created once, in one transaction, by `tritonmq init` (the dev cluster does it);
a slot move rewrites ``/slots/<n>`` (its history, :mod:`tritonmq.core.slothistory`)
by CAS and bumps ``/cluster``'s version in the same transaction, which is what
brokers and clients watch (docs/replication.md, M1).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

from kazoo.client import KazooClient
from kazoo.exceptions import (
    BadVersionError,
    ConnectionLoss,
    NoAuthError,
    NodeExistsError,
    NoNodeError,
    SessionExpiredError,
)

from tritonmq.coord import paths
from tritonmq.coord.zkclient import (
    FROM_ENV,
    ClusterAcls,
    FromEnv,
    ZkCredential,
    credential_from,
    denied,
    new_client,
    reader_from,
    secure_tree,
)
from tritonmq.core.slothistory import SlotHistory
from tritonmq.core.slots import SlotMap
from tritonmq.errors import CoordinationError

cluster_path = paths.cluster
slot_path = paths.slot


def parse_cluster(raw: bytes) -> tuple[int, int]:
    d = json.loads(raw)
    return int(d["slots"]), int(d.get("version", 0))


def create_slot_map(zk: KazooClient, chroot: str, smap: SlotMap) -> SlotMap:
    """Write ``smap`` unless a map exists; returns the map that is in force."""
    zk.ensure_path(paths.slots(chroot))
    tx = zk.transaction()
    tx.create(cluster_path(chroot), json.dumps({"slots": smap.slots, "version": 0}).encode())
    for n, g in enumerate(smap.owners):
        tx.create(slot_path(chroot, n), json.dumps({"group": g, "state": "normal"}).encode())
    results = tx.commit()
    if any(isinstance(r, NodeExistsError) for r in results):
        existing = read_slot_map(zk, chroot)
        if existing is None:
            raise CoordinationError("a partial slot map exists; remove it or fix it by hand")
        return existing
    if any(isinstance(r, Exception) for r in results):
        raise CoordinationError(f"creating the slot map failed: {results}")
    return smap


def read_slot_map(zk: KazooClient, chroot: str, known: SlotMap | None = None) -> SlotMap | None:
    """The slot map; ``known`` is returned as it is when ``/cluster``'s version has not
    moved (every change of an owner bumps it), which saves a read per slot."""
    try:
        raw, _ = zk.get(cluster_path(chroot))
    except NoNodeError:
        return None
    slots, version = parse_cluster(raw)
    if known is not None and known.version == version:
        return known
    histories = []
    for n in range(slots):
        try:
            data, _ = zk.get(slot_path(chroot, n))
        except NoNodeError:
            return None
        histories.append(SlotHistory.decode(data))
    return SlotMap.of_histories(histories, version)


@dataclass(frozen=True, slots=True)
class SlotHistories:
    """Every slot's history as read, with the znode versions a CAS must name."""

    cluster_version: int  # the ``/cluster`` znode's version (not the map version in its data)
    map_version: int  # the ``version`` in ``/cluster``'s data, which brokers and clients watch
    slots: tuple[SlotHistory, ...]
    znode_versions: tuple[int, ...]


def read_slot_histories(zk: KazooClient, chroot: str) -> SlotHistories | None:
    """Every ``/slots/<n>`` as a :class:`SlotHistory`; None when the cluster has no slot map.
    A slot znode that breaks the history's rules raises SlotHistoryError."""
    try:
        raw, stat = zk.get(cluster_path(chroot))
    except NoNodeError:
        return None
    count, version = parse_cluster(raw)
    slots, versions = [], []
    for n in range(count):
        try:
            data, st = zk.get(slot_path(chroot, n))
        except NoNodeError:
            raise CoordinationError(f"slot {n} is missing: a partial slot map") from None
        slots.append(SlotHistory.decode(data))
        versions.append(st.version)
    return SlotHistories(stat.version, version, tuple(slots), tuple(versions))


def fetch_slot_histories(
    hosts: str, chroot: str, timeout: float = 10.0, auth: ZkCredential | None | FromEnv = FROM_ENV
) -> SlotHistories | None:
    """:func:`read_slot_histories` over a session of its own (`tritonmq slots`)."""
    zk = new_client(hosts, timeout=2.0, auth=auth)
    try:
        zk.start(timeout=timeout)
    except Exception as e:
        raise CoordinationError(f"cannot reach ZooKeeper at {hosts}: {e}") from e
    try:
        return read_slot_histories(zk, chroot)
    except NoAuthError as e:
        raise denied(f"the slot map under {chroot}") from e
    finally:
        zk.stop()
        zk.close()


def cas_slot(zk: KazooClient, chroot: str, n: int, new: SlotHistory, read: SlotHistories) -> bool:
    """Write slot ``n``'s history if neither it nor ``/cluster`` changed since ``read``,
    bumping the map version in the same transaction. False: someone else wrote first
    (re-read and decide again)."""
    one = OneSlot(
        read.cluster_version,
        read.map_version,
        len(read.slots),
        read.slots[n],
        read.znode_versions[n],
    )
    return _cas_one(zk, chroot, n, new, one)


@dataclass(frozen=True, slots=True)
class OneSlot:
    """One slot's history as read, with the versions a CAS on it must name (a move's step
    reads only ``/cluster`` and its slot, not the whole map)."""

    cluster_version: int
    map_version: int
    count: int  # slots in the map
    history: SlotHistory
    znode_version: int


def read_slot(zk: KazooClient, chroot: str, n: int) -> OneSlot:
    try:
        raw, stat = zk.get(cluster_path(chroot))
    except NoNodeError:
        raise CoordinationError(f"no slot map under {chroot}") from None
    count, version = parse_cluster(raw)
    if not 0 <= n < count:
        raise CoordinationError(f"no slot {n}: the cluster has slots 0..{count - 1}")
    try:
        data, st = zk.get(slot_path(chroot, n))
    except NoNodeError:
        raise CoordinationError(f"slot {n} is missing: a partial slot map") from None
    return OneSlot(stat.version, version, count, SlotHistory.decode(data), st.version)


def _cas_one(zk: KazooClient, chroot: str, n: int, new: SlotHistory, read: OneSlot) -> bool:
    """The CAS of :func:`cas_slot`, for a slot as :func:`read_slot` reads it."""
    tx = zk.transaction()
    tx.set_data(slot_path(chroot, n), new.encode(), version=read.znode_version)
    cluster = {"slots": read.count, "version": read.map_version + 1}
    tx.set_data(cluster_path(chroot), json.dumps(cluster).encode(), version=read.cluster_version)
    results = tx.commit()
    if not any(isinstance(r, Exception) for r in results):
        return True
    if any(isinstance(r, BadVersionError) for r in results):
        return False
    raise CoordinationError(f"writing slot {n} failed: {results}")


def apply_slot_step(
    zk: KazooClient,
    chroot: str,
    n: int,
    step: Callable[[SlotHistory], SlotHistory],
    attempts: int = 20,
) -> SlotHistory:
    """Read slot ``n``, apply the pure ``step`` (``begin_move``, ``seal``...), write the
    result by CAS; returns what was written. A lost race (another slot or move wrote
    first) re-reads and applies the step again to what is there now, so a step the slot
    no longer allows raises IllegalSlotTransition. A write of unknown outcome (the
    connection dropped) is judged by re-reading, as R4a does for the group state. Reads
    ``/cluster`` and the slot only (a move's pause does not grow with the map)."""
    return write_slot_step(zk, chroot, n, step, attempts)[0]


def write_slot_step(
    zk: KazooClient,
    chroot: str,
    n: int,
    step: Callable[[SlotHistory], SlotHistory],
    attempts: int = 20,
) -> tuple[SlotHistory, int]:
    """:func:`apply_slot_step`, with the map version the write made: a broker holds the
    history it wrote against views read before the write landed (M1)."""
    for _ in range(attempts):
        read = read_slot(zk, chroot, n)
        new = step(read.history)
        try:
            if _cas_one(zk, chroot, n, new, read):
                return new, read.map_version + 1
        except (ConnectionLoss, SessionExpiredError):
            zk.retry(zk.sync, slot_path(chroot, n))
            now = read_slot(zk, chroot, n)
            if now.history == new and now.map_version > read.map_version:
                return new, read.map_version + 1
    raise CoordinationError(f"slot {n}: gave up after {attempts} lost races")


def init_cluster(
    hosts: str,
    chroot: str,
    groups: list[str],
    slots: int,
    auth: ZkCredential | None | FromEnv = FROM_ENV,
    reader: ZkCredential | None | FromEnv = FROM_ENV,
) -> SlotMap:
    """Close the chroot to anyone without the credential (every znode already there
    included; ``reader`` may read what routing needs), then create the slot map over
    ``groups`` if the cluster has none (`tritonmq init`)."""
    cred = credential_from() if isinstance(auth, FromEnv) else auth
    reads = reader_from() if isinstance(reader, FromEnv) else reader
    zk = new_client(hosts, timeout=5.0, auth=cred, reader=reads)
    try:
        zk.start(timeout=15)
    except Exception as e:
        raise CoordinationError(f"cannot reach ZooKeeper at {hosts}: {e}") from e
    try:
        if cred is not None:
            secure_tree(zk, chroot, ClusterAcls(cred, reads))
        return create_slot_map(zk, chroot, SlotMap.spread(groups, slots))
    finally:
        zk.stop()
        zk.close()
