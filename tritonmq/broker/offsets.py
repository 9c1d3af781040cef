"""The primary's ZooKeeper chores for subscriptions, and purge.

Every ``offset_interval``: write changed offsets (one transaction), then purge
what every subscription has let go of, as far as ZooKeeper holds it, and tell
the backups to purge the same. A new primary first loads every durable
subscription of its topics; until then it purges nothing.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

import websockets

from tritonmq.core.actions import RegisterSubscription, StoreOffsets
from tritonmq.core.replication import PrimaryCore
from tritonmq.wire import codec

if TYPE_CHECKING:
    from tritonmq.broker.node import Broker

log = logging.getLogger("tritonmq.offsets")


async def load(broker: Broker, p: PrimaryCore) -> None:
    """Resume every durable subscription of our topics from ZooKeeper."""
    while broker.primary is p:
        try:
            found = await broker.offsets.load(lambda t: broker.other_owner(t) is None)
        except Exception as e:  # ZooKeeper unreachable: writes are refused anyway; try again
            log.warning("loading subscriptions failed: %s; retrying", e)
            await asyncio.sleep(0.2)
            continue
        if broker.primary is p:
            broker.delivery.load(found)
            broker.durables_ready.set()
            log.info("resumed %d durable subscription(s) from ZooKeeper", len(found))
        return


async def register(broker: Broker, a: RegisterSubscription) -> None:
    try:
        held = await broker.offsets.register(a.topic, a.name, a.mode, a.offset)
    except Exception as e:
        log.warning("registering subscription %s/%s failed: %s", a.topic, a.name, e)
        return
    broker.delivery.registered(a.topic, a.name, held)


async def flush(broker: Broker, due: StoreOffsets) -> bool:
    try:
        await broker.offsets.store(due.offsets)
    except Exception as e:
        log.warning("storing %d offset(s) failed: %s", len(due.offsets), e)
        return False
    broker.delivery.stored(due.offsets)
    return True


def purge(broker: Broker, p: PrimaryCore) -> None:
    d = broker.delivery
    now = time.monotonic()
    if not d.may_purge(now):
        return
    topics = [t for t, tl in broker.log.topics.items() if tl.records]
    points = broker.retention.purge_points(topics, d.holds(), p.commit_ts, now)
    frame = p.purge(points, broker.retention.forget_point(now))
    if frame is not None and broker.repl_links:
        websockets.broadcast(list(broker.repl_links.values()), codec.enc_purge(frame))


async def run(broker: Broker) -> None:
    """Flush offsets and purge, every ``offset_interval`` while we are primary."""
    while True:
        await asyncio.sleep(broker.cfg.offset_interval)
        p = broker.primary
        if p is None:
            continue
        due = broker.delivery.offsets_to_store()
        if due is not None:
            await flush(broker, due)
        if broker.primary is p:
            purge(broker, p)


async def flush_now(broker: Broker) -> None:
    """On a clean stop: write every changed offset before the session closes."""
    due = broker.delivery.offsets_to_store()
    if due is not None:
        await flush(broker, due)
