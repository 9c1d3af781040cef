"""The slot history: its JSON, its invariants and the move steps (docs/replication.md, M1)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tritonmq.core.slothistory import (
    Era,
    Move,
    Position,
    Segment,
    SlotHistory,
    SlotState,
    begin_move,
    complete,
    position_of,
    roll_back,
    seal,
    segments_from,
)
from tritonmq.errors import CoordinationError, IllegalSlotTransition, SlotHistoryError

GROUPS = ("g1", "g2", "g3")


def test_a_slot_written_before_moves_existed_reads_as_era_0_and_writes_back_the_same() -> None:
    raw = json.dumps({"group": "g1", "state": "normal"}).encode()
    h = SlotHistory.decode(raw)
    assert h == SlotHistory("g1")
    assert (h.era, h.history, h.writer, h.after, h.moved) == (0, (), "g1", 0, False)
    assert json.loads(h.encode()) == {"group": "g1", "state": "normal"}


def test_a_full_move_seals_the_old_era_and_the_new_owner_writes_the_next() -> None:
    h = begin_move(SlotHistory("g1"), "g2")
    assert (h.state, h.writer, h.owner) == (SlotState.MOVING, None, "g1")
    h = seal(h, "g1", 1200)
    assert (h.state, h.writer, h.move) == (SlotState.SEALED, None, Move("g2", 1200))
    h = complete(h, "g2")
    assert h == SlotHistory("g2", 1, (Era("g1", 0, 0, 1200),))
    assert (h.writer, h.after) == ("g2", 0)
    assert h.era_of("g1", 1200) == 0 and h.era_of("g1", 1201) is None
    assert h.era_of("g2", 1) == 1 and h.group_of_era(0) == "g1"
    assert SlotHistory.decode(h.encode()) == h


def test_moving_back_starts_the_groups_new_era_at_its_old_seal_point() -> None:
    h = complete(seal(begin_move(SlotHistory("g1"), "g2"), "g1", 100), "g2")
    h = complete(seal(begin_move(h, "g1"), "g2", 40), "g1")
    assert h.era == 2 and h.after == 100
    # g1's records of the slot: era 0 up to 100, era 2 above it
    assert [h.era_of("g1", ts) for ts in (1, 100, 101)] == [0, 0, 2]
    assert [h.era_of("g2", ts) for ts in (0, 1, 40, 41)] == [None, 1, 1, None]
    with pytest.raises(IllegalSlotTransition):
        seal(begin_move(h, "g2"), "g1", 99)  # below the era's start: g1's ts went backwards


@pytest.mark.parametrize(
    "step",
    [
        lambda h: seal(h, "g1", 5),  # not moving
        lambda h: complete(h, "g2"),  # not sealed
        roll_back,  # nothing to roll back
        lambda h: begin_move(h, "g1"),  # to itself
        lambda h: seal(begin_move(h, "g2"), "g2", 5),  # sealed by the wrong group
        lambda h: complete(begin_move(h, "g2"), "g2"),  # not sealed yet
        lambda h: begin_move(begin_move(h, "g2"), "g3"),  # a move already runs
        lambda h: complete(seal(begin_move(h, "g2"), "g1", 5), "g3"),  # not the target
        lambda h: seal(seal(begin_move(h, "g2"), "g1", 5), "g1", 6),  # sealed twice
    ],
)
def test_an_illegal_step_is_refused_with_a_typed_error(step: object) -> None:
    with pytest.raises(IllegalSlotTransition) as e:
        step(SlotHistory("g1"))  # type: ignore[operator]
    assert isinstance(e.value, CoordinationError)


def test_rolling_back_keeps_the_owner_and_its_era() -> None:
    h = complete(seal(begin_move(SlotHistory("g1"), "g2"), "g1", 10), "g2")
    assert roll_back(begin_move(h, "g3")) == h
    assert roll_back(seal(begin_move(h, "g3"), "g2", 10)) == h


@pytest.mark.parametrize(
    "d",
    [
        [],
        {"state": "normal"},
        {"group": "", "state": "normal"},
        {"group": "g1", "state": "lost"},
        {"group": "g1", "state": "sealed"},  # sealed without a move
        {"group": "g1", "state": "normal", "move": {"to": "g2", "until": None}},
        {"group": "g1", "state": "moving", "move": {"to": "g1", "until": None}},
        {"group": "g1", "state": "moving", "move": {"to": "g2", "until": 4}},
        {"group": "g1", "state": "sealed", "move": {"to": "g2", "until": None}},
        {"group": "g1", "state": "normal", "era": 1, "history": []},
        {"group": "g1", "state": "normal", "history": "x"},
        {
            "group": "g1",  # the owner held the era before too
            "state": "normal",
            "history": [{"group": "g1", "era": 0, "after": 0, "until": 5}],
        },
        {
            "group": "g2",
            "state": "normal",
            "history": [{"group": "g1", "era": 0, "after": 0, "until": -1}],
        },
        {
            "group": "g2",
            "state": "normal",
            "history": [{"group": "g1", "era": 3, "after": 0, "until": 5}],
        },
        {
            "group": "g1",  # g1's second era must start at its first one's seal point
            "state": "normal",
            "history": [
                {"group": "g1", "era": 0, "after": 0, "until": 5},
                {"group": "g2", "era": 1, "after": 0, "until": 5},
                {"group": "g1", "era": 2, "after": 4, "until": 9},
                {"group": "g2", "era": 3, "after": 5, "until": 7},
            ],
        },
        {
            "group": "g2",
            "state": "sealed",  # seal point below the era's start (g2's last seal, 5)
            "move": {"to": "g1", "until": 3},
            "history": [
                {"group": "g2", "era": 0, "after": 0, "until": 5},
                {"group": "g1", "era": 1, "after": 0, "until": 5},
            ],
        },
    ],
)
def test_a_znode_that_breaks_the_rules_is_refused(d: object) -> None:
    with pytest.raises(SlotHistoryError):
        SlotHistory.decode(json.dumps(d).encode())


def test_garbage_is_refused_with_a_typed_error() -> None:
    with pytest.raises(SlotHistoryError):
        SlotHistory.decode(b"\xff{")


# --- any sequence of legal steps keeps the invariants ----------------------------------

STEP = st.one_of(
    st.tuples(st.just("begin"), st.sampled_from(GROUPS)),
    st.tuples(st.just("seal"), st.integers(0, 50)),
    st.tuples(st.just("complete"), st.none()),
    st.tuples(st.just("roll_back"), st.none()),
    st.tuples(st.just("stale"), st.sampled_from(GROUPS)),  # a step by a group not entitled
)


def _legal(h: SlotHistory, kind: str, arg: object, ts: dict[str, int]) -> SlotHistory | None:
    """Apply the step if a correct actor would take it; None when it is not legal."""
    if kind == "begin" and h.state is SlotState.NORMAL and arg != h.owner:
        return begin_move(h, str(arg))
    if kind == "seal" and h.state is SlotState.MOVING:
        ts[h.owner] += int(str(arg))  # the owner wrote some records, then seals at last_ts
        return seal(h, h.owner, ts[h.owner])
    if kind == "complete" and h.state is SlotState.SEALED and h.move is not None:
        return complete(h, h.move.to)
    if kind == "roll_back" and h.state is not SlotState.NORMAL:
        return roll_back(h)
    return None


def _illegal(h: SlotHistory, kind: str, arg: object) -> None:
    """The step's illegal forms are refused, whatever the state."""
    g = str(arg)
    attempts = []
    if kind == "stale":
        attempts = [lambda: seal(h, g, 10**9), lambda: complete(h, g)]
        entitled = {h.owner} if h.state is SlotState.MOVING else set()
        if h.state is SlotState.SEALED and h.move is not None:
            entitled = {h.move.to}
        if g in entitled:
            return
    elif kind == "begin" and (h.state is not SlotState.NORMAL or arg == h.owner):
        attempts = [lambda: begin_move(h, g)]
    elif kind == "complete" and h.state is not SlotState.SEALED:
        attempts = [lambda: complete(h, h.move.to if h.move else h.owner)]
    elif kind == "seal" and h.state is not SlotState.MOVING:
        attempts = [lambda: seal(h, h.owner, 10**9)]
    elif kind == "roll_back" and h.state is SlotState.NORMAL:
        attempts = [lambda: roll_back(h)]
    for attempt in attempts:
        with pytest.raises(IllegalSlotTransition):
            attempt()


