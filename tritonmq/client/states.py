"""The state of a client's connection to its group's primary.

Its own module so that :mod:`tritonmq.client.protocol` and the parts of the
protocol split from it (:mod:`tritonmq.client.consuming`) share it without an
import cycle.
"""

from __future__ import annotations

import enum


class ConnState(enum.Enum):
    DISCONNECTED = "disconnected"  # waiting to (re)connect
    RESOLVING = "resolving"  # asked for candidate URLs
    CONNECTING = "connecting"  # transport opening, or hello sent and meta awaited
    CONNECTED = "connected"  # talking to the group's primary
    CLOSED = "closed"  # for good
