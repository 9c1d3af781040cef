"""A simulated run's settings: the cluster's shape and faults (:class:`SimParams`), each
broker's settings (the real ones, scaled to runs of seconds), and where the simulated
cluster's znodes are.

The simulator's ZooKeeper model holds one cluster at its root: every path is
``tritonmq.coord.paths``'s with the chroot :data:`CHROOT` (none), so the simulated
brokers and the real ones name the same znodes the same way.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tritonmq.core.replication import CATCHUP_CHUNK
from tritonmq.sim.faults import Fault, FaultKind

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


@dataclass(frozen=True, slots=True)
class SimParams:
    groups: int = 1
    replicas: int = 3
    # (topic, subscription name or None for unnamed, mode); topics are per group: "t" has
    # every kind of subscriber, "u" only an unnamed one (nothing durable holds it back).
    subscribers: tuple[tuple[str, str | None, str], ...] = (
        ("t", "durable", "broadcast"),
        ("t", "shared", "shared"),
        ("t", "shared", "shared"),
        ("t", None, "broadcast"),
        ("u", None, "broadcast"),
    )
    producers: tuple[str, ...] = ("t", "u")  # one producer per topic named here
    publish_until: float = 4.0
    faults: int = 5
    quiet: float = 5.0  # after healing, before the liveness check
    max_steps: int = 20_000
    broker: BrokerParams = field(default_factory=BrokerParams)
    # A fixed fault list instead of random draws (e.g. issue 6's bug sequences); a target
    # "@primary:g0" / "@backup:g0" names whoever holds that role when the fault fires.
    scenario: tuple[Fault, ...] = ()
    scenario_name: str = ""  # its name in sim/scenarios.py (the replay hint names it)
    # Also draw REFUSE faults (a live process that refuses connections), and check after
    # healing that every replica re-joined its group's ISR (the CI seeds run with both;
    # off by default so that a seed's draws stay those of the runs docs/findings.md cites).
    refusals: bool = False
    check_whole: bool = False
    # Slot moves the operator starts (or rolls back) per run, with groups >= 2: the cluster gets a slot map and each group a producer-only
    # topic "m" whose slot moves (docs/testing.md, "Slot moves in the simulator").
    moves: int = 3
    # The shape of docs/replication.md M9's loss (a slot's first move losing acknowledged records; all off by
    # default, so that every seed cited in docs/findings.md draws what it always drew):
    # moved topics per group ("m", "m1", ...; the others with a producer and a durable
    # broadcast reader "md" from earliest each), ...
    moved_topics: int = 1
    # ... producer-only topics of g0 ("g0.b0", ...), so that g0's ts run ahead of the
    # other groups' ...
    busy: int = 0
    # ... a subscriptions load that takes up to this much longer (drawn per load; a
    # broker's loads answered in order), as the shell's load reads each topic's
    # subscriptions in turn, two round trips each ...
    slow_loads: float = 0.0
    # ... and the offset store's interval drawn per seed from this range (coalesced
    # stores: a hand-on lands that much later).
    offset_intervals: tuple[float, float] | None = None
    # The fault kinds drawn and their weights (empty: faults.DRAWN); REFUSE is added with
    # ``refusals``.
    fault_weights: tuple[tuple[FaultKind, int], ...] = ()
    # Brokers keep segment files (sim/disk.py, docs/replication.md D1-D3): a crash keeps
    # what was written, a restart reads it back; crashes need not spare the group, and a
    # whole group's crash, a torn tail and a flipped bit are drawn too (after the others).
    disks: bool = False
    # Swarm testing: the shape above is drawn from the seed itself (sim/swarm.py) by the
    # runner, which replays it with ``tritonmq sim --swarm --seed N``.
    swarm: bool = False
