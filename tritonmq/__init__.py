"""TritonMQ: a real-time, fault-tolerant, in-memory, replicated publish/subscribe broker."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["Client", "__version__"]

if TYPE_CHECKING:
    from tritonmq.client import Client


def __getattr__(name: str) -> Any:
    # Lazy, so `python -m tritonmq broker` does not import the client library.
    if name == "Client":
        from tritonmq.client import Client

        return Client
    raise AttributeError(name)
