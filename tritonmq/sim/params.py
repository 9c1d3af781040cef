"""A simulated broker's settings (the real ones, scaled to runs of seconds), and where the
simulated cluster's znodes are.

The simulator's ZooKeeper model holds one cluster at its root: every path is
``tritonmq.coord.paths``'s with the chroot :data:`CHROOT` (none), so the simulated
brokers and the real ones name the same znodes the same way.
"""

from __future__ import annotations

from dataclasses import dataclass

from tritonmq.core.replication import CATCHUP_CHUNK

CHROOT = ""  # coord.paths.state(CHROOT, "g0") == "/groups/g0/state"


def under(path: str) -> str:
    """The prefix a :class:`~tritonmq.sim.zkmodel.ZkList` or a watch of ``path``'s whole
    subtree names (the model lists and watches by prefix)."""
    return f"{path}/"


@dataclass(frozen=True, slots=True)
class BrokerParams:
    session_timeout: float = 2.0
    min_insync: int = 2
    lag_timeout: float = 1.0
    offset_interval: float = 0.2
    grace: float = 1.0  # ephemeral_grace
    # shared_resume_hold_s, below the grace as in the defaults (1 s and 10 s), so that a
    # shared member back later than the hold but within the grace is told apart
    shared_hold: float = 0.3
    ack_timeout: float = 2.0
    dedup_window: float = 60.0
    window: int = 64
    # Entries per catch-up append; the real default is far above these logs.
    catchup_chunk: int = CATCHUP_CHUNK
    # Which topics a subscriptions load lists is decided as the load is read, as the
    # shell's (``coord.offsets.load`` asks ``ours(topic)`` after listing the topics), not
    # when its answer comes back; a load read before a slot's move completed here,
    # answered after it, then leaves that slot's subscriptions out (docs/replication.md
    # M9). Off by default: it changes what some runs with moves load, so their draws.
    filter_loads_at_read: bool = False
