"""The golden vectors file (clients/vectors/frames.json): both codecs agree on every op."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tritonmq.devtools import vectors
from tritonmq.wire.frames import BrokerFrame, ClientFrame
from tritonmq.wire.jsoncodec import map_of
from tritonmq.wire.subprotocols import JSON, MSGPACK

FILE = Path(__file__).resolve().parents[2] / "clients" / "vectors" / "frames.json"
VECTORS: list[dict[str, Any]] = json.loads(FILE.read_text(encoding="utf-8"))


def test_the_file_is_what_the_generator_writes() -> None:
    """A change to the wire shows up as a diff of the file, reviewed with the change."""
    assert FILE.read_text(encoding="utf-8") == vectors.render()


def test_every_op_is_covered_both_ways() -> None:
    ops = {(v["direction"], v["decoded"]["op"]) for v in VECTORS}
    client = {"hello", "pub", "ack", "nack", "sub", "unsub", "meta", "fetch", "commit"}
    broker = {"puback", "deliver", "subok", "fetched", "committed", "meta", "error", "subinfo"}
    assert {("client", op) for op in client | {"subdel", "subreset", "presence"}} <= ops
    assert {("broker", op) for op in broker | {"members", "join", "leave"}} <= ops


def _decode(v: dict[str, Any], data: bytes | str, codec: Any) -> ClientFrame | BrokerFrame:
    if v["direction"] == "client":
        frame: ClientFrame | BrokerFrame = codec.decode_client(data)
    else:
        frame = codec.decode_broker(data)
    return frame


@pytest.mark.parametrize("v", VECTORS, ids=[v["name"] for v in VECTORS])
def test_both_encodings_decode_to_the_same_frame_and_encode_back(v: dict[str, Any]) -> None:
    packed = bytes.fromhex(v["msgpack"])
    from_msgpack = _decode(v, packed, MSGPACK)
    from_json = _decode(v, v["json"], JSON)
    assert from_json == from_msgpack
    assert MSGPACK.encode(from_json) == packed
    assert JSON.encode(from_msgpack) == v["json"]
    assert vectors.decoded(map_of(packed)) == v["decoded"]


def test_text_travels_as_text_and_other_bytes_as_base64() -> None:
    by_name = {v["name"]: v for v in VECTORS}
    pub = json.loads(by_name["pub binary value, text key, headers"]["json"])
    first, second = pub["records"]
    assert first[1] == "device-7"  # UTF-8 key: text
    assert first[2] == {"b64": "AP8Q"}  # not UTF-8: base64
    assert first[3]["raw"] == {"b64": "/gE="}  # a binary header value: always base64
    assert second[2] == "café ☕"
