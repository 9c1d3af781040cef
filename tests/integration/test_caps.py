"""Caps and names (issue 8) on real broker processes: a client that floods connections,
subscriptions or topics, or sends names ZooKeeper cannot store, is refused with a clear
error, and a well-behaved client on the same broker keeps getting acknowledgements."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import Any

import pytest
import websockets
from websockets.exceptions import InvalidStatus

from tests.integration.conftest import group_info, zk_url
from tritonmq import Client
from tritonmq.devtools.cluster import DevCluster
from tritonmq.wire import codec
from tritonmq.wire.frames import SUBPROTOCOL

pytestmark = pytest.mark.integration


def _cluster(make_cluster: Callable[..., DevCluster], **settings: Any) -> DevCluster:
    one = {"replicas": 1, "min_insync": 1, "retention_s": 300.0}
    return make_cluster(replicas=1, settings={**one, **settings})


async def _primary(c: DevCluster) -> str:
    url = (await asyncio.to_thread(group_info, c))["primary_url"]
    assert isinstance(url, str)
    return url


def _connect(url: str) -> Any:
    return websockets.connect(url, subprotocols=[SUBPROTOCOL], max_size=None, open_timeout=10)  # type: ignore[list-item]


async def _ask(ws: Any, frame: dict[str, Any]) -> dict[str, Any]:
    await ws.send(codec.packb(frame))
    return codec.decode_broker(await asyncio.wait_for(ws.recv(), 10))  # type: ignore[return-value]


def _pub(id: int, topic: str) -> dict[str, Any]:
    return {
        "op": "pub",
        "id": id,
        "topic": topic,
        "records": [[uuid.uuid4().bytes, None, b"v", None]],
    }


async def test_connections_past_the_cap_are_refused_with_503_and_others_are_served(
    make_cluster: Callable[..., DevCluster],
) -> None:
    c = _cluster(make_cluster, max_connections=8)
    url = await _primary(c)
    async with Client(zk_url(c)) as good:
        await good.publish("ok", b"first")
        flood: list[Any] = []
        try:
            refused = None
            for _ in range(20):  # the good client holds one (or two) of the 8
                try:
                    ws = await _connect(url)
                except InvalidStatus as e:
                    refused = e
                    break
                flood.append(ws)  # counted once it says hello (before, max_unauthenticated)
                assert (await _ask(ws, {"op": "hello"}))["op"] == "meta"
            assert refused is not None, "no connection was refused"
            assert refused.response.status_code == 503
            assert b"max_connections=8" in refused.response.body
            assert 6 <= len(flood) <= 7
            for i in range(3):
                assert (await good.publish("ok", b"still served %d" % i)).ts > 0
            await flood.pop().close()

            async def admitted() -> Any:  # the closed one's slot is free again
                while True:
                    try:
                        ws = await _connect(url)
                    except InvalidStatus:
                        await asyncio.sleep(0.05)
                        continue
                    assert (await _ask(ws, {"op": "hello"}))["op"] == "meta"
                    return ws

            flood.append(await asyncio.wait_for(admitted(), 10))
        finally:
            for ws in flood:
                await ws.close()


async def test_subscriptions_past_the_cap_get_limit_and_others_are_served(
    make_cluster: Callable[..., DevCluster],
) -> None:
    c = _cluster(make_cluster, max_subscriptions_per_conn=5)
    url = await _primary(c)
    async with Client(zk_url(c)) as good, good.subscribe("ok") as sub:
        async with _connect(url) as greedy:
            for sid in range(5):
                got = await _ask(greedy, {"op": "sub", "sid": sid, "topic": "ok", "from": "latest"})
                assert got["op"] == "subok", got
            got = await _ask(greedy, {"op": "sub", "sid": 99, "topic": "ok", "from": "latest"})
            assert (got["op"], got["code"], got["sid"]) == ("error", "LIMIT", 99)
            assert "max_subscriptions_per_conn=5" in got["message"] and got["retriable"] is False
            ack = await good.publish("ok", b"still served")
            assert (await sub.get(timeout=10)).ts == ack.ts


async def test_topics_past_the_cap_get_limit_and_others_are_served(
    make_cluster: Callable[..., DevCluster],
) -> None:
    c = _cluster(make_cluster, max_topics=20)
    url = await _primary(c)
    async with Client(zk_url(c)) as good:
        await good.publish("ok", b"first")
        async with _connect(url) as flood:
            refused = None
            for i in range(40):
                got = await _ask(flood, _pub(i, f"flood-{i}"))
                if got["op"] == "error":
                    refused = (i, got)
                    break
                assert got["op"] == "puback", got
            assert refused is not None, "no topic was refused"
            i, err = refused
            assert i == 19, "the good client's topic and 19 of the flood's make 20"
            assert (err["code"], err["id"]) == ("LIMIT", 19) and "max_topics=20" in err["message"]
            got = await _ask(flood, {"op": "sub", "sid": 1, "topic": "one-more", "from": "latest"})
            assert (got["op"], got["code"]) == ("error", "LIMIT")
            for n in range(3):
                assert (await good.publish("ok", b"still served %d" % n)).ts > 0
            got = await _ask(flood, _pub(100, "flood-0"))  # an existing topic is fine
            assert got["op"] == "puback", got


async def test_names_zookeeper_cannot_store_get_bad_request_naming_the_rule(
    make_cluster: Callable[..., DevCluster],
) -> None:
    c = _cluster(make_cluster)
    url = await _primary(c)
    async with Client(zk_url(c)) as good, _connect(url) as bad:
        cases = [
            (_pub(1, "a/b"), "'/'"),
            (_pub(2, ".."), "reserved"),
            (_pub(3, "bell\x07"), "control characters"),
            (
                {"op": "sub", "sid": 4, "topic": "t", "subscription": ".", "from": "latest"},
                "reserved",
            ),
            ({"op": "commit", "id": 5, "topic": "t", "subscription": "x/y", "ts": 0}, "'/'"),
        ]
        for frame, rule in cases:
            got = await _ask(bad, frame)
            assert (got["op"], got["code"]) == ("error", "BAD_REQUEST"), got
            assert rule in got["message"], got
            assert got.get("id", got.get("sid")) == frame.get("id", frame.get("sid"))
            assert (await good.publish("ok", b"served")).ts > 0
