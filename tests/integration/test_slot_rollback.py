"""A move rolled back on a real 2 groups x 3 cluster (docs/replication.md M7): the new
group cannot take its step, the operator abandons the move with `tritonmq slots
roll-back`, and the old group writes the slot again in the same era. Producers and the
three kinds of reader keep running through it, and through the same move made again."""

from __future__ import annotations

import asyncio
import signal
from typing import Any

import pytest

from tests.integration.test_slot_moves import (
    Producers,
    check_readers,
    cli,
    histories,
    outcome,
    three_readers,
    topics_in,
    wait_acked,
)
from tritonmq.core.slothistory import SlotHistory, SlotState
from tritonmq.devtools.cluster import DevCluster, wait_for

pytestmark = pytest.mark.integration


def wait_sealed(c: DevCluster, slots: list[int], timeout: float = 60.0) -> tuple[SlotHistory, ...]:
    """Until the old group sealed every one of ``slots`` (it needs nothing of the new)."""

    def sealed() -> tuple[SlotHistory, ...] | None:
        hs = histories(c)
        return hs if all(hs[n].state is SlotState.SEALED for n in slots) else None

    return wait_for(sealed, timeout, f"slots {slots} to be sealed")


async def test_a_move_rolled_back_after_the_seal_loses_and_duplicates_nothing(
    make_cluster: Any,
) -> None:
    """Issue 11, test 2 (roll back): every broker of the new group is frozen (SIGSTOP), so
    the move stops once the old group sealed the slots; the operator rolls it back, the
    old group writes the slots again in era 0 (producers refused with WRONG_GROUP meanwhile
    come back to it), the new group is thawed and takes no step of the abandoned move.
    Then the same move is made again and completes. Every acknowledged record is stored
    once in its producer's order, and the unnamed, durable broadcast and shared
    subscriptions get each once."""
    c: DevCluster = make_cluster(groups=2, settings={"retention_s": 300.0})
    moved = [n for n, h in enumerate(histories(c)) if h.owner == "g1"][:2]
    topics = topics_in(moved, 2)
    new_group = [bid for bid, b in c.brokers.items() if b.group == "g2"]
    async with three_readers(c, topics) as readers:
        async with Producers(c, topics, n=3) as producers:
            await wait_acked(producers, 150)
            for bid in new_group:
                c.kill(bid, signal.SIGSTOP)
            try:
                r = await asyncio.to_thread(
                    cli, c, "move", *map(str, moved), "--to", "g2", "--no-wait"
                )
                assert r.returncode == 0, (r.stdout, r.stderr)
                sealed = await asyncio.to_thread(wait_sealed, c, moved)
                r = await asyncio.to_thread(cli, c, "roll-back", *map(str, moved))
                assert r.returncode == 0, (r.stdout, r.stderr)
                assert r.stdout.splitlines() == [f"slot {n}: rolled back (owner g1)" for n in moved]
            finally:
                for bid in new_group:
                    c.kill(bid, signal.SIGCONT)
            hs = histories(c)
            assert {outcome(hs[n], "g1", "g2") for n in moved} == {"rolled back"}, hs
            # the old group writes the slots again, above the abandoned seal points
            await wait_acked(producers, 150)
            await asyncio.to_thread(c.wait_healthy)
            r = await asyncio.to_thread(cli, c, "move", *map(str, moved), "--to", "g2")
            assert r.returncode == 0, (r.stdout, r.stderr)
            await wait_acked(producers, 150)
        hs = histories(c)
        assert {outcome(hs[n], "g1", "g2") for n in moved} == {"completed"}, hs
        for n in moved:  # era 0 ended above where the abandoned move had sealed it
            abandoned = sealed[n].move
            assert abandoned is not None and abandoned.until is not None
            assert hs[n].history[0].until > abandoned.until, (hs[n], abandoned)
        await check_readers(c, producers, readers)
