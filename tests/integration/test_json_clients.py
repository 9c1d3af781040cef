"""A tritonmq.v1.json connection (what a browser opens) is served like a tritonmq.v1 one,
and the two see each other's records with the same bytes."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Callable
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


async def test_a_json_fetch_answer_is_cut_by_its_encoded_size(
    make_cluster: Callable[..., DevCluster],
) -> None:
    """Issue 26: fetch answers were cut at 4 MiB of records as the log counts them, but JSON
    writes a control byte as ``\\u0001`` (6 bytes) and other bytes as base64: 4 MiB of such
    values made one 24 MiB ``fetched`` frame for an 80-byte request, past the 16 MiB outbound
    cap. Now the answer is cut by its JSON size, and ``next`` pages through the rest."""
    c = make_cluster(replicas=1, settings={"replicas": 1, "min_insync": 1, "retention_s": 300.0})
    url = (await asyncio.to_thread(group_info, c))["primary_url"]
    escaped = [bytes([1]) * (512 * 1024) for _ in range(6)]  # valid UTF-8, each byte 6 in JSON
    binary = [bytes([0xFF, i]) * (256 * 1024) for i in range(2)]  # not UTF-8: base64
    async with Client(zk_url(c)) as py:
        acks = await py.publish_many("bin", [*escaped, *binary])
    async with websockets.connect(
        url,
        subprotocols=[JSON_SUBPROTOCOL],  # type: ignore[list-item]
        max_size=None,
    ) as browser:
        await browser.send(json.dumps({"op": "hello", "client": "test-page"}))
        await _next(browser, "meta")
        got: list[list[Any]] = []
        start, sizes = 1, []
        while len(got) < len(acks):
            fetch = {"op": "fetch", "id": len(sizes), "topic": "bin", "from": start, "to": 2**40}
            await browser.send(json.dumps(fetch))
            data = await asyncio.wait_for(browser.recv(), 20)
            assert isinstance(data, str)
            sizes.append(len(data.encode()))
            frame = json.loads(data)
            assert frame["op"] == "fetched", frame
            got += frame["records"]
            start = frame["next"]
        assert max(sizes) <= 16 * 1024 * 1024, f"fetched frames of {sizes} bytes"
        assert max(sizes) <= 4 * 1024 * 1024 + 4096, f"fetched frames of {sizes} bytes"
        assert [r[0] for r in got] == [a.ts for a in acks]
        assert [r[3] for r in got[:6]] == [v.decode() for v in escaped]
        assert [base64.b64decode(r[3]["b64"]) for r in got[6:]] == binary
