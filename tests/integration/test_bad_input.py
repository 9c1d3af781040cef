"""Hostile and broken clients get typed errors; everyone else keeps being served."""

from __future__ import annotations

import asyncio
import json
import random

import pytest
import websockets
from websockets.exceptions import ConnectionClosed

from tests.integration.conftest import group_info, zk_url
from tritonmq import Client
from tritonmq.devtools.cluster import DevCluster
from tritonmq.wire import codec
from tritonmq.wire.frames import SUBPROTOCOL
from tritonmq.wire.jsoncodec import JSON_SUBPROTOCOL

pytestmark = pytest.mark.integration


async def _reply(ws: websockets.ClientConnection, data: bytes | str) -> dict[str, object]:
    await ws.send(data)
    return codec.decode_broker(await asyncio.wait_for(ws.recv(), 10))


async def test_bad_frames_get_error_frames_and_others_are_served(cluster: DevCluster) -> None:
    url = (await asyncio.to_thread(group_info, cluster))["primary_url"]
    async with Client(zk_url(cluster)) as good:
        async with good.subscribe("ok") as sub:
            async with websockets.connect(url, subprotocols=[SUBPROTOCOL], max_size=None) as bad:  # type: ignore[list-item]
                # hello first, as every client does: before it a message is at most
                # max_hello_bytes (64 KiB), and some cases below are larger
                assert (await _reply(bad, codec.packb({"op": "hello"})))["op"] == "meta"
                cases: list[tuple[bytes | str, str]] = [
                    (b"\xc1\xff garbage \x00", "BAD_FRAME"),
                    # seeded: random bytes whose first byte reads as a map header of 257..4096
                    # entries would be a map over its limit, TOO_LARGE, now and then
                    (random.Random(0).randbytes(4096), "BAD_FRAME"),
                    ("a text frame", "BAD_FRAME"),
                    (codec.packb([1, 2, 3]), "BAD_FRAME"),
                    (codec.packb({"op": 42}), "BAD_FRAME"),
                    (codec.packb({"op": "teleport"}), "UNKNOWN_OP"),
                    (
                        codec.packb({"op": "pub", "id": 1, "topic": "t", "records": "nope"}),
                        "BAD_FRAME",
                    ),
                    (
                        codec.packb(
                            {
                                "op": "pub",
                                "id": 1,
                                "topic": 5,
                                "records": [[b"u", None, b"v", None]],
                            }
                        ),
                        "BAD_FRAME",
                    ),
                    (
                        codec.packb(
                            {
                                "op": "pub",
                                "id": -1,
                                "topic": "t",
                                "records": [[b"u", None, b"v", None]],
                            }
                        ),
                        "BAD_FRAME",
                    ),
                    (
                        codec.packb(
                            {
                                "op": "pub",
                                "id": 1,
                                "topic": "t",
                                "records": [[b"u", None, "str", None]],
                            }
                        ),
                        "BAD_FRAME",
                    ),
                    (
                        codec.packb(
                            {
                                "op": "pub",
                                "id": 1,
                                "topic": "t",
                                "records": [[b"u", None, b"v", None]] * 20_000,
                            }
                        ),
                        "TOO_LARGE",
                    ),
                    (
                        codec.packb({"op": "sub", "sid": 1, "topic": "t", "from": "yesterday"}),
                        "BAD_FRAME",
                    ),
                    (codec.packb({"op": "ack", "sid": "x", "ts": 1}), "BAD_FRAME"),
                ]
                for data, code in cases:
                    reply = await _reply(bad, data)
                    assert reply["op"] == "error" and reply["code"] == code, (data[:40], reply)
                    assert reply["retriable"] is False and isinstance(reply["message"], str)
                    ack = await good.publish("ok", b"still served")
                    assert (await sub.get(timeout=10)).ts == ack.ts

            # A frame over max_frame_bytes is refused by the websocket layer with close code 1009.
            # (No `async with`: the broker closes it, and closing it again from here races
            # the send of the large frame inside asyncio's transport.)
            big = await websockets.connect(url, subprotocols=[SUBPROTOCOL], max_size=None)  # type: ignore[list-item]
            await big.send(b"\x00" * (9 * 1024 * 1024))
            with pytest.raises(ConnectionClosed) as closed:
                await asyncio.wait_for(big.recv(), 10)
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009

            # Not websocket at all.
            host, port = url.removeprefix("ws://").rsplit(":", 1)
            reader, writer = await asyncio.open_connection(host, int(port))
            writer.write(b"\x16\x03\x01 this is not HTTP\r\n\r\n")
            await writer.drain()
            await asyncio.wait_for(reader.read(), 10)
            writer.close()

            ack = await good.publish("ok", b"after all that")
            assert (await sub.get(timeout=10)).ts == ack.ts


def _text(frame: dict[str, object]) -> str:
    return json.dumps(frame)


