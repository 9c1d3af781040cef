"""A group that becomes the owner of a moved slot's new era reads the durable subscriptions
ZooKeeper holds before it purges anything (docs/replication.md M5): one stored at the old
era is pending here and holds every record of the new era, which a purge on commit would
otherwise drop before anyone read it (a Spark query failed with data loss, retention 0)."""

from __future__ import annotations

from collections.abc import Sequence

from tests.unit.test_moves import T0, leading, only, pub, view
from tests.unit.test_readers import completed, ticks
from tritonmq.core.actions import Action, LoadSubscriptions, SendPurge
from tritonmq.core.events import SubscriptionsLoaded


def purged(out: Sequence[Action]) -> dict[str, int]:
    return {t: upto for p in only(out, SendPurge) for t, upto in p.purge.topics}


def test_the_new_owner_purges_none_of_its_era_before_it_read_the_subscriptions() -> None:
    x = leading("x", "g2", ephemeral_grace=0.0)
    [load] = only(view(x, completed(9), 0.1), LoadSubscriptions)
    pub(x, 1, T0, "n1", "n2", now=0.2)
    assert T0 not in purged(ticks(x, 0.3)), "nothing purged before the subscriptions are read"
    held = [(T0, "q", "broadcast", 5)]  # stored at era 0: g1's until it hands it on
    x.handle(SubscriptionsLoaded(load.request, held, 1.0))
    assert x.delivery.durables[(T0, "q")].pending
    assert T0 not in purged(ticks(x, 1.1)), "its era is kept for the pending subscription"


def test_a_view_that_brings_no_new_era_asks_for_no_load() -> None:
    x = leading("x", "g2", ephemeral_grace=0.0)
    view(x, completed(9), 0.1)
    assert not only(view(x, completed(9), 0.2), LoadSubscriptions)
    c = leading("a", ephemeral_grace=0.0)
    assert not only(view(c, completed(9), 0.1), LoadSubscriptions), "g1 owns no new era"