@given(st.lists(STEP, max_size=60))
def test_any_sequence_of_legal_steps_keeps_the_invariants(steps: list[tuple[str, object]]) -> None:
    h = SlotHistory("g1")
    ts = dict.fromkeys(GROUPS, 0)  # each group's last_ts: it only grows
    seals: dict[str, list[int]] = {g: [] for g in GROUPS}
    for kind, arg in steps:
        _illegal(h, kind, arg)
        nxt = _legal(h, kind, arg, ts)
        if nxt is None:
            continue
        # the history only grows at its end; the era grows by one exactly when it does
        assert nxt.history[: len(h.history)] == h.history
        assert nxt.era - h.era == len(nxt.history) - len(h.history) in (0, 1)
        # one owner; it writes only when no move runs
        assert nxt.writer == (nxt.owner if nxt.state is SlotState.NORMAL else None)
        if len(nxt.history) > len(h.history):
            ended = nxt.history[-1]
            assert ended.group == h.owner != nxt.owner
            seals[ended.group].append(ended.until)
        # the znode round-trips and is checked again when read
        assert SlotHistory.decode(nxt.encode()) == nxt
        h = nxt
    for g, points in seals.items():
        assert points == sorted(points), f"{g}'s seal points went backwards: {points}"
    # every finished era's records belong to it and to no other era
    for e in h.history:
        if e.until > e.after:
            assert h.era_of(e.group, e.until) == e.era
            assert h.era_of(e.group, e.after + 1) == e.era


