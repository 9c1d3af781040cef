"""Fixed fault lists that replay the sequences of issue 6's bugs (and the slot swaps of
docs/replication.md M9), for `SimParams.scenario`.

Random draws rarely line up several faults in the order a bug needs; these do, against
whoever holds a role when each fault fires ("@primary:g0", "@backup:g0", "@outside:g0";
"=Y" binds the broker to a label that "@=Y" names again later).
"""

from __future__ import annotations

import dataclasses

from tritonmq.sim.faults import Fault
from tritonmq.sim.faults import FaultKind as K
from tritonmq.sim.params import BrokerParams
from tritonmq.sim.slotops import moved_topics
from tritonmq.sim.world import SimParams

PRIMARY, BACKUP, OUTSIDE = "@primary:g0", "@backup:g0", "@outside:g0"
SWAPPED = 4  # moved topics per group in "slot-swaps"


def _swaps(at: tuple[float, ...]) -> tuple[Fault, ...]:
    """The operator moving every moved topic's slot of both groups to the other group at
    each time of ``at`` (two groups: each move goes to the other one)."""
    topics = [f"{g}.{t}" for g in ("g0", "g1") for t in moved_topics(SWAPPED)]
    return tuple(Fault(K.MOVE_SLOT, topic, t, 0.0) for t in at for topic in topics)


# Run with SimParams(scenario=..., **SCENARIO_PARAMS.get(name, {})).
SCENARIOS: dict[str, tuple[Fault, ...]] = {
    # Bug 6: a backup, cut from the primary long enough to be dropped from the ISR but
    # not yet told (watches late), is then refused by the live primary; it suspects it,
    # claims on its stale view, loses, and must drop the suspicion and follow again.
    "lost-claim": (
        Fault(K.SLOW_WATCHES, PRIMARY, 1.0, 3.0),
        Fault(K.PARTITION, PRIMARY, 1.2, 1.6, BACKUP),
        Fault(K.REFUSE, PRIMARY, 2.8, 2.0, OUTSIDE),
    ),
    # Bug 4 (the real-process sequence): backup Y frozen, then primary P frozen
    # while Y still holds back commits; the producers cannot reach backup X, which is
    # elected, commits and purges P's unacknowledged batches; Y is killed and re-joins X
    # by reset; X is killed, Y is elected, and the producers' resends of those batches
    # must be recognised by Y (the dedup state travelled with the reset).
    "reset-dedup": (
        Fault(K.FREEZE, "@backup:g0=Y", 1.0, 20.0),
        Fault(K.PARTITION, "g0p0", 1.0, 6.0, "@backup:g0=X"),
        Fault(K.PARTITION, "g0p1", 1.0, 6.0, "@=X"),
        Fault(K.FREEZE, "@primary:g0=P", 1.9, 7.0),
        Fault(K.CRASH, "@=Y", 5.5, 0.3, "force"),
        Fault(K.CRASH, "@=X", 6.5, 3.0, "force"),
    ),
    # Bug 1: the primary P dies right after acknowledging a batch, before its backups
    # learn the new commit point; X and Z cannot reach each other, so the winner's ISR
    # {X, Z} has a member that does not re-attach and its inherited commit point (one
    # append behind) cannot move. P restarts empty and catches up, one entry per append:
    # its acks pass that stale commit point before it holds the acknowledged batch, and
    # it must not be admitted to the ISR there. Then the others die (P, admitted once it
    # holds the epoch's start, is in sync by then and takes over).
    "stale-commit": (
        Fault(K.PARTITION, "@backup:g0=X", 2.0, 3.0, "@backup:g0=Z"),
        Fault(K.CRASH, "@primary:g0=P", 2.0, 0.3),
        Fault(K.CRASH, "@=X", 4.5, 0.4, "force"),
        Fault(K.CRASH, "@=Z", 4.5, 0.4, "force"),
    ),
    # The real-process run of M9's loss, in small: two groups, each topic's slot swapped to the
    # other group three times, a durable broadcast reader from earliest on every moved
    # topic, g0 busier (its ts run ahead of g1's). At a slot's first move its new owner
    # completes several moves one after another; a subscriptions load read before one of
    # them completed, answered after it, leaves that slot's subscriptions out and was
    # taken as the answer to the owner's reload (purge ran for nobody), or to the load a
    # named `sub` of the slot waited for (the subscription created afresh, registered,
    # and the old group's offset, of era 0, adopted as era 1's). No other fault.
    "slot-swaps": _swaps((1.0, 2.0, 3.0)),
}

SCENARIO_PARAMS: dict[str, dict[str, object]] = {
    "lost-claim": {"check_whole": True},
    "reset-dedup": {"publish_until": 8.0},
    # Z (or X) stays in the ISR, absent, until P has re-registered (its old session expires
    # 2 s after the crash) and caught up; a catch-up append carries one entry.
    "stale-commit": {"broker": BrokerParams(lag_timeout=4.0, catchup_chunk=1)},
    # loads read the topics they list as the shell's do, and take a while (the shell reads
    # each topic's subscriptions in turn; the simulated client takes 0.2-0.5 s to reach the
    # new group after WRONG_GROUP, where a real one takes milliseconds); coalesced offset
    # stores (the old group's hand-on lands up to 1.5 s later)
    "slot-swaps": {
        "groups": 2,
        "moved_topics": SWAPPED,
        "busy": 10,
        "slow_loads": 0.8,
        "offset_intervals": (0.2, 1.5),
        "broker": BrokerParams(filter_loads_at_read=True),
    },
}


def with_scenario(base: SimParams, name: str) -> SimParams:
    """``base`` running the scenario ``name``: its fault list and the settings it needs
    (``tritonmq sim --scenario``). Raises KeyError for an unknown name."""
    params = SCENARIO_PARAMS.get(name, {})
    return dataclasses.replace(base, scenario=SCENARIOS[name], scenario_name=name, **params)  # type: ignore[arg-type]
