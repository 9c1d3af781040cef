"""One codec object per websocket subprotocol: what the client and broker see of the wire.

Split from :mod:`tritonmq.wire.codec` (the frame-level encoders and decoders) so
the module stays under the size limit; a new subprotocol's codec goes here.
"""

from __future__ import annotations

from typing import Protocol

from tritonmq.wire.codec import (
    _broker_frame,
    _unpack,
    decode_client,
    enc_broker,
    enc_client,
)
from tritonmq.wire.frames import (
    BROKER_FRAMES,
    SUBPROTOCOL,
    BrokerFrame,
    ClientFrame,
)
from tritonmq.wire.jsoncodec import JSON_SUBPROTOCOL, JsonCodec
from tritonmq.wire.limits import CodecLimits


class Codec(Protocol):
    """What a websocket subprotocol's codec does; the client and broker see only this.

    ``tritonmq.v1`` is :class:`MsgpackCodec`; a JSON codec for browsers
    (``tritonmq.v1.json``, text frames) plugs in beside it without touching either side.
    """

    subprotocol: str

    def encode(self, frame: ClientFrame | BrokerFrame) -> bytes | str: ...

    def decode_client(self, data: bytes | str) -> ClientFrame: ...

    def decode_broker(self, data: bytes | str) -> BrokerFrame: ...


class MsgpackCodec(CodecLimits):
    """``tritonmq.v1``: msgpack maps in binary websocket messages, with the limits given."""

    subprotocol = SUBPROTOCOL

    def encode(self, frame: ClientFrame | BrokerFrame) -> bytes:
        if isinstance(frame, BROKER_FRAMES):
            return enc_broker(frame)
        return enc_client(frame)

    def decode_client(self, data: bytes | str) -> ClientFrame:
        return decode_client(
            data,
            max_frame=self.max_frame,
            max_records=self.max_records,
            max_value=self.max_value,
            max_elements=self.max_elements,
        )

    def decode_broker(self, data: bytes | str) -> BrokerFrame:
        """A typed broker frame; anything else raises a :class:`ProtocolError`."""
        return _broker_frame(_unpack(data, self.max_frame))


MSGPACK = MsgpackCodec(max_frame=64 * 1024 * 1024)
"""The client side's ``tritonmq.v1`` codec (a broker's frames may be as large as it allows)."""

JSON = JsonCodec(max_frame=64 * 1024 * 1024)
"""The client side's ``tritonmq.v1.json`` codec (tools and tests; browsers are its users)."""

CODECS: dict[str, Codec] = {SUBPROTOCOL: MSGPACK, JSON_SUBPROTOCOL: JSON}
"""Client codecs by subprotocol, in order of preference."""
