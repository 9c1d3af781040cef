"""Many groups: topics map to slots, slots to groups, in ZooKeeper; clients route by the map."""

from __future__ import annotations

import asyncio

import pytest
import websockets

from tests.integration.conftest import group_info, zk_url
from tritonmq import Client
from tritonmq.core.slots import SlotMap
from tritonmq.devtools.cluster import DevCluster
from tritonmq.wire import codec
from tritonmq.wire.frames import SUBPROTOCOL

pytestmark = pytest.mark.integration


@pytest.fixture
def two_groups(make_cluster: object) -> DevCluster:
    return make_cluster(groups=2)  # type: ignore[operator,no-any-return]


async def test_topics_spread_over_groups_by_slot(two_groups: DevCluster) -> None:
    smap = SlotMap.from_dict(two_groups.status()["slots"])
    assert smap.groups == ["g1", "g2"] and smap.slots == 64
    topics = [f"room-{i}" for i in range(20)]
    assert {smap.group_of(t) for t in topics} == {"g1", "g2"}
    async with Client(zk_url(two_groups)) as c:
        subs = {t: c.subscribe(t, from_="latest") for t in topics}
        for s in subs.values():
            await s.__aenter__()
        acks = {
            t: await c.publish_many(t, [f"{t}:{i}".encode() for i in range(50)]) for t in topics
        }
        for t, got in acks.items():
            assert {a.group for a in got} == {smap.group_of(t)}, t
            msgs = [await subs[t].get(timeout=10) for _ in range(50)]
            assert [m.value for m in msgs] == [f"{t}:{i}".encode() for i in range(50)]
        for s in subs.values():
            s.close()


async def test_a_broker_refuses_a_topic_of_another_group(two_groups: DevCluster) -> None:
    smap = SlotMap.from_dict(two_groups.status()["slots"])
    topic = next(t for t in (f"t{i}" for i in range(100)) if smap.group_of(t) == "g2")
    url = group_info(two_groups, "g1")["primary_url"]
    async with websockets.connect(url, subprotocols=[SUBPROTOCOL]) as ws:  # type: ignore[list-item]
        records = [[b"0123456789abcdef", None, b"v", None]]
        await ws.send(codec.packb({"op": "pub", "id": 5, "topic": topic, "records": records}))
        reply = codec.decode_broker(await asyncio.wait_for(ws.recv(), 10))
        await ws.send(codec.packb({"op": "sub", "sid": 6, "topic": topic}))
        sub_reply = codec.decode_broker(await asyncio.wait_for(ws.recv(), 10))
    assert (reply["op"], reply["code"], reply["group"], reply["id"]) == (
        "error",
        "WRONG_GROUP",
        "g2",
        5,
    )
    assert (sub_reply["code"], sub_reply["sid"]) == ("WRONG_GROUP", 6)


async def test_a_ws_client_learns_the_map_from_any_broker(two_groups: DevCluster) -> None:
    seed = group_info(two_groups, "g2")["primary_url"]
    async with Client(seed) as c:
        acks = [await c.publish(f"topic-{i}", b"x") for i in range(20)]
    assert {a.group for a in acks} == {"g1", "g2"}
