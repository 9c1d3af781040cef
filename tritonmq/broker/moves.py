"""The shell's half of slot moves (docs/replication.md M2, M7): ZooKeeper and sockets only.

The core (:mod:`tritonmq.core.moves`) decides when to seal, when to ask for a handover
and when to complete (and :mod:`tritonmq.core.slotadmin` whether an admin's ``slotmove``
may begin one); this performs those steps: a step on ``/slots/<n>`` by CAS
(:func:`~tritonmq.coord.slots.apply_slot_step`, which re-judges a lost race), and the
handover ask, which dials the old group's replication listeners (its primary first,
then its other ISR members), answers their challenge with a handover proof, and reports
the pairs they send, or that none of them did.
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
import time
from collections.abc import Callable

import websockets
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from tritonmq import tlsconfig
from tritonmq.broker import replica
from tritonmq.coord import paths
from tritonmq.coord.slots import write_slot_step
from tritonmq.core.actions import AskHandover, BeginSlotMove, ProposeSlotStep, SlotStep
from tritonmq.core.events import (
    CasOutcome,
    Event,
    HandoverAnswered,
    SlotMoveBegun,
    SlotStepDone,
)
from tritonmq.core.group import Member
from tritonmq.core.peerauth import handover_proof
from tritonmq.core.slotadmin import begin_move_among
from tritonmq.core.slothistory import SlotHistory, complete, seal
from tritonmq.errors import CoordinationError, IllegalSlotTransition, ProtocolError
from tritonmq.wire import repl
from tritonmq.wire.frames import REPL_SUBPROTOCOL, HandoverAsk, HandoverPairs

log = logging.getLogger("tritonmq.moves")
ASK_TIMEOUT = 10.0  # one broker's answer to a handover ask, at most (connect included)


def step_slot(
    zk: KazooClient, chroot: str, group: str, a: ProposeSlotStep
) -> tuple[SlotHistory, int]:
    """Apply the core's step to ``/slots/<slot>`` (blocking: run it on a thread); what
    was written and the map version it made."""
    if a.step is SlotStep.SEAL:
        until = a.until
        assert until is not None
        return write_slot_step(zk, chroot, a.slot, lambda h: seal(h, group, until))
    return write_slot_step(zk, chroot, a.slot, lambda h: complete(h, group))


async def perform_step(
    zk: KazooClient, chroot: str, group: str, a: ProposeSlotStep, feed: Callable[[Event], None]
) -> None:
    history: SlotHistory | None = None
    version = -1
    try:
        history, version = await asyncio.to_thread(step_slot, zk, chroot, group, a)
        outcome = CasOutcome.OK
    except IllegalSlotTransition as e:
        log.info("slot %d: %s not allowed now: %s", a.slot, a.step.value, e)
        outcome = CasOutcome.CONFLICT
    except Exception as e:  # ZooKeeper failed: the next view decides
        log.warning("slot %d: %s outcome unknown: %r", a.slot, a.step.value, e)
        outcome = CasOutcome.UNKNOWN
    feed(SlotStepDone(a.request, outcome, history, time.monotonic(), version))


def begin_slot_move(zk: KazooClient, chroot: str, a: BeginSlotMove) -> SlotHistory:
    """An admin's ``slotmove`` (blocking: run it on a thread): the groups ZooKeeper lists,
    then ``begin_move`` by CAS, judged by the core's rule on what is there now."""
    try:
        groups = set(zk.get_children(paths.groups(chroot)))
    except NoNodeError:
        groups = set()
    step = write_slot_step(zk, chroot, a.slot, lambda h: begin_move_among(h, a.to, groups))
    return step[0]


async def perform_begin(
    zk: KazooClient, chroot: str, a: BeginSlotMove, feed: Callable[[Event], None]
) -> None:
    history: SlotHistory | None = None
    reason = ""
    try:
        history = await asyncio.to_thread(begin_slot_move, zk, chroot, a)
        outcome = CasOutcome.OK
        log.warning("slot %d: an admin began its move to %s", a.slot, a.to)
    except (IllegalSlotTransition, CoordinationError) as e:
        outcome, reason = CasOutcome.CONFLICT, str(e)
    except Exception as e:  # ZooKeeper failed mid-write: it may have been written
        log.warning("slot %d: beginning its move to %s: outcome unknown: %r", a.slot, a.to, e)
        outcome, reason = CasOutcome.UNKNOWN, type(e).__name__
    feed(SlotMoveBegun(a.request, outcome, history, reason, time.monotonic()))


def group_repl_urls(zk: KazooClient, chroot: str, group: str) -> list[str]:
    """Where to ask ``group``: its primary's replication URL, then its other ISR members'
    (blocking: run it on a thread). Only they hold its committed log (R1)."""
    try:
        st = json.loads(zk.get(paths.state(chroot, group))[0])
        names = zk.get_children(paths.members(chroot, group))
    except NoNodeError:
        return []
    urls: dict[str, str] = {}
    for m in names:
        try:
            d = json.loads(zk.get(f"{paths.members(chroot, group)}/{m}")[0])
        except NoNodeError:
            continue
        urls[m] = d.get("repl_url") or d["url"]
    order = [st.get("primary"), *sorted(m for m in st.get("isr", ()) if m != st.get("primary"))]
    return [urls[m] for m in order if m in urls]


async def ask_handover(
    a: AskHandover,
    *,
    zk: KazooClient,
    chroot: str,
    me: Member,
    group: str,
    secret: bytes | None,
    tls: ssl.SSLContext | None,
    feed: Callable[[Event], None],
) -> None:
    """Ask the old group's brokers in turn; report the first answer (or None)."""
    got: HandoverPairs | None = None
    try:
        urls = await asyncio.to_thread(group_repl_urls, zk, chroot, a.group)
    except Exception as e:
        log.warning("reading group %s for the handover of slot %d failed: %r", a.group, a.slot, e)
        urls = []
    for url in urls:
        try:
            async with asyncio.timeout(ASK_TIMEOUT):
                got = await _ask_one(url, a, me, group, secret, tls)
        except Exception as e:  # refused, closed, timed out, an error frame: the next one
            log.info("handover of slot %d from %s: %s", a.slot, url, e or type(e).__name__)
            continue
        if got is not None:
            break
    feed(HandoverAnswered(a.request, got, time.monotonic(), int(time.time() * 1000)))


async def _ask_one(
    url: str,
    a: AskHandover,
    me: Member,
    group: str,
    secret: bytes | None,
    tls: ssl.SSLContext | None,
) -> HandoverPairs | None:
    async with websockets.connect(
        url,
        ssl=tlsconfig.for_url(url, tls),
        subprotocols=[REPL_SUBPROTOCOL],  # type: ignore[list-item]
        max_size=replica.REPL_MAX_FRAME,
        compression=None,
        open_timeout=5,
        close_timeout=1,
    ) as ws:
        nonce = await replica.challenge_of(ws)
        proof = handover_proof(secret, nonce, group, me.id, me.boot, a.slot, a.until)
        await ws.send(
            repl.enc_handover_ask(
                HandoverAsk(group, me.id, me.boot, a.slot, a.until, proof, a.after, a.earlier)
            )
        )
        data = await ws.recv()
        try:
            frame = repl.decode_repl(data, max_frame=replica.REPL_MAX_FRAME)
        except ProtocolError:
            raise ProtocolError(f"refused: {data[:200]!r}") from None
        if isinstance(frame, HandoverPairs) and (frame.slot, frame.until) == (a.slot, a.until):
            return frame
        return None