# --- positions (M3) ----------------------------------------------------------------


def test_a_position_in_a_slot_that_never_moved_is_todays_ts() -> None:
    h = SlotHistory("g1")
    assert position_of(h, "g1", 42) == Position(0, 42) and position_of(h, "g2", 42) is None
    assert segments_from(h, Position(0, 42)) == (Segment("g1", 0, 42, None),)


def test_a_reader_in_the_old_era_reads_its_rest_then_each_later_era_whole() -> None:
    h = complete(seal(begin_move(SlotHistory("g1"), "g2"), "g1", 100), "g2")
    h = complete(seal(begin_move(h, "g1"), "g2", 40), "g1")
    assert segments_from(h, Position(0, 57)) == (
        Segment("g1", 0, 57, 100),
        Segment("g2", 1, 0, 40),
        Segment("g1", 2, 100, None),
    )
    assert segments_from(h, Position(2, 150)) == (Segment("g1", 2, 150, None),)
    assert Position(0, 10**6) < Position(1, 1) < Position(2, 0)
    sealed = seal(begin_move(h, "g3"), "g1", 130)
    assert segments_from(sealed, Position(2, 120)) == (Segment("g1", 2, 120, 130),)
    with pytest.raises(SlotHistoryError):
        segments_from(h, Position(3, 0))


@settings(max_examples=300)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["slot", "other", "move"]), st.sampled_from(GROUPS), st.booleans()
        ),
        max_size=80,
    ),
    st.data(),
)
def test_reading_from_any_position_yields_exactly_the_later_records_in_order(
    steps: list[tuple[str, str, bool]], data: st.DataObject
) -> None:
    """Groups' ts grow with other topics' records too; the writer writes the slot's records;
    moves go back and forth (some rolled back). Reading the segments from any position
    gives every later record of the slot once, in write order."""
    h = SlotHistory("g1")
    last = dict.fromkeys(GROUPS, 0)
    written: list[tuple[str, int]] = []  # (group, ts) of the slot's records, in write order
    for kind, g, flag in steps:
        if kind == "other":
            last[g] += 1  # another topic's record in g
        elif kind == "slot" and h.writer is not None:
            last[h.writer] += 1
            written.append((h.writer, last[h.writer]))
        elif kind == "move" and g != h.owner:
            h = seal(begin_move(h, g), h.owner, last[h.owner])
            h = roll_back(h) if flag else complete(h, g)
    positions = [Position(0, 0)] + [p for g, ts in written if (p := position_of(h, g, ts))]
    assert len(positions) == len(written) + 1 and positions == sorted(positions)
    i = data.draw(st.integers(0, len(written)))
    read = [
        (seg.group, ts)
        for seg in segments_from(h, positions[i])
        for g, ts in sorted(written, key=lambda r: r[1])
        if g == seg.group and seg.holds(ts)
    ]
    assert read == written[i:]
