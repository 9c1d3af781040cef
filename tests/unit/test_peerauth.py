"""Follow admission: the cluster proof, then membership and boot in the ZooKeeper view."""

from __future__ import annotations

import pytest

from tritonmq.core.events import FollowerFrame
from tritonmq.core.group import Member
from tritonmq.core.peerauth import MAX_HELD, FollowGate, admit_follow, follow_proof
from tritonmq.core.replication import Rejected
from tritonmq.wire.frames import ErrorCode, Follow

SECRET = b"s" * 32
NONCE = b"n" * 32
MEMBERS = {m: Member(m, f"ws://{m}:1", f"boot-{m}") for m in ("a", "b")}


def follow(fid: str = "b", boot: str = "boot-b", proof: bytes | None = None) -> Follow:
    if proof is None:
        proof = follow_proof(SECRET, NONCE, "g1", fid, boot)
    return Follow("g1", fid, boot, 1, 0, [], proof)


def admit(frame: Follow, secret: bytes | None = SECRET, nonce: bytes = NONCE) -> ErrorCode | None:
    refused = admit_follow(frame, nonce=nonce, secret=secret, me="a", members=MEMBERS)
    return None if refused is None else refused.code


def test_a_member_with_its_boot_and_a_proof_of_this_nonce_is_admitted() -> None:
    assert admit(follow()) is None


@pytest.mark.parametrize(
    "frame",
    [
        follow(proof=b""),  # no proof at all
        follow(proof=follow_proof(b"x" * 32, NONCE, "g1", "b", "boot-b")),  # another secret
        follow(proof=follow_proof(SECRET, b"m" * 32, "g1", "b", "boot-b")),  # another link's
        follow(proof=follow_proof(SECRET, NONCE, "g1", "c", "boot-b")),  # signed for another id
    ],
    ids=["none", "other-secret", "replayed-nonce", "other-id"],
)
def test_a_follow_without_a_valid_proof_is_unauthenticated(frame: Follow) -> None:
    assert admit(frame) is ErrorCode.UNAUTHENTICATED


def test_the_proof_is_checked_before_membership_so_outsiders_learn_nothing() -> None:
    assert admit(follow("zz", "boot-zz", proof=b"\0" * 32)) is ErrorCode.UNAUTHENTICATED


def test_an_empty_nonce_admits_nobody() -> None:
    frame = Follow("g1", "b", "boot-b", 1, 0, [], follow_proof(SECRET, b"", "g1", "b", "boot-b"))
    assert admit(frame, nonce=b"") is ErrorCode.UNAUTHENTICATED


@pytest.mark.parametrize("secret", [SECRET, None], ids=["secured", "insecure"])
def test_an_unknown_id_a_wrong_boot_and_our_own_id_are_forbidden(secret: bytes | None) -> None:
    assert admit(follow("zz", "boot-zz"), secret) is ErrorCode.FORBIDDEN  # attack 1
    assert admit(follow("b", "boot-old"), secret) is ErrorCode.FORBIDDEN
    assert admit(follow("a", "boot-a"), secret) is ErrorCode.FORBIDDEN


def test_proofs_differ_for_every_field_and_are_empty_without_a_secret() -> None:
    base = ("g1", "b", "boot-b")
    proofs = {
        follow_proof(SECRET, NONCE, *base),
        follow_proof(SECRET, NONCE, "g2", "b", "boot-b"),
        follow_proof(SECRET, NONCE, "g1", "bb", "oot-b"),  # same bytes run together
        follow_proof(SECRET, NONCE, "g1", "b", "boot-c"),
    }
    assert len(proofs) == 4 and all(len(p) == 32 for p in proofs)
    assert follow_proof(None, NONCE, *base) == b""


def test_the_gate_holds_a_few_unknown_ids_for_a_re_read_and_refuses_the_rest() -> None:
    gate = FollowGate(SECRET)
    evs = [FollowerFrame(f"link-{i}", follow(f"x{i}", "boot"), 0.0, NONCE) for i in range(10)]
    verdicts = [gate.judge(ev, "a", MEMBERS, final=False) for ev in evs]
    assert verdicts[:MAX_HELD] == [True] * MAX_HELD
    assert all(isinstance(v, Rejected) for v in verdicts[MAX_HELD:])
    gate.drop(evs[0].link)
    held = gate.take_held()
    assert [ev.link for ev in held] == [f"link-{i}" for i in range(1, MAX_HELD)]
    refused = gate.judge(held[0], "a", MEMBERS, final=True)  # the re-read did not show it
    assert isinstance(refused, Rejected) and refused.code is ErrorCode.FORBIDDEN
    assert gate.judge(FollowerFrame("l", follow(), 0.0, NONCE), "a", MEMBERS, final=False) is None


def test_the_gate_never_holds_a_follow_without_a_valid_proof() -> None:
    gate = FollowGate(SECRET)
    refused = gate.judge(
        FollowerFrame("l", follow("x", proof=b""), 0.0, NONCE), "a", MEMBERS, final=False
    )
    assert isinstance(refused, Rejected) and refused.code is ErrorCode.UNAUTHENTICATED
    assert gate.take_held() == []


def test_a_handover_proof_binds_the_nonce_and_what_is_asked_and_is_no_follow_proof() -> None:
    from tritonmq.core.peerauth import admit_handover, handover_proof
    from tritonmq.wire.frames import HandoverAsk

    secret = b"k" * 32
    proof = handover_proof(secret, b"n1", "g2", "x", "bx", 3, 100)
    assert (
        admit_handover(HandoverAsk("g2", "x", "bx", 3, 100, proof), nonce=b"n1", secret=secret)
        is None
    )
    for frame, nonce in [
        (HandoverAsk("g2", "x", "bx", 3, 100, proof), b"n2"),  # replayed on another link
        (HandoverAsk("g2", "x", "bx", 4, 100, proof), b"n1"),  # another slot
        (HandoverAsk("g2", "x", "bx", 3, 99, proof), b"n1"),  # another seal point
        (HandoverAsk("g2", "x", "bx", 3, 100, follow_proof(secret, b"n1", "g2", "x", "bx")), b"n1"),
    ]:
        refused = admit_handover(frame, nonce=nonce, secret=secret)
        assert refused is not None and refused.code is ErrorCode.UNAUTHENTICATED
