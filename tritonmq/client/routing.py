"""Routing by slot, pure: which group owns a topic and which brokers to try for a group.

Part of the client rules (docs/protocol.md §4 and §11): ``slot = crc32(topic) % slots``,
the slot's owner is the topic's group; with no slot map there is one group and every
topic goes to the first group by name. A group's candidates are its primary's URL,
then its other members.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tritonmq.core.slots import SlotMap


@dataclass(frozen=True, slots=True)
class ClusterView:
    """What a cluster read (ZooKeeper or a broker's ``meta``) said, as the client routes by it."""

    groups: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    slots: SlotMap | None = None

    @classmethod
    def from_info(cls, info: Mapping[str, Any]) -> ClusterView:
        """``{"groups": {g: {"primary_url", "members", ...}}, "slots": SlotMap dict or None}``."""
        slots = info.get("slots")
        return cls(dict(info.get("groups") or {}), SlotMap.from_dict(slots) if slots else None)

    def group_of(self, topic: str) -> str:
        if self.slots is not None:
            return self.slots.group_of(topic)
        if self.groups:  # no slot map: a single-group cluster
            return sorted(self.groups)[0]
        return ""

    def candidates(self, group: str) -> list[str]:
        """The group's primary first, then its other live members."""
        g = self.groups.get(group, {})
        urls = [g["primary_url"]] if g.get("primary_url") else []
        urls += [u for u in g.get("members", {}).values() if u not in urls]
        return urls

    def member_url(self, group: str, broker: str) -> str | None:
        url = self.groups.get(group, {}).get("members", {}).get(broker)
        return url if isinstance(url, str) else None

    def urls(self) -> list[str]:
        """Every broker URL the view names, in a stable order."""
        out: list[str] = []
        for g in sorted(self.groups):
            out += [u for u in self.candidates(g) if u not in out]
        return out
