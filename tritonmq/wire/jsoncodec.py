"""``tritonmq.v1.json``: the ``tritonmq.v1`` ops as JSON text frames, for browsers.

A JSON frame is the msgpack frame's map with two changes: arrays are JSON arrays, and
a binary field (a record's uuid, key and value; a header's binary value) is a JSON
string when its bytes are valid UTF-8, else ``{"b64": "<standard base64>"}``. Text
therefore stays readable and a chat message published as text arrives as text, while
any bytes still round-trip. Header values are the one exception: a JSON string there
already means a *string* header, so a binary header value is always ``{"b64": ...}``
and its type survives the trip (docs/protocol.md §"tritonmq.v1.json").

Decoding turns the JSON into exactly the shape msgpack decoding gives (tuples for
arrays, bytes for binary fields) and runs the same checks (:func:`codec._client_frame`,
:func:`codec._broker_frame`): there is one validator. Encoding goes the other way from
the msgpack encoders' maps, so both subprotocols carry the same fields by construction.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from typing import Any

import msgpack

from tritonmq.errors import FrameTooLarge, MalformedFrame, ProtocolError
from tritonmq.wire.codec import (
    MAX_ACK_TS,
    MAX_MAP_LEN,
    _broker_frame,
    _client_frame,
    _frame_map,
    enc_broker,
    enc_client,
    paused_gc,
)
from tritonmq.wire.fields import ts_ok
from tritonmq.wire.frames import (
    BROKER_FRAMES,
    BrokerFrame,
    ClientFrame,
)
from tritonmq.wire.limits import CodecLimits

JSON_SUBPROTOCOL = "tritonmq.v1.json"
MAX_DEPTH = 16
"""JSON nesting a frame may have (a frame needs 5: frame, records, record, headers, b64)."""

# Which positions of a record are binary: pub records are [uuid, key, value, headers];
# delivered and fetched records are [ts, uuid, key, value, headers].
_PUB_BIN = (0, 1, 2)
_DELIVERED_BIN = (1, 2, 3)
_RECORD_OPS = {"pub": (_PUB_BIN, 3), "deliver": (_DELIVERED_BIN, 4), "fetched": (_DELIVERED_BIN, 4)}


_STRING = re.compile(r'"[^"]*+"')
"""A string literal once its escaped backslashes and quotes are gone: possessive, so an
unterminated one fails once at the end of the text instead of backtracking."""

_BRACKETS = bytes.maketrans(b"{}", b"[]")
_NOT_BRACKETS = bytes(c for c in range(256) if c not in b"[]{}")

_DIGITS = bytes.maketrans(b"123456789", b"000000000")
_LONG_INT = b"0" * 17
"""More than 16 digits in a row: an integer (if it is one) beyond 2^53 - 1."""

_BEYOND = 2**53
"""What an integer of more than 16 digits reads as: past 2^53 - 1 like the number itself,
so every field refuses it as it would the number (naming the request), never converted."""

_tuples = msgpack.Packer(use_bin_type=True, strict_types=False).pack


def _skeleton(text: str) -> str:
    """``text`` with its strings taken out, in time linear in its length.

    Inside a string a backslash escapes the one character after it, so once every ``\\\\``
    and then every ``\\"`` is gone (left to right, as a parser pairs them) the quotes left
    are the strings' delimiters. A backslash outside a string ends a parse, so nothing a
    parser would build hides from the count.
    """
    return _STRING.sub("", text.replace("\\\\", "").replace('\\"', ""))


def _structure(text: str) -> int:
    """At least as many as the values a JSON text holds in containers, if its strings are out."""
    return text.count(",") + text.count("[") + text.count("{")


def _deeper_than(skeleton: str, depth: int) -> bool:
    """Whether containers nest more than ``depth`` deep: each round (one linear pass) takes out
    every container holding no other, so ``depth`` rounds leave none unless some nest deeper."""
    brackets = skeleton.encode("utf-8", "surrogatepass").translate(_BRACKETS, _NOT_BRACKETS)
    for _ in range(depth):
        if not brackets:
            return False
        brackets = brackets.replace(b"[]", b"")
    return bool(brackets)


def _refuse_constant(name: str) -> Any:
    raise MalformedFrame(f"{name} is not a JSON number")


def _int(digits: str) -> int:
    """A JSON integer, converted only when it may be within the wire's 2^53 - 1: int() of
    a long digit string is quadratic (thousands of digits cost ~0.1 ms each)."""
    if len(digits) - (digits[0] == "-") > 16:
        return -_BEYOND if digits[0] == "-" else _BEYOND
    return int(digits)


class _Parse:
    """The hooks of one ``json.loads``: objects with duplicate keys or too many entries and
    numbers JSON cannot write back are noted while parsing and refused after it, when the
    frame's ``id``/``sid`` can name the request."""

    def __init__(self) -> None:
        self.refused: ProtocolError | None = None
        self.duplicated: set[str] = set()

    def pairs(self, pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        obj = dict(pairs)
        if len(pairs) > MAX_MAP_LEN:
            self._refuse(FrameTooLarge(f"a map of {len(pairs)} entries exceeds {MAX_MAP_LEN}"))
        elif len(obj) < len(pairs):
            self._duplicate(pairs)
        return obj

    def _duplicate(self, pairs: list[tuple[str, Any]]) -> None:
        """JSON.parse keeps the last of equal keys, other parsers the first or both: a frame
        that means different things to different readers is refused."""
        seen: set[str] = set()
        for k, _ in pairs:
            if k in seen:
                self.duplicated.add(k)
                self._refuse(MalformedFrame(f"duplicate key {k[:40]!r} in an object"))
                return
            seen.add(k)

    def number(self, text: str) -> float:
        v = float(text)
        if not math.isfinite(v):
            # 1e400 parses as infinity, which no JSON encoder writes back (a subscriber's
            # ``deliver`` would fail), so it is refused here
            self._refuse(MalformedFrame("a number is out of range"))
        return v

    def _refuse(self, e: ProtocolError) -> None:
        if self.refused is None:
            self.refused = e


def _loads(data: bytes | str, max_frame: int, max_elements: int) -> tuple[Any, _Parse, str]:
    """Parse ``data`` with its work bounded: the parsed value, its hooks and its skeleton.

    Every step is one pass of C code over the text or the values (no regex that backtracks,
    no Python call per value): the cost of a frame grows linearly with its length."""
    if isinstance(data, bytes):
        raise MalformedFrame("binary frame on tritonmq.v1.json; send JSON in text frames")
    if len(data) > max_frame:  # characters, at most the bytes the websocket layer bounded
        raise FrameTooLarge(f"frame of {len(data)} characters exceeds the limit of {max_frame}")
    skeleton = _skeleton(data)
    if len(data) > max_elements and _structure(skeleton) > max_elements:
        # A JSON value takes at least one character, so a shorter frame cannot hold more;
        # a longer one is counted before it is built ("[[],[],...]" would make ~150 MB of
        # lists from 8 MB): each value is a container or follows a comma.
        raise FrameTooLarge(f"frame holds more than {max_elements} JSON values")
    hooks = _Parse()
    # int() of a long digit string is quadratic: only a frame with more than 16 digits in a
    # row pays for a Python call per integer (the search is a C pass over the UTF-8 bytes)
    long_ints = _LONG_INT in data.encode("utf-8", "surrogatepass").translate(_DIGITS)
    try:
        parsed = json.loads(
            data,
            object_pairs_hook=hooks.pairs,
            parse_int=_int if long_ints else None,
            parse_float=hooks.number,
            parse_constant=_refuse_constant,
        )
    except MalformedFrame:
        raise
    except RecursionError:
        raise MalformedFrame(f"frame nested deeper than {MAX_DEPTH}") from None
    except (ValueError, TypeError) as e:  # JSONDecodeError
        raise MalformedFrame(f"not a JSON frame: {type(e).__name__}") from None
    return parsed, hooks, skeleton


def _shape(parsed: Any, skeleton: str, max_array: int) -> Any:
    """Parsed JSON in msgpack's shape (arrays as tuples), by a msgpack round trip in C: its
    container limits bound each array and map, and text UTF-8 cannot hold (a lone surrogate
    escape, which msgpack would fail to encode on the way out) is refused here."""
    if _deeper_than(skeleton, MAX_DEPTH):
        raise MalformedFrame(f"frame nested deeper than {MAX_DEPTH}")
    try:
        packed = _tuples(parsed)
    except UnicodeEncodeError:
        raise MalformedFrame("a string holds a lone surrogate (\\ud800-\\udfff)") from None
    try:
        return msgpack.unpackb(
            packed,
            raw=False,
            use_list=False,
            strict_map_key=False,
            max_array_len=max_array,
            max_map_len=MAX_MAP_LEN,
        )
    except ValueError as e:  # msgpack's container limits
        raise FrameTooLarge(f"frame refused: {e}") from None


def _bin_in(v: Any) -> Any:
    """A binary field from JSON: a string's UTF-8 bytes, or ``{"b64": ...}`` decoded; anything
    else is left for the shared validator to refuse."""
    if isinstance(v, str):
        return v.encode()
    if isinstance(v, dict) and len(v) == 1 and isinstance(v.get("b64"), str):
        try:
            return base64.b64decode(v["b64"], validate=True)
        except (binascii.Error, ValueError):
            raise MalformedFrame("'b64' must be standard base64") from None
    return v


def _bin_out(v: bytes) -> str | dict[str, str]:
    try:
        return v.decode()
    except UnicodeDecodeError:
        return {"b64": base64.b64encode(v).decode("ascii")}


_NON_FINITE = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}


