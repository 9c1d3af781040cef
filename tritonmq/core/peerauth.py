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

from tritonmq.core.group import Member
from tritonmq.core.replication import Rejected
from tritonmq.wire.frames import ErrorCode, Follow

PROOF_CONTEXT = b"tritonmq.repl.v1 follow\n"


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
