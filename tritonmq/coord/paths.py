"""Every ZooKeeper path of a cluster, built in one place (DESIGN §3).

Topic and subscription names are percent-encoded into one path segment, so a
name can never climb out of its parent (``/``, ``.``, ``..`` are escaped).
The chroot ``""`` gives the paths from the root, as the simulator's ZooKeeper model
holds its one cluster (``tritonmq/sim/params.py``).
"""

from __future__ import annotations

from urllib.parse import quote

DEFAULT_CHROOT = "/tritonmq"


def seg(name: str) -> str:
    """One path segment for ``name``; ``.`` and ``..`` are escaped too."""
    s = quote(name, safe="")
    if s in (".", ".."):
        s = s.replace(".", "%2E")
    return s


def root(chroot: str) -> str:
    return chroot.rstrip("/")


def cluster(chroot: str) -> str:
    return f"{root(chroot)}/cluster"


def slots(chroot: str) -> str:
    return f"{root(chroot)}/slots"


def slot(chroot: str, n: int) -> str:
    return f"{slots(chroot)}/{n}"


def groups(chroot: str) -> str:
    return f"{root(chroot)}/groups"


def group(chroot: str, g: str) -> str:
    return f"{groups(chroot)}/{g}"


def members(chroot: str, g: str) -> str:
    return f"{group(chroot, g)}/members"


def member(chroot: str, g: str, broker: str) -> str:
    return f"{members(chroot, g)}/{broker}"


def state(chroot: str, g: str) -> str:
    return f"{group(chroot, g)}/state"


def subscriptions(chroot: str) -> str:
    return f"{root(chroot)}/subscriptions"


def offsets(chroot: str) -> str:
    return f"{root(chroot)}/offsets"


def subscription(chroot: str, topic: str, name: str) -> str:
    return f"{subscriptions(chroot)}/{seg(topic)}/{seg(name)}"


def offset(chroot: str, topic: str, name: str) -> str:
    return f"{offsets(chroot)}/{seg(topic)}/{seg(name)}"