def _header_out(v: Any) -> Any:
    """A header value as JSON: binary always as base64; a float JSON cannot write (a NaN a
    ``tritonmq.v1`` publisher sent) as the string JavaScript's ``String()`` gives it."""
    if isinstance(v, bytes):
        return _b64(v)
    if isinstance(v, float) and not math.isfinite(v):
        return _NON_FINITE[repr(v)]
    return v


def _b64(v: bytes) -> dict[str, str]:
    return {"b64": base64.b64encode(v).decode("ascii")}


def _records_in(obj: dict[str, Any]) -> None:
    spec = _RECORD_OPS.get(obj["op"])
    raw = obj.get("records")
    if spec is None or type(raw) is not tuple:
        return
    binary, hpos = spec
    out = []
    for r in raw:
        if type(r) is tuple and len(r) == hpos + 1:
            r = list(r)
            for i in binary:
                if r[i] is not None:
                    r[i] = _bin_in(r[i])
            h = r[hpos]
            if isinstance(h, dict):
                r[hpos] = {k: (_bin_in(x) if isinstance(x, dict) else x) for k, x in h.items()}
            r = tuple(r)
        out.append(r)
    obj["records"] = tuple(out)


def _records_out(op: str, records: Any) -> list[Any]:
    binary, hpos = _RECORD_OPS[op]
    out = []
    for r in records:
        r = list(r)
        for i in binary:
            if r[i] is not None:
                r[i] = _bin_out(r[i])
        h = r[hpos]
        if h:
            r[hpos] = {k: _header_out(x) for k, x in h.items()}
        out.append(r)
    return out


