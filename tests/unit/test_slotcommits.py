"""``commit`` of a durable subscription whose slot moved (docs/replication.md M5, M6), the
way the Spark source acknowledges its query's subscription: every group that held an era
of the topic gets the query's position in its own ``ts``, and the group serving the stored
era takes it (capped at the era's seal point), so it hands the subscription on and purges
the sealed remainder; the owner then takes the query's position in its era."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from tests.unit.test_moves import T0, leading, member, moving, only, pub, state, view
from tests.unit.test_readers import completed, sealed, ticks
from tritonmq.config import BrokerConfig
from tritonmq.core.actions import (
    Action,
    LoadSubscriptions,
    ProposeState,
    RegisterSubscription,
    SendCommitted,
    SendError,
    SendPurge,
    StoreOffsets,
)
from tritonmq.core.broker import BrokerCore, Role
from tritonmq.core.events import (
    CasDone,
    CasOutcome,
    ClientFrameIn,
    SubscriptionRegistered,
    SubscriptionsLoaded,
    ZkView,
)
from tritonmq.core.slothistory import SlotHistory, begin_move, complete, seal
from tritonmq.wire.frames import Commit, ErrorCode

NO_GRACE = {"ephemeral_grace": 0.0}  # purge from the start: nothing unnamed to wait for


def commit(c: BrokerCore, rid: int, ts: int, now: float) -> list[Action]:
    """A commit of ``c``'s own ts, naming its group, as Spark's source sends them."""
    return c.handle(ClientFrameIn("spark", Commit(rid, T0, "q", ts, c.cfg.group), now))


def purged(out: Sequence[Action]) -> dict[str, int]:
    """Per topic, the last ts purged."""
    return {t: upto for p in only(out, SendPurge) for t, upto in p.purge.topics}


def elected_after_the_move(
    me: str, group: str, hs: tuple[SlotHistory, SlotHistory], found: list[tuple[str, str, str, int]]
) -> BrokerCore:
    """A primary of ``group`` elected once the slots are ``hs``; ZooKeeper holds ``found``
    (each at era 0)."""
    cfg = BrokerConfig(id=me, group=group, min_insync=1, **NO_GRACE)  # type: ignore[arg-type]
    c = BrokerCore(cfg, member(me))
    [prop] = only(c.handle(ZkView(None, {me: member(me)}, None, 0.0)), ProposeState)
    st = dataclasses.replace(prop.state, version=0)
    loads = only(c.handle(CasDone(prop.request, CasOutcome.OK, st, 0.0)), LoadSubscriptions)
    loads += only(view(c, hs, 0.0, state(1, me, me)), LoadSubscriptions)  # an era become ours
    c.handle(SubscriptionsLoaded(loads[-1].request, found, 0.0))  # the one read after (M9)
    assert c.role is Role.LEADING
    return c


def test_the_query_s_commits_let_the_old_group_purge_the_sealed_remainder() -> None:
    """The query registered ``q`` at g1 (era 0) and acknowledged ts 1; the slot moved to g2
    at g1's ts 2. The query read era 0 to the seal point and era 1 up to g2's ts 2: it
    commits 2 at g1 and 2 at g2."""
    c = leading("a", **NO_GRACE)
    [reg] = only(commit(c, 1, 0, 0.1), RegisterSubscription)
    c.handle(SubscriptionRegistered(T0, "q", reg.offset, 0.1, era=reg.era))
    pub(c, 1, T0, "u1", "u2")
    commit(c, 2, 1, 0.2)
    ticks(c, 0.3, 2)
    view(c, completed(2), 1.0)
    x = elected_after_the_move("x", "g2", completed(2), [(T0, "q", "broadcast", 1)])
    assert x.delivery.durables[(T0, "q")].pending, "stored at era 0: g1's until it hands on"
    pub(x, 1, T0, "n1", "n2", now=1.0)

    # the batch's commits: each group that held an era gets the query's ts in it
    out = commit(x, 3, 2, 1.1)
    assert only(out, SendCommitted) and not only(out, RegisterSubscription)
    assert x.delivery.offsets_to_store() is None, "g2 writes nothing of a pending one (M5)"
    out = commit(c, 3, 2, 1.1)
    assert not only(out, SendError), "the group of the stored era takes the commit"
    assert only(out, SendCommitted)
    out = ticks(c, 1.2)
    store = only(out, StoreOffsets)[-1]
    assert (store.offsets, store.eras) == (((T0, "q", 0),), (1,)), "handed on: era 1 from 0"
    assert purged(out).get(T0) == 2, "the sealed remainder is purged once nobody needs it"
    assert (T0, "q") not in c.delivery.durables, "and g1 let the subscription go"

    # g2 reads ZooKeeper again (it holds a pending one): the offset reached its era
    [load] = only(ticks(x, 1.2, 1), LoadSubscriptions)
    x.handle(
        SubscriptionsLoaded(load.request, [(T0, "q", "broadcast", 0)], 1.3, eras={(T0, "q"): 1})
    )
    assert not x.delivery.durables[(T0, "q")].pending
    commit(x, 4, 2, 1.4)  # the next batch's commit
    out = ticks(x, 1.5)
    assert purged(out).get(T0) == 2, "the owner purges what the query acknowledged of its era"


def test_a_group_that_let_the_subscription_go_takes_a_commit_and_registers_nothing() -> None:
    """The query commits at every group that held an era: one that let its subscription go
    (or never held it) answers and changes nothing."""
    c = leading("a", **NO_GRACE)
    pub(c, 1, T0, "u1", "u2")
    view(c, completed(2), 0.2)
    out = commit(c, 1, 2, 0.3)
    assert only(out, SendCommitted) == [SendCommitted("spark", 1, 2, 2)]
    assert not only(out, RegisterSubscription) and (T0, "q") not in c.delivery.durables


def test_a_commit_past_the_seal_acknowledges_an_ended_era_only_up_to_its_seal_point() -> None:
    """g1 held era 0 up to ts 2 and holds era 2 from its ts 2 on; the subscription is still
    at era 0 here: a commit of g1's ts 3 (era 2) acknowledges era 0 whole, not more."""
    c = leading("a", **NO_GRACE)
    [reg] = only(commit(c, 1, 0, 0.1), RegisterSubscription)
    c.handle(SubscriptionRegistered(T0, "q", reg.offset, 0.1, era=reg.era))
    pub(c, 1, T0, "u1", "u2")
    back = seal(begin_move(completed(2)[0], "g1"), "g2", 0)
    view(c, (complete(back, "g1"), SlotHistory("g1")), 0.3)
    pub(c, 2, T0, "u3", now=0.4)
    commit(c, 2, 3, 0.5)
    assert c.delivery.durables[(T0, "q")].offset == 2
    store = only(ticks(c, 0.6), StoreOffsets)[-1]
    assert (store.offsets, store.eras) == (((T0, "q", 0),), (1,)), "era 1 is g2's to serve"
    # g1 owns era 2: it keeps the subscription pending (at era 1, g2's until g2 hands it
    # on), not let go (it would purge era 2's records for nobody, M5)
    d = c.delivery.durables[(T0, "q")]
    assert d.pending and (d.era, d.stored_era) == (2, 1)
    out = commit(c, 3, 3, 1.0)
    assert not only(out, RegisterSubscription), "not registered again at era 2 (g2 holds it)"
    assert not only(out, LoadSubscriptions), "it holds it: nothing to read first"
    assert only(out, SendCommitted)
    assert c.delivery.durables[(T0, "q")].pending, "at era 1: g2's until it hands it on"


