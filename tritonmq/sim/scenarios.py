"""Fixed fault lists that replay the sequences of issue 6's bugs, for `SimParams.scenario`.

Random draws rarely line up several faults in the order a bug needs; these do, against
whoever holds a role when each fault fires ("@primary:g0", "@backup:g0", "@outside:g0").
"""

from __future__ import annotations

from tritonmq.sim.faults import Fault
from tritonmq.sim.faults import FaultKind as K

PRIMARY, BACKUP, OUTSIDE = "@primary:g0", "@backup:g0", "@outside:g0"

SCENARIOS: dict[str, tuple[Fault, ...]] = {  # run with SimParams(scenario=..., check_whole=True)
    # Bug 6: a backup, cut from the primary long enough to be dropped from the ISR but
    # not yet told (watches late), is then refused by the live primary; it suspects it,
    # claims on its stale view, loses, and must drop the suspicion and follow again.
    "lost-claim": (
        Fault(K.SLOW_WATCHES, PRIMARY, 1.0, 3.0),
        Fault(K.PARTITION, PRIMARY, 1.2, 1.6, BACKUP),
        Fault(K.REFUSE, PRIMARY, 2.8, 2.0, OUTSIDE),
    ),
}
