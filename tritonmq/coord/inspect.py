"""Read-only views of a cluster in ZooKeeper, for `tritonmq status`, clients and tests."""

from __future__ import annotations

import json
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError, NoNodeError

from tritonmq.coord import paths
from tritonmq.coord.slots import read_slot_map
from tritonmq.coord.zkclient import FROM_ENV, FromEnv, ZkCredential, denied, new_client
from tritonmq.errors import CoordinationError


def read_cluster(
    zk: KazooClient, chroot: str = "/tritonmq", *, with_slots: bool = True
) -> dict[str, Any]:
    """``{"groups": {G: {"epoch", "primary", "isr", "members": {id: url}, "primary_url"}},
    "slots": SlotMap.as_dict() or None}`` (``slots`` only ``with_slots``); a
    CoordinationError when ZooKeeper refuses our credential."""
    try:
        return _read_cluster(zk, chroot, with_slots)
    except NoAuthError as e:
        raise denied(f"the cluster under {chroot}") from e


def _read_cluster(zk: KazooClient, chroot: str, with_slots: bool) -> dict[str, Any]:
    root = paths.groups(chroot)
    out: dict[str, Any] = {}
    try:
        groups = sorted(zk.get_children(root))
    except NoNodeError:
        groups = []
    for g in groups:
        members: dict[str, str] = {}
        try:
            for m in sorted(zk.get_children(f"{root}/{g}/members")):
                try:
                    raw, _ = zk.get(f"{root}/{g}/members/{m}")
                except NoNodeError:
                    continue
                members[m] = json.loads(raw)["url"]
        except NoNodeError:
            pass
        try:
            raw, _ = zk.get(f"{root}/{g}/state")
            st = json.loads(raw)
        except NoNodeError:
            st = {"epoch": 0, "primary": None, "isr": []}
        out[g] = {
            "epoch": st["epoch"],
            "primary": st["primary"],
            "isr": st["isr"],
            "members": members,
            "primary_url": members.get(st["primary"]) if st["primary"] else None,
        }
    smap = read_slot_map(zk, chroot) if with_slots else None
    return {"groups": out, "slots": smap.as_dict() if smap else None}


def read_subscriptions(zk: KazooClient, chroot: str = "/tritonmq") -> list[dict[str, Any]]:
    """Every durable subscription: ``{"topic", "name", "mode", "owner", "offset"}`` (offset as
    stored; owner None: the anonymous principal)."""
    from urllib.parse import unquote

    out: list[dict[str, Any]] = []
    try:
        topics = sorted(zk.get_children(paths.subscriptions(chroot)))
    except NoNodeError:
        return out
    for t in topics:
        topic = unquote(t)
        try:
            names = sorted(zk.get_children(f"{paths.subscriptions(chroot)}/{t}"))
        except NoNodeError:
            continue
        for n in names:
            name = unquote(n)
            try:
                raw, _ = zk.get(paths.subscription(chroot, topic, name))
                off, _ = zk.get(paths.offset(chroot, topic, name))
            except NoNodeError:
                continue
            sub = json.loads(raw)
            mode, owner = sub.get("mode", "broadcast"), sub.get("owner")
            offset = json.loads(off)["ts"]
            out.append(
                {"topic": topic, "name": name, "mode": mode, "owner": owner, "offset": offset}
            )
    return out


def fetch_cluster(
    hosts: str,
    chroot: str = "/tritonmq",
    timeout: float = 10.0,
    auth: ZkCredential | None | FromEnv = FROM_ENV,
) -> dict[str, Any]:
    zk = new_client(hosts, timeout=2.0, auth=auth)
    try:
        zk.start(timeout=timeout)
    except Exception as e:
        raise CoordinationError(f"cannot reach ZooKeeper at {hosts}: {e}") from e
    try:
        return read_cluster(zk, chroot)
    finally:
        zk.stop()
        zk.close()
