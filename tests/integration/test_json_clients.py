"""A tritonmq.v1.json connection (what a browser opens) is served like a tritonmq.v1 one,
and the two see each other's records with the same bytes."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
import websockets

from tests.integration.conftest import group_info, zk_url
from tritonmq import Client
from tritonmq.devtools.cluster import DevCluster
from tritonmq.wire.jsoncodec import JSON_SUBPROTOCOL

pytestmark = pytest.mark.integration


async def _next(ws: websockets.ClientConnection, op: str) -> dict[str, Any]:
    """The next frame with ``op`` (text: the JSON subprotocol never sends binary)."""
    while True:
        data = await asyncio.wait_for(ws.recv(), 10)
        assert isinstance(data, str)
        frame: dict[str, Any] = json.loads(data)
        if frame["op"] == op:
            return frame
        assert frame["op"] != "error", frame


async def test_json_and_msgpack_clients_exchange_text_and_binary(cluster: DevCluster) -> None:
    url = (await asyncio.to_thread(group_info, cluster))["primary_url"]
    async with (
        Client(zk_url(cluster)) as py,
        websockets.connect(url, subprotocols=[JSON_SUBPROTOCOL]) as browser,  # type: ignore[list-item]
    ):
        assert browser.subprotocol == JSON_SUBPROTOCOL
        await browser.send(json.dumps({"op": "hello", "client": "test-page"}))
        await browser.send(json.dumps({"op": "sub", "sid": 1, "topic": "room", "from": "latest"}))
        next_ts = (await _next(browser, "subok"))["next"]

        # the Python client's bytes arrive as text when UTF-8, as base64 otherwise
        text = await py.publish("room", "héllo".encode())
        raw = await py.publish("room", b"\xff\x00", headers={"kind": b"\x01", "n": 2})
        got = (await _next(browser, "deliver"))["records"]
        while len(got) < 2:
            got += (await _next(browser, "deliver"))["records"]
        assert [r[0] for r in got] == [text.ts, raw.ts] and text.ts >= next_ts
        assert got[0][3] == "héllo"
        assert got[1][3] == {"b64": "/wA="} and got[1][4] == {"kind": {"b64": "AQ=="}, "n": 2}
        await browser.send(json.dumps({"op": "ack", "sid": 1, "ts": [text.ts, raw.ts]}))

        # a float JSON cannot write (NaN from a tritonmq.v1 publisher) reaches it as a string
        odd = await py.publish("room", b"nan", headers={"f": float("nan")})
        (got_odd,) = (await _next(browser, "deliver"))["records"]
        assert got_odd[0] == odd.ts and got_odd[4] == {"f": "NaN"}
        await browser.send(json.dumps({"op": "ack", "sid": 1, "ts": odd.ts}))

        # the browser's publish reaches the Python subscriber as the same bytes
        async with py.subscribe("room", from_="earliest") as sub:
            pub = {
                "op": "pub",
                "id": 7,
                "topic": "room",
                "records": [[{"b64": "AAECAwQFBgcICQoLDA0ODw=="}, "alice", "hi ☕", None]],
            }
            await browser.send(json.dumps(pub))
            ack = await _next(browser, "puback")
            assert ack["id"] == 7 and len(ack["ts"]) == 1
            while (msg := await sub.get(timeout=10)).ts != ack["ts"][0]:
                pass
            assert msg.value == "hi ☕".encode() and msg.key == b"alice"

        # history over JSON: fetch returns what both published
        await browser.send(
            json.dumps(
                {"op": "fetch", "id": 8, "topic": "room", "from": text.ts, "to": ack["ts"][0]}
            )
        )
        fetched = await _next(browser, "fetched")
        values = [r[3] for r in fetched["records"]]
        assert values == ["héllo", {"b64": "/wA="}, "nan", "hi ☕"]

        # meta (where a topic's primary is) answers in JSON, slot map and groups included
        await browser.send(json.dumps({"op": "meta", "id": 9}))
        meta = await _next(browser, "meta")
        assert meta["id"] == 9 and meta["role"] == "primary" and meta["primary_url"] == url
