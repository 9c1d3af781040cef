"""Frame types and wire constants that clients in other languages are built against."""

from __future__ import annotations

import dataclasses

import pytest

from tritonmq.wire.frames import REPL_SUBPROTOCOL, SUBPROTOCOL, Ack, ErrorCode, From, Pub, Sub


def test_subprotocol_names() -> None:
    assert SUBPROTOCOL == "tritonmq.v1"
    assert REPL_SUBPROTOCOL == "tritonmq.repl.v1"


def test_error_codes_are_their_own_wire_strings() -> None:
    for code in ErrorCode:
        assert str(code) == code.value == code.name


def test_only_routing_and_capacity_errors_are_retriable() -> None:
    retriable = {code for code in ErrorCode if code.retriable}
    assert retriable == {
        ErrorCode.NOT_PRIMARY,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.UNAVAILABLE,
        ErrorCode.WRONG_GROUP,
        ErrorCode.FULL,
    }


def test_start_positions_match_the_protocol_words() -> None:
    assert From("latest") is From.LATEST
    assert From("earliest") is From.EARLIEST
    assert Sub(1, "t", None, From.LATEST).start == "latest"


def test_frames_are_immutable_values() -> None:
    ack = Ack(1, 5)
    assert ack == Ack(1, 5)
    assert hash(ack) == hash(Ack(1, 5))
    with pytest.raises(dataclasses.FrozenInstanceError):
        ack.ts = 6  # type: ignore[misc]
    assert not hasattr(Pub(1, "t", [(b"u", None, b"v", None)]), "__dict__")  # slotted: cheap
