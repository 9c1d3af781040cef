"""Fixed fault lists that replay the sequences of issue 6's bugs, for `SimParams.scenario`.

Random draws rarely line up several faults in the order a bug needs; these do, against
whoever holds a role when each fault fires ("@primary:g0", "@backup:g0", "@outside:g0";
"=Y" binds the broker to a label that "@=Y" names again later).
"""

from __future__ import annotations

import dataclasses

from tritonmq.sim.broker import BrokerParams
from tritonmq.sim.faults import Fault
from tritonmq.sim.faults import FaultKind as K
from tritonmq.sim.world import SimParams

PRIMARY, BACKUP, OUTSIDE = "@primary:g0", "@backup:g0", "@outside:g0"

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
}

SCENARIO_PARAMS: dict[str, dict[str, object]] = {
    "lost-claim": {"check_whole": True},
    "reset-dedup": {"publish_until": 8.0},
    # Z (or X) stays in the ISR, absent, until P has re-registered (its old session expires
    # 2 s after the crash) and caught up; a catch-up append carries one entry.
    "stale-commit": {"broker": BrokerParams(lag_timeout=4.0, catchup_chunk=1)},
}


def with_scenario(base: SimParams, name: str) -> SimParams:
    """``base`` running the scenario ``name``: its fault list and the settings it needs
    (``tritonmq sim --scenario``). Raises KeyError for an unknown name."""
    return dataclasses.replace(base, scenario=SCENARIOS[name], **SCENARIO_PARAMS.get(name, {}))  # type: ignore[arg-type]
