"""The replication subprotocol's codec: frames survive round trips; bad ones are malformed."""

from __future__ import annotations

from typing import Any

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tritonmq.errors import MalformedFrame
from tritonmq.wire import codec, repl
from tritonmq.wire.frames import (
    Append,
    DedupPage,
    Follow,
    HandoverAsk,
    HandoverPairs,
    Leader,
    ReplAck,
    SharedAck,
    SharedState,
    SharedSub,
)

# --- strategies ---------------------------------------------------------------------

ids = st.integers(0, codec.MAX_SAFE_INT)
uuids = st.binary(min_size=1, max_size=codec.MAX_UUID_LEN)
keys = st.none() | st.binary(max_size=32)
values = st.binary(max_size=256)
header_values = st.one_of(
    st.text(max_size=20),
    st.binary(max_size=20),
    st.integers(-codec.MAX_SAFE_INT, codec.MAX_SAFE_INT),
    st.floats(allow_nan=False),
    st.booleans(),
)
headers = st.none() | st.dictionaries(st.text(max_size=16), header_values, max_size=8)
stamped = st.tuples(st.integers(0, codec.MAX_SAFE_INT), uuids, keys, values, headers)
entries = st.lists(st.tuples(st.text(min_size=1, max_size=20), stamped), max_size=16)
epoch_lists = st.lists(
    st.tuples(st.integers(0, codec.MAX_SAFE_INT), st.integers(0, codec.MAX_SAFE_INT)), max_size=6
)
short_names = st.text(min_size=1, max_size=codec.MAX_NAME_LEN)


# --- round trips --------------------------------------------------------------------


@given(ids, ids, entries)
def test_append_round_trips_with_its_entries(epoch: int, commit: int, ents: list[Any]) -> None:
    decoded = repl.decode_repl(repl.enc_append(epoch, commit, 1, ents))
    assert decoded == Append(epoch, commit, 1, ents)


@given(st.builds(Follow, short_names, short_names, short_names, ids, ids, epoch_lists))
def test_follow_round_trips(frame: Follow) -> None:
    assert repl.decode_repl(repl.enc_follow(frame)) == frame


@given(st.lists(st.tuples(short_names, ids), max_size=4).map(tuple))
def test_follow_round_trips_with_what_the_backup_purged(
    purged: tuple[tuple[str, int], ...],
) -> None:
    frame = Follow("g", "b", "boot", 1, 2, [(1, 1)], b"", purged)
    assert repl.decode_repl(repl.enc_follow(frame)) == frame


def test_a_follow_whose_purged_is_not_topic_ts_pairs_is_malformed() -> None:
    raw = msgpack.packb(
        {
            "op": "follow",
            "group": "g",
            "id": "b",
            "boot": "x",
            "epoch": 1,
            "last_ts": 0,
            "epochs": [],
            "purged": [["t", "x"]],
        }
    )
    with pytest.raises(MalformedFrame):
        repl.decode_repl(raw)


@given(
    st.builds(
        HandoverAsk,
        short_names,
        short_names,
        short_names,
        ids,
        ids,
        st.binary(max_size=32),
        st.none() | ids,
        st.none() | st.tuples(ids, ids),
    )
)
def test_a_handover_ask_round_trips(frame: HandoverAsk) -> None:
    assert repl.decode_repl(repl.enc_handover_ask(frame)) == frame


@given(
    st.builds(
        HandoverPairs,
        ids,
        ids,
        st.lists(st.tuples(ids, uuids), max_size=8).map(tuple),
        st.none() | ids,
        st.booleans(),
        st.lists(
            st.tuples(ids, st.lists(st.tuples(ids, uuids), max_size=3).map(tuple)), max_size=2
        ).map(tuple),
    )
)
def test_handover_pairs_round_trip(frame: HandoverPairs) -> None:
    assert repl.decode_repl(repl.enc_handover_pairs(frame)) == frame


@pytest.mark.parametrize(
    "bad",
    [
        {"op": "handover", "group": "g2", "id": "x", "boot": "b", "slot": -1, "until": 1},
        {"op": "handover", "group": "g2", "id": "x", "boot": "b", "slot": 1},
        {"op": "handover", "group": "g2", "id": "x", "boot": "b", "slot": 1, "until": 1}
        | {"after": 0, "earlier": [1]},
        {"op": "handover", "group": "g2", "id": "x", "boot": "b", "slot": 1, "until": 1}
        | {"after": 0, "earlier": [0, -1]},
        {"op": "handed", "slot": 1, "until": 2, "pairs": [[1, "not bytes"]]},
        {"op": "handed", "slot": 1, "until": 2},
    ],
)
def test_malformed_handover_frames_are_refused(bad: dict[str, Any]) -> None:
    with pytest.raises(MalformedFrame):
        repl.decode_repl(msgpack.packb(bad))


@given(
    st.builds(
        Leader,
        ids,
        ids,
        epoch_lists,
        st.booleans(),
        st.lists(st.tuples(ids, uuids, st.integers(-1, 4096)), max_size=5).map(tuple),
        st.lists(st.tuples(short_names, ids), max_size=4).map(tuple),
        st.booleans(),
    )
)
def test_leader_round_trips(frame: Leader) -> None:
    assert repl.decode_repl(repl.enc_leader(frame)) == frame


@given(
    st.builds(
        DedupPage,
        ids,
        st.lists(st.tuples(ids, uuids, st.integers(-1, 4096)), max_size=5).map(tuple),
        st.booleans(),
    )
)
def test_a_dedup_page_round_trips(frame: DedupPage) -> None:
    assert repl.decode_repl(repl.enc_dedup(frame)) == frame


