"""The field checks every decoder shares: the field back, or MalformedFrame naming it."""

from __future__ import annotations

import pytest

from tritonmq.errors import MalformedFrame
from tritonmq.wire.fields import (
    MAX_SAFE_INT,
    bin_field,
    headers_field,
    int_field,
    opt_int,
    published_pairs,
    str_field,
)


def test_integers_are_within_the_range_javascript_keeps_exact() -> None:
    assert int_field({"id": MAX_SAFE_INT}, "id") == MAX_SAFE_INT
    assert int_field({"id": None}, "id", default=3) == 3, "nil is absent"
    assert opt_int({}, "ts") is None
    for bad in ({"id": MAX_SAFE_INT + 1}, {"id": -1}, {"id": True}, {"id": 1.0}, {}):
        with pytest.raises(MalformedFrame, match="'id'"):
            int_field(bad, "id")


def test_strings_binaries_headers_and_published_pairs() -> None:
    assert str_field({"t": "x"}, "t", max_len=1) == "x"
    assert str_field({}, "t", max_len=1, optional=True) == ""
    with pytest.raises(MalformedFrame, match="'t'"):
        str_field({"t": "xy"}, "t", max_len=1)
    assert bin_field({"p": b"ab"}, "p", max_len=2) == b"ab"
    with pytest.raises(MalformedFrame, match="'p'"):
        bin_field({"p": "ab"}, "p", max_len=2)
    assert headers_field({"k": b"v", "n": 1}) == {"k": b"v", "n": 1}
    with pytest.raises(MalformedFrame, match="header"):
        headers_field({"k": [1]})
    assert published_pairs({"published": ((1, 2),)}) == ((1, 2),)
    with pytest.raises(MalformedFrame, match="'published'"):
        published_pairs({"published": ((1,),)})
