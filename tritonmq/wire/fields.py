"""The checks every decoder applies to a frame's fields, shared by the codecs of both
subprotocols (``tritonmq.v1`` in :mod:`~tritonmq.wire.codec`, its stats and presence parts,
and ``tritonmq.repl.v1`` in :mod:`~tritonmq.wire.repl`): each returns the field or raises
:class:`~tritonmq.errors.MalformedFrame` naming it."""

from __future__ import annotations

from typing import Any

from tritonmq.errors import MalformedFrame

MAX_SAFE_INT = 2**53 - 1  # every integer on the wire: JavaScript numbers stay exact


def opt(obj: dict[str, Any], key: str, default: Any) -> Any:
    """An optional field: absent and nil both mean the default (JavaScript encoders write
    ``undefined`` as nil)."""
    v = obj.get(key)
    return default if v is None else v


def int_field(
    obj: dict[str, Any], key: str, *, minimum: int = 0, default: int | None = None
) -> int:
    v = opt(obj, key, default)
    if type(v) is not int or not minimum <= v <= MAX_SAFE_INT:
        raise MalformedFrame(f"'{key}' must be an integer from {minimum} to 2^53 - 1")
    return v


def ts_ok(t: Any) -> bool:
    return type(t) is int and 0 <= t <= MAX_SAFE_INT


def str_field(obj: dict[str, Any], key: str, *, max_len: int, optional: bool = False) -> str:
    v = obj.get(key)
    if v is None and optional:
        return ""
    if not isinstance(v, str) or not v or len(v) > max_len:
        raise MalformedFrame(f"'{key}' must be a non-empty string of at most {max_len} characters")
    return v


def bin_field(obj: dict[str, Any], key: str, *, max_len: int, optional: bool = False) -> bytes:
    v = obj.get(key)
    if v is None and optional:
        return b""
    if type(v) is not bytes or len(v) > max_len:
        raise MalformedFrame(f"'{key}' must be binary of at most {max_len} bytes")
    return v


def headers_field(h: Any) -> dict[str, Any] | None:
    if h is None:
        return None
    if not isinstance(h, dict) or len(h) > 64:
        raise MalformedFrame("headers must be a map of at most 64 entries")
    for k, v in h.items():
        if not isinstance(k, str) or not isinstance(v, str | bytes | int | float | bool):
            raise MalformedFrame("header names are strings; values are str, bytes or numbers")
        if type(v) is int and not -MAX_SAFE_INT <= v <= MAX_SAFE_INT:
            raise MalformedFrame("a header's integer value must be within +-(2^53 - 1)")
    return h


def opt_int(obj: dict[str, Any], key: str) -> int | None:
    v = obj.get(key)
    if v is None:
        return None
    if not ts_ok(v):
        raise MalformedFrame(f"'{key}' must be an integer from 0 to 2^53 - 1")
    return v


def opt_str(obj: dict[str, Any], key: str) -> str | None:
    v = obj.get(key)
    if v is None:
        return None
    if not isinstance(v, str):
        raise MalformedFrame(f"'{key}' must be a string")
    return v


def str_map(raw: Any, key: str) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise MalformedFrame(f"'{key}' must be a map")
    return raw


def published_pairs(obj: dict[str, Any]) -> tuple[tuple[int, int], ...]:
    published = obj.get("published", ())
    if type(published) is not tuple or not all(
        type(p) is tuple and len(p) == 2 and type(p[0]) is int and type(p[1]) is int
        for p in published
    ):
        raise MalformedFrame("'published' must be an array of [first_ts, ms]")
    return published
