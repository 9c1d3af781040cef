"""Who may follow a primary: the admission rule for replication links (issue 8, attacks 1-2).

A replication link streams every record of the group and its acks decide what is
committed, so a ``follow`` is admitted only when all of these hold:

* it proves the cluster secret: ``proof`` is HMAC-SHA256(secret, the nonce this
  primary sent on this link, group, id, boot). A fresh nonce per link means a
  proof seen on the network cannot be replayed on another link;
* its id is a current member of the group in our ZooKeeper view, and not us;
* its boot is the boot that member registered (an old or forged process is not it).

Pure: the shell draws the nonce and reads the secret; this module only computes and
compares. A core without a secret (``insecure_cluster``) skips the proof but still
checks membership and boot.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from typing import Any

from tritonmq.core.events import FollowerFrame
from tritonmq.core.group import Member
from tritonmq.core.replication import Rejected
from tritonmq.wire.frames import ErrorCode, Follow, HandoverAsk

PROOF_CONTEXT = b"tritonmq.repl.v1 follow\n"
HANDOVER_CONTEXT = b"tritonmq.repl.v1 handover\n"
MAX_HELD = 8  # follows held for a re-read at once; beyond, an unknown id is refused at once


def _field(data: bytes) -> bytes:
    """Length-prefixed, so that no two (group, id, boot) tuples sign the same bytes."""
    return len(data).to_bytes(4, "big") + data


def follow_proof(
    secret: bytes | None, nonce: bytes, group: str, broker_id: str, boot: str
) -> bytes:
    """The proof a follower puts in its ``follow`` on a link challenged with ``nonce``
    (empty without a secret: an insecure cluster's follow carries none)."""
    if secret is None:
        return b""
    msg = PROOF_CONTEXT + b"".join(
        _field(x) for x in (nonce, group.encode(), broker_id.encode(), boot.encode())
    )
    return hmac.new(secret, msg, hashlib.sha256).digest()


def handover_proof(
    secret: bytes | None, nonce: bytes, group: str, broker_id: str, boot: str, slot: int, until: int
) -> bytes:
    """The proof in a ``handover`` ask (a slot's new primary asking its old group, M2.3):
    like a follow's, over what it asks too, in a context of its own so that neither proof
    can stand for the other."""
    if secret is None:
        return b""
    parts = (nonce, group.encode(), broker_id.encode(), boot.encode(), b"%d" % slot, b"%d" % until)
    msg = HANDOVER_CONTEXT + b"".join(_field(x) for x in parts)
    return hmac.new(secret, msg, hashlib.sha256).digest()


def admit_handover(frame: HandoverAsk, *, nonce: bytes, secret: bytes | None) -> Rejected | None:
    """None when ``frame`` proves the cluster secret (the asker is a broker of another
    group, so our group's members cannot vouch for it); else why not."""
    if secret is None:
        return None
    want = handover_proof(secret, nonce, frame.group, frame.id, frame.boot, frame.slot, frame.until)
    if not nonce or not hmac.compare_digest(want, frame.proof):
        return Rejected(ErrorCode.UNAUTHENTICATED, "handover without a valid cluster proof")
    return None


def admit_follow(
    frame: Follow,
    *,
    nonce: bytes,
    secret: bytes | None,
    me: str,
    members: Mapping[str, Member],
) -> Rejected | None:
    """None when ``frame`` may follow us; otherwise why not (the link is closed with it).

    The proof is checked first, so an outsider learns nothing about the group's members.
    """
    if secret is not None:
        want = follow_proof(secret, nonce, frame.group, frame.id, frame.boot)
        if not nonce or not hmac.compare_digest(want, frame.proof):
            return Rejected(ErrorCode.UNAUTHENTICATED, "follow without a valid cluster proof")
    member = members.get(frame.id)
    if member is None or frame.id == me:
        return Rejected(ErrorCode.FORBIDDEN, f"{frame.id!r} is not a member of this group")
    if member.boot != frame.boot:
        return Rejected(ErrorCode.FORBIDDEN, f"{frame.id} is registered with another boot id")
    return None


class FollowGate:
    """Admission, with a short hold for a member our view does not show yet.

    A backup follows as soon as it sees itself registered, which can be a moment before
    our own watch on the members shows it. Its follow (proof checked) then waits for that
    view instead of being refused and retried: :meth:`judge` answers "held", and the core
    hands :meth:`take_held` back to be judged for good on its next view. No read is asked
    for: the registration's watch brings the view (an extra read would reorder the core's
    views against its own writes). At most ``MAX_HELD`` wait at once; beyond, an unknown id
    is refused at once (the backup retries on its back-off).
    """

    def __init__(self, secret: bytes | None) -> None:
        self.secret = secret
        self.held: dict[int, FollowerFrame] = {}  # id(link) -> its follow

    def judge(
        self, ev: FollowerFrame, me: str, members: Mapping[str, Member], *, final: bool
    ) -> Rejected | None | bool:
        """None: admit; Rejected: refuse; True: held until the next view."""
        assert isinstance(ev.frame, Follow)
        refused = admit_follow(ev.frame, nonce=ev.nonce, secret=self.secret, me=me, members=members)
        unknown = refused is not None and refused.code is ErrorCode.FORBIDDEN
        if unknown and ev.frame.id not in members and not final and len(self.held) < MAX_HELD:
            self.held[id(ev.link)] = ev
            return True
        return refused

    def take_held(self) -> list[FollowerFrame]:
        held, self.held = list(self.held.values()), {}
        return held

    def drop(self, link: Any) -> None:
        self.held.pop(id(link), None)