async def _text_reply(ws: websockets.ClientConnection, data: bytes | str) -> dict[str, object]:
    await ws.send(data)
    reply = await asyncio.wait_for(ws.recv(), 10)
    assert isinstance(reply, str), "a tritonmq.v1.json connection is answered in text frames"
    decoded: dict[str, object] = json.loads(reply)
    return decoded


async def test_bad_text_frames_get_error_frames_and_others_are_served(cluster: DevCluster) -> None:
    """The cases above for tritonmq.v1.json, plus what only text can get wrong (not JSON,
    nesting, base64, NaN); the request's id or sid is named when it can be read."""
    url = (await asyncio.to_thread(group_info, cluster))["primary_url"]
    rec = ["u", None, "v", None]
    deep: object = 0
    for _ in range(20):  # past the codec's nesting bound, well within the parser's
        deep = [deep]
    cases: list[tuple[bytes | str, str, dict[str, int]]] = [
        ("not json at all", "BAD_FRAME", {}),
        ('{"op": "pub", "id": 3, ', "BAD_FRAME", {}),
        (_text({"op": "pub"}).encode(), "BAD_FRAME", {}),  # a binary frame on the text protocol
        ("[1, 2, 3]", "BAD_FRAME", {}),
        ("[" * 100_000 + "]" * 100_000, "BAD_FRAME", {}),
        ("[" + "[]," * 2_700_000 + "[]]", "TOO_LARGE", {}),  # 2.7M values in 8 MB
        (_text({"op": "pub", "id": 4, "deep": deep}), "BAD_FRAME", {"id": 4}),
        (_text({"op": 42}), "BAD_FRAME", {}),
        (_text({"op": "teleport", "id": 5}), "UNKNOWN_OP", {"id": 5}),
        (_text({"op": "pub", "id": 6, "topic": "t", "records": "nope"}), "BAD_FRAME", {"id": 6}),
        (_text({"op": "pub", "id": 7, "topic": 5, "records": [rec]}), "BAD_FRAME", {"id": 7}),
        (_text({"op": "pub", "id": -1, "topic": "t", "records": [rec]}), "BAD_FRAME", {}),
        (
            _text({"op": "pub", "id": 8, "topic": "t", "records": [["u", None, 3, None]]}),
            "BAD_FRAME",
            {"id": 8},
        ),
        (
            _text(
                {"op": "pub", "id": 9, "topic": "t", "records": [["u", None, {"b64": "%%"}, None]]}
            ),
            "BAD_FRAME",
            {"id": 9},
        ),
        (
            _text({"op": "pub", "id": 10, "topic": "t", "records": [rec] * 20_000}),
            "TOO_LARGE",
            {"id": 10},
        ),
        (
            _text({"op": "sub", "sid": 11, "topic": "t", "from": "yesterday"}),
            "BAD_FRAME",
            {"sid": 11},
        ),
        (_text({"op": "ack", "sid": "x", "ts": 1}), "BAD_FRAME", {}),
        ('{"op": "ack", "sid": 12, "ts": NaN}', "BAD_FRAME", {}),
        (r'{"op": "sub", "sid": 14, "topic": "\ud800"}', "BAD_FRAME", {"sid": 14}),
        (
            r'{"op": "pub", "id": 15, "topic": "t", "records": [["u", null, "\udfff", null]]}',
            "BAD_FRAME",
            {"id": 15},
        ),
        (_text({"op": "ack", "sid": 13, "ts": 2**53}), "BAD_FRAME", {"sid": 13}),
    ]
    async with Client(zk_url(cluster)) as good:
        async with good.subscribe("ok") as sub:
            async with websockets.connect(
                url, subprotocols=[JSON_SUBPROTOCOL], max_size=None
            ) as bad:  # type: ignore[list-item]
                assert bad.subprotocol == JSON_SUBPROTOCOL
                assert (await _text_reply(bad, _text({"op": "hello"})))["op"] == "meta"
                for data, code, named in cases:
                    reply = await _text_reply(bad, data)
                    assert reply["op"] == "error" and reply["code"] == code, (data[:40], reply)
                    assert reply["retriable"] is False and isinstance(reply["message"], str)
                    assert {k: reply[k] for k in ("id", "sid") if k in reply} == named
                    ack = await good.publish("ok", b"still served")
                    assert (await sub.get(timeout=10)).ts == ack.ts

            big = await websockets.connect(url, subprotocols=[JSON_SUBPROTOCOL], max_size=None)  # type: ignore[list-item]
            await big.send('"' + "x" * (9 * 1024 * 1024) + '"')
            with pytest.raises(ConnectionClosed) as closed:
                await asyncio.wait_for(big.recv(), 10)
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009

            ack = await good.publish("ok", b"after all that")
            assert (await sub.get(timeout=10)).ts == ack.ts
