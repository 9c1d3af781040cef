"""The codec object per subprotocol: the seam the client and broker see of the wire."""

from __future__ import annotations

import pytest

from tritonmq.errors import FrameTooLarge, MalformedFrame, UnknownOp
from tritonmq.wire import codec, subprotocols
from tritonmq.wire.frames import SUBPROTOCOL, Pub


def test_unknown_broker_op_and_the_codec_seam() -> None:
    with pytest.raises(UnknownOp):
        subprotocols.MSGPACK.decode_broker(codec.packb({"op": "pub", "id": 1}))
    with pytest.raises(MalformedFrame):
        subprotocols.MSGPACK.decode_broker("a text frame")
    assert subprotocols.CODECS[SUBPROTOCOL] is subprotocols.MSGPACK
    small = subprotocols.MsgpackCodec(max_frame=10, max_records=1, max_value=1)
    with pytest.raises(FrameTooLarge):
        small.decode_broker(codec.enc_subok(1, 2) * 2)
    with pytest.raises(FrameTooLarge):
        small.decode_client(codec.enc_subok(1, 2) * 2)
    pub = Pub(1, "t", [(b"u", None, b"v", None)])
    assert subprotocols.MSGPACK.decode_client(subprotocols.MSGPACK.encode(pub)) == pub