def _dumps(obj: dict[str, Any]) -> str:
    if obj.get("op") in _RECORD_OPS and obj.get("records") is not None:
        obj["records"] = _records_out(obj["op"], obj["records"])
    return json.dumps(
        obj, separators=(",", ":"), ensure_ascii=False, allow_nan=False, default=_other
    )


def _other(v: Any) -> Any:
    """Bytes outside records (none today): base64, so an encoder never fails mid-send."""
    if isinstance(v, bytes):
        return _b64(v)
    raise TypeError(f"{type(v).__name__} has no JSON form")


def record_size(record: Any) -> int:
    """The bytes a delivered or fetched record ``[ts, uuid, key, value, headers]`` takes in a
    JSON frame (UTF-8, its comma included): escapes and base64 make it up to 6 times what the
    log counts (a control byte is ``\\u0001``), so answers are cut by this, not by that."""
    (out,) = _records_out("fetched", (record,))
    text = json.dumps(out, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return len(text.encode("utf-8", "surrogatepass")) + 1


def map_of(data: bytes) -> dict[str, Any]:
    """The map a msgpack frame (of ours) holds, as JSON will carry it."""
    obj: dict[str, Any] = msgpack.unpackb(data, raw=False, use_list=True, strict_map_key=False)
    return obj


def transcode(data: bytes) -> str:
    """A ``tritonmq.v1`` frame the broker encoded, as the same ``tritonmq.v1.json`` frame:
    the broker's shell encodes once (msgpack) and converts for JSON connections only."""
    return _dumps(map_of(data))


class JsonCodec(CodecLimits):
    """``tritonmq.v1.json``: JSON objects in text websocket messages, with the limits given
    (the same as :class:`~tritonmq.wire.subprotocols.MsgpackCodec`'s)."""

    subprotocol = JSON_SUBPROTOCOL

    def encode(self, frame: ClientFrame | BrokerFrame) -> str:
        if isinstance(frame, BROKER_FRAMES):
            return transcode(enc_broker(frame))
        return transcode(enc_client(frame))

    def _shaped(self, data: bytes | str) -> dict[str, Any]:
        """Parse and shape ``data``; a frame refused after it parsed is named by the
        ``id``/``sid`` its top object holds (unless that key is the duplicated one)."""
        with paused_gc():
            return self._shaped_no_gc(data)

    def _shaped_no_gc(self, data: bytes | str) -> dict[str, Any]:
        parsed, hooks, skeleton = _loads(data, self.max_frame, self.max_elements)
        try:
            if hooks.refused is not None:
                raise hooks.refused
            obj = _frame_map(_shape(parsed, skeleton, max(MAX_ACK_TS, self.max_records)))
            _records_in(obj)
        except ProtocolError as e:
            _name(e, parsed, hooks.duplicated)
            raise
        return obj

    def decode_client(self, data: bytes | str) -> ClientFrame:
        """A typed client frame; a refused one raises with its ``id``/``sid`` when readable."""
        obj = self._shaped(data)
        try:
            return _client_frame(obj, self.max_records, self.max_value)
        except ProtocolError as e:
            _name(e, obj)
            raise

    def decode_broker(self, data: bytes | str) -> BrokerFrame:
        """A typed broker frame; anything else raises a :class:`ProtocolError`."""
        return _broker_frame(self._shaped(data))


def _name(e: ProtocolError, obj: Any, duplicated: set[str] | frozenset[str] = frozenset()) -> None:
    if isinstance(obj, dict):
        for attr in ("id", "sid"):
            v = None if attr in duplicated else obj.get(attr)
            if ts_ok(v):
                setattr(e, attr, v)
