"""The decode bounds every subprotocol's codec applies, in one place (issue 8): a frame's
bytes, records per frame, a value's bytes, and the elements a decode may build."""

from __future__ import annotations

from tritonmq.wire.codec import DEFAULT_MAX_ELEMENTS, DEFAULT_MAX_FRAME


class CodecLimits:
    """Base of the codecs: the bounds, the same keywords and defaults for each."""

    def __init__(
        self,
        *,
        max_frame: int = DEFAULT_MAX_FRAME,
        max_records: int = 10_000,
        max_value: int = 1024 * 1024,
        max_elements: int = DEFAULT_MAX_ELEMENTS,
    ) -> None:
        self.max_frame = max_frame
        self.max_records = max_records
        self.max_value = max_value
        self.max_elements = max_elements