@pytest.mark.parametrize(
    "bad", [{"op": "dedup", "epoch": 1}, {"op": "dedup", "epoch": 1, "dedup": [[1, b"u"]]}]
)
def test_a_malformed_dedup_page_is_refused(bad: dict[str, Any]) -> None:
    with pytest.raises(MalformedFrame):
        repl.decode_repl(msgpack.packb(bad))


ranges = st.lists(st.tuples(ids, ids), max_size=4).map(tuple)


@given(
    st.lists(
        st.builds(
            SharedSub,
            short_names,
            short_names,
            ids,
            ids,
            st.lists(st.tuples(short_names, ranges), max_size=3).map(tuple),
            ranges,
            ranges,
            st.lists(short_names, max_size=3).map(tuple),
            st.integers(0, 9),
        ),
        max_size=3,
    ).map(tuple),
    ids,
    ids,
)
def test_shared_state_round_trips(subs: tuple[SharedSub, ...], epoch: int, seq: int) -> None:
    frame = SharedState(epoch, subs, seq)
    assert repl.decode_repl(repl.enc_shared(frame)) == frame


def test_a_shared_sub_without_an_era_reads_as_era_0_and_one_of_era_0_is_sent_without() -> None:
    """As brokers from before moves send and read it (a rolling upgrade)."""
    old = ["t", "s", 3, 4, [], [], [], []]
    [sub] = repl.decode_repl(msgpack.packb({"op": "shared", "epoch": 1, "subs": [old]})).subs
    assert sub.era == 0
    assert msgpack.unpackb(repl.enc_shared(SharedState(1, (sub,))))["subs"] == [old]


def test_a_shared_state_without_seq_reads_as_seq_0() -> None:
    raw = msgpack.packb({"op": "shared", "epoch": 2, "subs": []})
    assert repl.decode_repl(raw) == SharedState(2, (), 0)


@given(ids, ids)
def test_sack_round_trips(epoch: int, seq: int) -> None:
    assert repl.decode_repl(repl.enc_sack(SharedAck(epoch, seq))) == SharedAck(epoch, seq)


def test_a_malformed_sack_is_refused() -> None:
    for bad in ({"op": "sack", "epoch": 1}, {"op": "sack", "epoch": 1, "seq": -1}):
        with pytest.raises(MalformedFrame):
            repl.decode_repl(msgpack.packb(bad))


def test_a_malformed_shared_state_is_refused() -> None:
    bad_era = [["t", "s", 0, 1, [], [], [], [], -1]]
    for subs in ([["t", "s", 0, 1, [], [[1]], [], []]], [["t", "s", 0]], "x", bad_era):
        with pytest.raises(MalformedFrame):
            repl.decode_repl(msgpack.packb({"op": "shared", "epoch": 1, "subs": subs}))


@pytest.mark.parametrize("dedup", [[[1, "x", 3]], [[1, b"u"]], [[1, b"u", "t"]], "x"])
def test_leader_with_a_malformed_dedup_state_is_refused(dedup: Any) -> None:
    frame = {"op": "leader", "epoch": 1, "truncate_to": 0, "epochs": [], "dedup": dedup}
    with pytest.raises(MalformedFrame):
        repl.decode_repl(msgpack.packb(frame))


@given(ids, ids)
def test_rack_round_trips(epoch: int, ts: int) -> None:
    assert repl.decode_repl(repl.enc_rack(epoch, ts)) == ReplAck(epoch, ts)


# --- malformed frames ---------------------------------------------------------------


@pytest.mark.parametrize(
    "frame",
    [
        {"op": "append", "epoch": 1, "commit": 0, "entries": "x"},
        {"op": "append", "epoch": 1, "commit": 0, "entries": [["t", [1, b"u", None, b"v"]]]},
        {"op": "append", "epoch": -1, "commit": 0, "entries": []},
        {"op": "rack", "epoch": 1},
        {"op": "follow", "group": "g", "id": "b", "boot": "x", "epoch": 1, "last_ts": 0},
        {
            "op": "follow",
            "group": "",
            "id": "b",
            "boot": "x",
            "epoch": 1,
            "last_ts": 0,
            "epochs": [],
        },
        {"op": "leader", "epoch": 1, "truncate_to": 0, "epochs": [[1, "1"]]},
        {"op": "leader", "epoch": 1, "truncate_to": 0, "epochs": [[1, 2, 3]]},
    ],
)
def test_bad_replication_frames_are_malformed(frame: dict[str, Any]) -> None:
    with pytest.raises(MalformedFrame):
        repl.decode_repl(codec.packb(frame))


# --- spark support: published times ----------------------------------------------


def test_append_carries_published_pairs_and_old_appends_still_decode() -> None:
    frame = repl.decode_repl(repl.enc_append(1, 5, 3, [], [(1, 1700), (3, 1800)]))
    assert isinstance(frame, Append)
    assert frame.published == ((1, 1700), (3, 1800))
    plain = repl.decode_repl(repl.enc_append(1, 5, 3, []))
    assert isinstance(plain, Append) and plain.published == ()


def test_bad_published_pairs_are_refused() -> None:
    data = codec.packb(
        {"op": "append", "epoch": 1, "commit": 0, "start": 1, "entries": [], "published": [[1]]}
    )
    with pytest.raises(MalformedFrame):
        repl.decode_repl(data)