def test_a_commit_at_the_old_group_while_the_move_runs_creates_no_subscription() -> None:
    """A query's first commit reaching the old group while the slot moves would register
    its subscription there, at the era that ends, where the new owner may never learn of
    it: the old group registers nothing and answers the retriable UNAVAILABLE (the query
    commits again; once the move completed, at the owner). One it holds takes the commit."""
    for hs in (moving(), sealed(2)):
        c = leading("a", **NO_GRACE)
        pub(c, 1, T0, "u1", "u2")
        view(c, hs, 0.2)
        out = commit(c, 1, 1, 0.3)
        if only(out, LoadSubscriptions):
            out = c.handle(SubscriptionsLoaded(only(out, LoadSubscriptions)[0].request, [], 0.3))
        assert not only(out, RegisterSubscription), hs[0].state
        [err] = only(out, SendError)
        assert (err.code, err.id, err.code.retriable) == (ErrorCode.UNAVAILABLE, 1, True)
        assert (T0, "q") not in c.delivery.durables
    c = leading("a", **NO_GRACE)
    [reg] = only(commit(c, 1, 0, 0.1), RegisterSubscription)
    c.handle(SubscriptionRegistered(T0, "q", reg.offset, 0.1, era=reg.era))
    pub(c, 1, T0, "u1", "u2")
    view(c, sealed(2), 0.2)
    assert only(commit(c, 2, 1, 0.3), SendCommitted) == [SendCommitted("spark", 2, 1, 2)]


def test_a_commit_naming_no_group_at_a_group_that_no_longer_owns_the_topic_is_re_routed() -> None:
    """``commit()`` without ``group=`` means the owner's ts. Sent on a stale map to the
    group the slot left, it used to be read in that group's ts and answered with an empty
    success; now WRONG_GROUP names the owner, and nothing changes here. One naming another
    group's ts is a client's mistake: BAD_REQUEST."""
    c = leading("a", **NO_GRACE)
    [reg] = only(commit(c, 1, 0, 0.1), RegisterSubscription)
    c.handle(SubscriptionRegistered(T0, "q", reg.offset, 0.1, era=reg.era))
    pub(c, 1, T0, "u1", "u2")
    view(c, completed(2), 0.2)
    [err] = c.handle(ClientFrameIn("app", Commit(2, T0, "q", 2), 0.3))
    assert isinstance(err, SendError)
    assert (err.code, err.id, err.group) == (ErrorCode.WRONG_GROUP, 2, "g2")
    assert c.delivery.durables[(T0, "q")].offset == 0, "nothing acknowledged here"
    [err] = c.handle(ClientFrameIn("app", Commit(3, T0, "q", 2, "g2"), 0.3))
    assert isinstance(err, SendError)
    assert (err.code, err.id) == (ErrorCode.BAD_REQUEST, 3)
    out = c.handle(ClientFrameIn("app", Commit(4, T0, "q", 2, "g1"), 0.4))
    assert only(out, SendCommitted) and c.delivery.durables[(T0, "q")].offset == 2
