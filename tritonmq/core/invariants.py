"""What must hold of a :class:`~tritonmq.core.broker.BrokerCore` after every event it
handles: its role and the fields that depend on it, its links, its requests in flight.

Unit tests and the simulator run :func:`broker_invariants` after every event (TigerBeetle's
``invariants()``): a rule broken inside the core is caught at the event that broke it, not
later by what a client saw. Each check is O(1) or O(links), cheap enough for every step.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tritonmq.core.roles import CasKind, Role

if TYPE_CHECKING:
    from tritonmq.core.broker import BrokerCore


def broker_invariants(c: BrokerCore) -> list[str]:
    """Every invariant ``c`` breaks now, as a sentence (empty: all hold)."""
    broken: list[str] = []

    def check(ok: bool, what: str) -> None:
        if not ok:
            broken.append(what)

    role, p, cas = c.role, c.primary, c.cas
    check((role is Role.LEADING) == (p is not None), f"role {role.value} with primary {p!r}")
    check(
        (role is Role.FOLLOWING) == (c.follow is not None),
        f"role {role.value} with follow link {c.follow!r}",
    )
    check(c.follow is None or c.backup is not None, "following without a backup log")
    check(p is None or c.backup is None, "a primary keeps a backup's state")
    claiming = cas is not None and cas.kind is CasKind.CLAIM
    check((role is Role.CLAIMING) == claiming, f"role {role.value} with CAS {cas!r}")
    check(
        cas is None or cas.kind is not CasKind.ISR or p is not None, "an ISR CAS without a primary"
    )
    if p is None:
        check(not c.durables_ready, "durable subscriptions ready without a primary")
        check(not c.waiting_subs, "requests waiting for a primary's subscriptions, none")
        check(not c.links, "follower links held without a primary")
    else:
        check(p.commit_ts <= c.log.last_ts, f"commit {p.commit_ts} past the log's end")
        check(c.state is not None, "a primary without a group state")
    check(sorted(c.link_ids.values()) == sorted(c.links), "link ids and links name other followers")
    if role is Role.STOPPED:
        check(p is None and c.follow is None, "stopped with a role's state")
    loads = c.loads
    check(loads.floor <= c._requests and loads.taken <= c._requests, "a load answer never asked")
    return broken
