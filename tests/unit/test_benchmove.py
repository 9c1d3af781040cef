"""The pause figures of `python -m tritonmq.devtools.benchmove`."""

from __future__ import annotations

from tritonmq.devtools.benchmove import median_gap_outside, pause_within


def test_the_pause_is_the_longest_ack_gap_touching_the_move_including_the_one_spanning_its_start() -> (
    None
):
    acks = [0.0, 0.01, 0.02, 0.5, 0.51, 0.52, 2.0, 2.01]
    assert pause_within(acks, 0.03, 0.4) == 0.48  # the gap 0.02 -> 0.5 spans the move
    assert pause_within(acks, 0.6, 1.0) == 1.48  # 0.52 -> 2.0
    assert pause_within([], 1.0, 1.5) == 0.5  # no ack at all: the whole window


def test_the_usual_gap_leaves_the_moves_windows_out() -> None:
    acks = [0.0, 0.01, 0.02, 0.5, 0.51, 0.52, 3.0, 3.01]
    assert median_gap_outside(acks, [(0.4, 0.45)]) == 0.01
