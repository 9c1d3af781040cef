"""Presence frames on both subprotocols: round trips, and bad input is a typed BAD_FRAME."""

from __future__ import annotations

import json
from typing import Any

import msgpack
import pytest

from tritonmq.errors import MalformedFrame
from tritonmq.wire import codec
from tritonmq.wire.frames import (
    BrokerFrame,
    ClientFrame,
    From,
    Join,
    Leave,
    Members,
    Presence,
    PresenceMember,
    Sub,
)
from tritonmq.wire.subprotocols import JSON, MSGPACK

ALICE = PresenceMember("b1.1", "alice", "Alice")


@pytest.mark.parametrize(
    "frame",
    [
        Sub(1, "room", None, From.LATEST, presence=True),
        Sub(2, "room", "s", From.EARLIEST, presence=True, info="Bob ☕"),
        Presence(3, "room"),
    ],
)
def test_client_presence_frames_round_trip_in_both_encodings(frame: ClientFrame) -> None:
    for c in (MSGPACK, JSON):
        assert c.decode_client(c.encode(frame)) == frame


@pytest.mark.parametrize(
    "frame",
    [
        Members(3, "room", (ALICE, PresenceMember("b1.2", "", ""))),
        Members(4, "room", ()),
        Join(1, "room", ALICE),
        Leave(1, "room", ALICE),
    ],
)
def test_broker_presence_frames_round_trip_in_both_encodings(frame: BrokerFrame) -> None:
    for c in (MSGPACK, JSON):
        assert c.decode_broker(c.encode(frame)) == frame


def test_a_sub_without_presence_fields_has_none() -> None:
    sub = codec.decode_client(msgpack.packb({"op": "sub", "sid": 1, "topic": "t"}))
    assert isinstance(sub, Sub) and not sub.presence and sub.info == ""
    nil = {"op": "sub", "sid": 1, "topic": "t", "presence": None, "info": None}
    assert codec.decode_client(msgpack.packb(nil)) == sub


SUB = {"op": "sub", "sid": 7, "topic": "t"}


@pytest.mark.parametrize(
    "fields",
    [
        {**SUB, "presence": 1},
        {**SUB, "presence": "yes"},
        {**SUB, "presence": True, "info": 5},
        {**SUB, "presence": True, "info": b"bytes"},
        {**SUB, "info": "Alice"},  # info without presence
        {"op": "presence", "id": 7},
        {"op": "presence", "id": 7, "topic": ""},
        {"op": "presence", "id": 7, "topic": 3},
    ],
)
def test_bad_presence_fields_are_bad_frames_naming_the_request(fields: dict[str, Any]) -> None:
    with pytest.raises(MalformedFrame) as e:
        codec.decode_client(msgpack.packb(fields, use_bin_type=True))
    assert (e.value.sid if "sid" in fields else e.value.id) == 7
    if all(isinstance(v, str | int | bool) for v in fields.values()):
        with pytest.raises(MalformedFrame):
            JSON.decode_client(json.dumps(fields))


@pytest.mark.parametrize(
    "fields",
    [
        {"op": "members", "id": 1, "topic": "t", "members": {}},
        {"op": "members", "id": 1, "topic": "t", "members": [["b1.1", "", ""]]},
        {"op": "join", "sid": 1, "topic": "t"},
        {"op": "leave", "sid": 1, "topic": "t", "member": {"client": 3}},
        {"op": "join", "topic": "t", "member": {}},
    ],
)
def test_bad_broker_presence_frames_are_refused_by_the_client(fields: dict[str, Any]) -> None:
    with pytest.raises(MalformedFrame):
        MSGPACK.decode_broker(msgpack.packb(fields))
