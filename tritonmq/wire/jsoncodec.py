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


_STRINGS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
"""A JSON string literal (what :func:`_loads` skips when it counts values)."""


_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")


def _structure(text: str) -> int:
    """At least as many as the values a JSON text holds in containers, if its strings are out."""
    return text.count(",") + text.count("[") + text.count("{")


def _refuse_constant(name: str) -> Any:
    raise MalformedFrame(f"{name} is not a JSON number")


def _loads(data: bytes | str, max_frame: int, max_elements: int) -> Any:
    if isinstance(data, bytes):
        raise MalformedFrame("binary frame on tritonmq.v1.json; send JSON in text frames")
    if len(data) > max_frame:  # characters, at most the bytes the websocket layer bounded
        raise FrameTooLarge(f"frame of {len(data)} characters exceeds the limit of {max_frame}")
    if len(data) > max_elements and _structure(data) > max_elements:
        # A JSON value takes at least one character, so a shorter frame cannot hold more;
        # a longer one is counted before it is built ("[[],[],...]" would make ~150 MB of
        # lists from 8 MB): each value is a container or follows a comma. Counting in the
        # raw text is C-fast and may overcount (commas inside strings); only then are the
        # strings taken out (a regex, a few times slower than parsing) and counted again.
        if _structure(_STRINGS.sub("", data)) > max_elements:
            raise FrameTooLarge(f"frame holds more than {max_elements} JSON values")
    try:
        return json.loads(data, parse_constant=_refuse_constant)
    except MalformedFrame:
        raise
    except RecursionError:
        raise MalformedFrame(f"frame nested deeper than {MAX_DEPTH}") from None
    except (ValueError, TypeError) as e:  # JSONDecodeError; an integer of > 4300 digits
        raise MalformedFrame(f"not a JSON frame: {type(e).__name__}") from None


class _Shape:
    """Turns parsed JSON into msgpack's shape (lists to tuples), counting elements and depth."""

    def __init__(self, max_elements: int, max_array: int, check_text: bool) -> None:
        self.left = max_elements
        self.max_array = max_array
        self.check_text = check_text

    def walk(self, v: Any, depth: int) -> Any:
        if isinstance(v, list):
            return tuple(self._items(v, depth))
        if isinstance(v, dict):
            if len(v) > MAX_MAP_LEN:
                raise FrameTooLarge(f"a map of {len(v)} entries exceeds {MAX_MAP_LEN}")
            self._count(v, depth)
            return {self.walk(k, depth): self.walk(x, depth + 1) for k, x in v.items()}
        if type(v) is float and not math.isfinite(v):
            # 1e400 parses as infinity, which no JSON encoder writes back (a subscriber's
            # ``deliver`` would fail), so it is refused here
            raise MalformedFrame("a number is out of range")
        if self.check_text and isinstance(v, str):
            try:
                v.encode()
            except UnicodeEncodeError:
                raise MalformedFrame("a string holds a lone surrogate (\\ud800-\\udfff)") from None
        return v

    def _items(self, v: list[Any], depth: int) -> list[Any]:
        if len(v) > self.max_array:
            raise FrameTooLarge(f"an array of {len(v)} items exceeds {self.max_array}")
        self._count(v, depth)
        return [self.walk(x, depth + 1) for x in v]

    def _count(self, v: list[Any] | dict[str, Any], depth: int) -> None:
        if depth >= MAX_DEPTH:
            raise MalformedFrame(f"frame nested deeper than {MAX_DEPTH}")
        self.left -= len(v)
        if self.left < 0:
            raise FrameTooLarge("frame holds more values than the limit")


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
        """Parse and shape ``data``; a frame refused while shaping is named by the
        ``id``/``sid`` its top object holds, when it parsed as JSON at all."""
        parsed = _loads(data, self.max_frame, self.max_elements)
        try:
            # only a \uD800-\uDFFF escape can make a string UTF-8 cannot hold (the text
            # frame itself was valid UTF-8): msgpack would fail to encode it on the way out
            surrogates = isinstance(data, str) and _SURROGATE.search(data) is not None
            shape = _Shape(self.max_elements, max(MAX_ACK_TS, self.max_records), surrogates)
            obj = _frame_map(shape.walk(parsed, 0))
            _records_in(obj)
        except ProtocolError as e:
            _name(e, parsed)
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


def _name(e: ProtocolError, obj: Any) -> None:
    if isinstance(obj, dict):
        for attr in ("id", "sid"):
            v = obj.get(attr)
            if ts_ok(v):
                setattr(e, attr, v)
