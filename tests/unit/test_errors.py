"""The error tree: wire codes map to typed exceptions a caller can catch and retry on."""

from __future__ import annotations

import pytest

from tritonmq import errors
from tritonmq.errors import (
    BrokerError,
    Full,
    NotEnoughReplicas,
    NotPrimary,
    Purged,
    RequestRejected,
    RetriableError,
    TritonError,
    Unavailable,
    WrongGroup,
    error_from_wire,
)
from tritonmq.wire import codec
from tritonmq.wire.frames import ErrorCode


def test_not_primary_carries_where_the_primary_is() -> None:
    err = error_from_wire("NOT_PRIMARY", "ask b", True, primary="ws://b:7000")
    assert type(err) is NotPrimary
    assert err.primary_url == "ws://b:7000"
    assert err.retriable and err.code == "NOT_PRIMARY" and err.message == "ask b"
    unknown = error_from_wire("NOT_PRIMARY", "unknown", True)
    assert isinstance(unknown, NotPrimary) and unknown.primary_url is None


@pytest.mark.parametrize(
    ("code", "cls"),
    [
        ("NOT_ENOUGH_REPLICAS", NotEnoughReplicas),
        ("UNAVAILABLE", Unavailable),
        ("FULL", Full),
        ("WRONG_GROUP", WrongGroup),
    ],
)
def test_retriable_codes_map_to_their_types(code: str, cls: type[BrokerError]) -> None:
    err = error_from_wire(code, "later", True)
    assert type(err) is cls
    assert isinstance(err, RetriableError)
    assert err.retriable and err.code == code


@pytest.mark.parametrize("code", ["BAD_REQUEST", "BAD_FRAME", "TOO_LARGE", "STALE_EPOCH"])
def test_non_retriable_codes_are_rejections_that_keep_their_code(code: str) -> None:
    err = error_from_wire(code, "no", False)
    assert type(err) is RequestRejected
    assert not err.retriable
    assert err.code == code


def test_unknown_codes_follow_the_frames_retriable_flag() -> None:
    later = error_from_wire("SOMETHING_NEW", "x", True)
    assert type(later) is RetriableError and later.retriable and later.code == "SOMETHING_NEW"
    never = error_from_wire("SOMETHING_ELSE", "x", False)
    assert type(never) is RequestRejected and not never.retriable


@pytest.mark.parametrize("code", list(ErrorCode))
def test_every_error_frame_becomes_a_typed_error_with_the_same_code_and_flag(
    code: ErrorCode,
) -> None:
    frame = codec.decode_broker(codec.enc_error(code, "m", id=1, primary="ws://p:1"))
    err = error_from_wire(frame["code"], frame["message"], frame["retriable"], frame.get("primary"))
    assert isinstance(err, BrokerError)
    assert err.code == code.value
    assert err.retriable is code.retriable
    assert str(err) == "m"


def test_protocol_errors_use_wire_error_codes() -> None:
    # The broker answers a bad frame with an error frame whose code is the exception's code.
    for cls in (
        errors.ProtocolError,
        errors.FrameTooLarge,
        errors.MalformedFrame,
        errors.UnknownOp,
    ):
        assert ErrorCode(cls.code).retriable is False
    assert errors.FrameTooLarge.code == ErrorCode.TOO_LARGE
    assert errors.UnknownOp.code == ErrorCode.UNKNOWN_OP


def test_everything_is_a_triton_error() -> None:
    for cls in (
        errors.ConfigError,
        errors.ProtocolError,
        errors.BrokerError,
        errors.ReplicationError,
        errors.StaleEpoch,
        errors.LogGap,
        errors.CoordinationError,
        errors.ClientError,
        errors.PublishTimeout,
        errors.ClientClosed,
    ):
        assert issubclass(cls, TritonError)


def test_client_side_retriable_flags() -> None:
    assert errors.PublishTimeout().retriable
    assert not errors.ClientClosed().retriable
    assert not errors.StaleEpoch().retriable


def test_code_can_be_overridden_per_instance() -> None:
    err = TritonError("boom", code="CUSTOM")
    assert err.code == "CUSTOM" and err.message == "boom"
    assert TritonError("x").code == "INTERNAL"


def test_a_known_codes_retriable_flag_comes_from_error_code_not_the_frame() -> None:
    assert type(error_from_wire("BAD_REQUEST", "x", True)) is RequestRejected
    assert type(error_from_wire("FULL", "x", False)) is Full
    purged = error_from_wire("PURGED", "gone", False, first=3, last=9)
    assert isinstance(purged, Purged) and (purged.first, purged.last) == (3, 9)


@pytest.mark.parametrize(
    ("code", "cls"),
    [
        ("UNAUTHENTICATED", errors.Unauthenticated),
        ("TOKEN_EXPIRED", errors.TokenExpired),
        ("FORBIDDEN", errors.Forbidden),
    ],
)
def test_security_refusals_are_typed_rejections(code: str, cls: type[RequestRejected]) -> None:
    err = error_from_wire(code, "no", True)  # the code decides, not the frame's flag
    assert type(err) is cls and isinstance(err, RequestRejected)
    assert not err.retriable and err.code == code
