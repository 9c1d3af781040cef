"""One error tree for the whole project.

Every failure a caller may want to handle is a subclass of :class:`TritonError`.
Errors that cross the wire carry a stable string ``code`` and a ``retriable``
flag; the wire never carries tracebacks.

::

    TritonError
    ├── ConfigError                 bad settings or CLI input (exit status 2)
    │   └── InvalidName             a topic name outside the rule (tritonmq/wire/names.py)
    ├── ProtocolError               a frame that cannot be trusted
    │   ├── FrameTooLarge           code TOO_LARGE
    │   ├── MalformedFrame          code BAD_FRAME   (garbage, wrong types)
    │   └── UnknownOp               code UNKNOWN_OP
    ├── BrokerError                 an ``error`` frame from a broker
    │   ├── RetriableError          retriable=True
    │   │   ├── NotPrimary          code NOT_PRIMARY (carries where the primary is, if known)
    │   │   ├── NotEnoughReplicas   code NOT_ENOUGH_REPLICAS (ISR below min_insync)
    │   │   ├── Unavailable         code UNAVAILABLE (fenced, no ZooKeeper session)
    │   │   ├── WrongGroup          code WRONG_GROUP (the topic's slot belongs to another group)
    │   │   └── Full                code FULL (the group's memory limit is reached)
    │   └── RequestRejected         retriable=False (BAD_REQUEST and the protocol codes)
    │       └── Purged              code PURGED (records a reader still needed are gone)
    ├── ReplicationError            broker-to-broker
    │   ├── StaleEpoch              a frame from an older epoch
    │   └── LogGap                  an append that is not ``last + 1``
    ├── CoordinationError           ZooKeeper failures seen by the coord layer
    │   └── SlotHistoryError        a /slots/<n> znode that breaks the slot history's rules
    │       └── IllegalSlotTransition  a move step the slot's state does not allow
    └── ClientError                 raised by the Python client
        ├── PublishTimeout          no acknowledgement within the client's deadline
        ├── ClientClosed            the client was closed while a call was pending
        └── TlsError                code TLS: a broker's certificate did not verify (or no TLS)
"""

from __future__ import annotations

from tritonmq.wire.frames import ErrorCode


class TritonError(Exception):
    """Root of every TritonMQ error."""

    code: str = "INTERNAL"
    retriable: bool = False

    def __init__(self, message: str = "", *, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code


class ConfigError(TritonError):
    code = "CONFIG"


class InvalidName(ConfigError, ValueError):
    """A topic name the rule refuses (tritonmq/wire/names.py): empty, too long, ``.``/``..``,
    ``/``, a control character, or ``*``/``>`` (a pattern, which is not supported). Raised
    by the client before anything is sent; the broker refuses the same with BAD_REQUEST."""


class ProtocolError(TritonError):
    """A frame that cannot be trusted. ``id``/``sid`` name the request when they could be read."""

    code = "BAD_FRAME"
    id: int | None = None
    sid: int | None = None


class FrameTooLarge(ProtocolError):
    code = "TOO_LARGE"


class MalformedFrame(ProtocolError):
    code = "BAD_FRAME"


class UnknownOp(ProtocolError):
    code = "UNKNOWN_OP"


class BrokerError(TritonError):
    """An error frame received from a broker."""

    code = "INTERNAL"


class RetriableError(BrokerError):
    retriable = True
    code = "UNAVAILABLE"


class NotPrimary(RetriableError):
    code = "NOT_PRIMARY"

    def __init__(self, message: str = "", *, primary_url: str | None = None) -> None:
        super().__init__(message)
        self.primary_url = primary_url


class NotEnoughReplicas(RetriableError):
    code = "NOT_ENOUGH_REPLICAS"


class Unavailable(RetriableError):
    code = "UNAVAILABLE"


class WrongGroup(RetriableError):
    code = "WRONG_GROUP"

    def __init__(self, message: str = "", *, group: str | None = None) -> None:
        super().__init__(message)
        self.group = group


class Full(RetriableError):
    code = "FULL"


class RequestRejected(BrokerError):
    code = "BAD_REQUEST"


class Purged(RequestRejected):
    """Records a reader asked for (a resume point, a fetch range) were already purged.

    Raised instead of silently skipping them: ``first``..``last`` is the missing range
    when the broker said it.
    """

    code = "PURGED"

    def __init__(
        self, message: str = "", *, first: int | None = None, last: int | None = None
    ) -> None:
        super().__init__(message)
        self.first = first
        self.last = last


class Unauthenticated(RequestRejected):
    """The broker requires a token and got none, or one it could not verify."""

    code = "UNAUTHENTICATED"


class TokenExpired(RequestRejected):
    """The connection's token expired: ``Client.refresh_token`` with a fresh one."""

    code = "TOKEN_EXPIRED"


class Forbidden(RequestRejected):
    """The principal may not do this (its claims, or another principal's subscription)."""

    code = "FORBIDDEN"


_REFUSED: dict[str, type[RequestRejected]] = {
    c.code: c for c in (Unauthenticated, TokenExpired, Forbidden)
}


class ReplicationError(TritonError):
    code = "REPLICATION"


class StaleEpoch(ReplicationError):
    code = "STALE_EPOCH"


class LogGap(ReplicationError):
    code = "LOG_GAP"


class CoordinationError(TritonError):
    code = "COORDINATION"


class Fenced(CoordinationError):
    """A primary's write to ZooKeeper was refused: the group state moved past the version
    it holds (another broker was elected). Nothing was written."""


class SlotHistoryError(CoordinationError):
    """A slot znode that cannot be read as a slot history (docs/replication.md, M1)."""


class IllegalSlotTransition(SlotHistoryError):
    """A move step refused: the slot is not in a state that allows it (M1's table)."""


class ClientError(TritonError):
    code = "CLIENT"


class PublishTimeout(ClientError):
    code = "TIMEOUT"
    retriable = True


class ClientClosed(ClientError):
    code = "CLOSED"


class TlsError(ClientError):
    """The TLS handshake with every broker tried failed in a way no retry fixes: a certificate
    that does not chain to the CA the client trusts (``ca_file``), names another host or has
    expired, or a ``wss://`` URL of a broker that does not serve TLS. Not retriable."""

    code = "TLS"


_RETRIABLE: dict[str, type[RetriableError]] = {
    c.code: c for c in (NotPrimary, NotEnoughReplicas, Unavailable, Full)
}


def error_from_wire(
    code: str,
    message: str,
    retriable: bool,
    primary: str | None = None,
    group: str | None = None,
    *,
    first: int | None = None,
    last: int | None = None,
) -> BrokerError:
    """Build the typed exception for an ``error`` frame received from a broker.

    Whether a known code is retriable is decided by ``ErrorCode`` (wire/frames.py), not
    by the frame's flag; the flag counts only for a code this version does not know.
    """
    known = ErrorCode.known(code)
    if known is not None:
        retriable = known.retriable
    if code == "NOT_PRIMARY":
        return NotPrimary(message, primary_url=primary)
    if code == "WRONG_GROUP":
        return WrongGroup(message, group=group)
    if code == "PURGED":
        return Purged(message, first=first, last=last)
    cls = _RETRIABLE.get(code)
    if cls is not None:
        return cls(message)
    refused = _REFUSED.get(code)
    if refused is not None:
        return refused(message)
    if retriable:
        return RetriableError(message, code=code)
    return RequestRejected(message, code=code)
