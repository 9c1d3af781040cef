"""The slot map in ZooKeeper: ``/cluster`` {"slots", "version"} and ``/slots/<n>`` {"group", "state"}.

Created once, in one transaction, by `tritonmq init` (the dev cluster does it);
a slot move rewrites ``/slots/<n>`` and bumps ``/cluster``'s version, which is
what brokers and clients watch.
"""

from __future__ import annotations

import json

from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError, NoNodeError

from tritonmq.coord import paths
from tritonmq.coord.zkclient import (
    FROM_ENV,
    ClusterAcls,
    FromEnv,
    ZkCredential,
    credential_from,
    new_client,
    reader_from,
    secure_tree,
)
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


def read_slot_map(zk: KazooClient, chroot: str) -> SlotMap | None:
    try:
        raw, _ = zk.get(cluster_path(chroot))
    except NoNodeError:
        return None
    slots, version = parse_cluster(raw)
    owners = []
    for n in range(slots):
        try:
            data, _ = zk.get(slot_path(chroot, n))
        except NoNodeError:
            return None
        owners.append(str(json.loads(data)["group"]))
    return SlotMap(tuple(owners), version)


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
