"""How far each topic may be purged, and for how long retries are deduplicated.

Time enters only as ``now``: a small index of (time, committed ts) samples turns
"older than N seconds" into "ts at most T".
"""

from __future__ import annotations

from bisect import bisect_right
from collections import deque
from collections.abc import Iterable, Mapping

SAMPLE_EVERY = 0.05


class Retention:
    def __init__(
        self,
        *,
        default_s: float = 0.0,
        per_topic: Mapping[str, float] | None = None,
        dedup_window_s: float = 60.0,
    ) -> None:
        self.default_s = default_s
        self.per_topic = dict(per_topic or {})
        self.dedup_window_s = dedup_window_s
        self._times: deque[float] = deque()
        self._stamps: deque[int] = deque()

    def committed(self, commit_ts: int, now: float) -> None:
        """Note that everything up to ``commit_ts`` was committed by ``now``."""
        if self._stamps and (self._stamps[-1] >= commit_ts or now - self._times[-1] < SAMPLE_EVERY):
            return
        self._times.append(now)
        self._stamps.append(commit_ts)
        horizon = now - max([self.default_s, self.dedup_window_s, *self.per_topic.values()]) - 1
        while len(self._times) > 1 and self._times[1] <= horizon:
            self._times.popleft()
            self._stamps.popleft()

    def ts_before(self, t: float) -> int:
        """The last ts known committed at or before time ``t`` (0 if none)."""
        i = bisect_right(self._times, t)
        return self._stamps[i - 1] if i else 0

    def retention_of(self, topic: str) -> float:
        return self.per_topic.get(topic, self.default_s)

    def purge_points(
        self, topics: Iterable[str], holds: Mapping[str, int], commit_ts: int, now: float
    ) -> dict[str, int]:
        """Per topic: purge up to here (committed, let go of by every subscription, old enough)."""
        out: dict[str, int] = {}
        for topic in topics:
            upto = min(holds.get(topic, commit_ts), commit_ts)
            keep_s = self.retention_of(topic)
            if keep_s > 0:
                upto = min(upto, self.ts_before(now - keep_s))
            if upto > 0:
                out[topic] = upto
        return out

    def forget_point(self, now: float) -> int:
        """Purged records committed before this ts are no longer deduplicated."""
        return self.ts_before(now - self.dedup_window_s)
