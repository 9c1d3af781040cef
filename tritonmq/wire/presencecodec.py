"""The presence frames of ``tritonmq.v1`` (docs/protocol.md "Presence"), encoded and checked.

Kept out of :mod:`tritonmq.wire.codec` so that module stays one screenful of ops per
direction; the codec calls these for ``sub``'s presence fields, ``presence``,
``members``, ``join`` and ``leave``. JSON (:mod:`tritonmq.wire.jsoncodec`) carries them
unchanged: they hold no binary fields.
"""

from __future__ import annotations

from typing import Any

from tritonmq.errors import MalformedFrame
from tritonmq.wire.fields import int_field
from tritonmq.wire.frames import Join, Leave, Members, PresenceMember

MAX_TOPIC_LEN = 249


def sub_fields(obj: dict[str, Any]) -> tuple[bool, str]:
    """A ``sub``'s ``presence`` (bool) and ``info`` (str, only with presence); nil: absent."""
    presence = obj.get("presence")
    presence = False if presence is None else presence
    if type(presence) is not bool:
        raise MalformedFrame("'presence' must be a boolean")
    info = obj.get("info")
    info = "" if info is None else info
    if not isinstance(info, str):
        raise MalformedFrame("'info' must be a string")
    if info and not presence:
        raise MalformedFrame("'info' is for subscriptions with presence only")
    return presence, info


def _topic(obj: dict[str, Any]) -> str:
    v = obj.get("topic")
    if not isinstance(v, str) or not 0 < len(v) <= MAX_TOPIC_LEN:
        raise MalformedFrame(f"'topic' must be a non-empty string of at most {MAX_TOPIC_LEN}")
    return v


def _member(raw: Any) -> PresenceMember:
    if not isinstance(raw, dict):
        raise MalformedFrame("a presence member must be a map")
    fields = [raw.get(k, "") for k in ("client", "user", "info")]
    if not all(isinstance(v, str) for v in fields):
        raise MalformedFrame("a presence member's client, user and info must be strings")
    return PresenceMember(*fields)


def decode(obj: dict[str, Any]) -> Members | Join | Leave:
    """A ``members``, ``join`` or ``leave`` frame from the broker."""
    op = obj["op"]
    if op == "members":
        raw = obj.get("members", ())
        if type(raw) is not tuple:
            raise MalformedFrame("'members' must be an array")
        return Members(int_field(obj, "id"), _topic(obj), tuple(map(_member, raw)))
    kind = Join if op == "join" else Leave
    return kind(int_field(obj, "sid"), _topic(obj), _member(obj.get("member")))


def member_map(m: PresenceMember) -> dict[str, str]:
    return {"client": m.client, "user": m.user, "info": m.info}


def members_map(frame: Members) -> dict[str, Any]:
    members = [member_map(m) for m in frame.members]
    return {"op": "members", "id": frame.id, "topic": frame.topic, "members": members}


def event_map(frame: Join | Leave) -> dict[str, Any]:
    """A ``join`` or ``leave`` push to one subscription."""
    op = "join" if isinstance(frame, Join) else "leave"
    return {"op": op, "sid": frame.sid, "topic": frame.topic, "member": member_map(frame.member)}
