"""The Python client: asyncio first (:class:`Client`), with a small synchronous facade."""

from tritonmq.client.client import Client
from tritonmq.client.subscription import PresenceOptions, Subscription
from tritonmq.client.sync import SyncClient
from tritonmq.client.types import Ack, Fetched, FetchedRecord, Message
from tritonmq.wire.frames import PresenceMember

__all__ = [
    "Ack",
    "Client",
    "Fetched",
    "FetchedRecord",
    "Message",
    "PresenceMember",
    "PresenceOptions",
    "Subscription",
    "SyncClient",
]
