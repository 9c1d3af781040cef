"""Replication links (``tritonmq.repl.v1``): bytes in and out, every decision in the core.

The same listener answers another group's ``handover`` ask for a moving slot (M2.3).

The primary's side reads ``follow`` and ``rack`` frames from a follower's link; the
backup's side keeps one link to the primary open (reconnecting on a short back-off)
and reports how each attempt ends: refused (nothing listens: the process is gone),
timed out, closed, or rejected with an error frame.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import ssl
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import websockets
from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed, ConnectionClosedOK, InvalidHandshake

from tritonmq import tlsconfig
from tritonmq.core.events import (
    Event,
    FollowerFrame,
    FollowerGone,
    HandoverAsked,
    LinkEnd,
    LinkEvent,
    PrimaryFrame,
)
from tritonmq.core.group import Member
from tritonmq.errors import ProtocolError
from tritonmq.wire import codec, repl
from tritonmq.wire.frames import (
    REPL_SUBPROTOCOL,
    Append,
    Challenge,
    DedupPage,
    ErrorCode,
    Follow,
    HandoverAsk,
    Leader,
    Purge,
    ReplAck,
    SharedAck,
    SharedState,
)

log = logging.getLogger("tritonmq.replica")
REPL_MAX_FRAME = 256 * 1024 * 1024
FOLLOWER_MAX_FRAME = 1024 * 1024  # a follower sends only `follow` and `rack`: small frames
NONCE_BYTES = 32
CHALLENGE_TIMEOUT = 5.0  # a backup waits this long (seconds) for its primary's challenge


# --- primary side -------------------------------------------------------------------


async def serve_follower(ws: ServerConnection, feed: Callable[[Event], None], nonce: bytes) -> None:
    """Challenge the follower with ``nonce`` (its ``follow`` must sign it: the core
    checks), then feed its frames to the core until the link closes. A link the core has
    not admitted within ``repl_auth_timeout`` is closed by the listener's
    :class:`~tritonmq.broker.admission.Admission`: an idle outsider holds nothing."""
    try:
        await ws.send(repl.enc_challenge(Challenge(nonce)))
        async for data in ws:
            if not await _take(ws, data, feed, nonce):
                return
    except ConnectionClosed as e:
        log.debug("replication link ended: %s", e)
    finally:
        feed(FollowerGone(ws, time.monotonic()))


async def _take(
    ws: ServerConnection, data: bytes | str, feed: Callable[[Event], None], nonce: bytes
) -> bool:
    """Feed one follower frame to the core; False (after an error frame) to end the link."""
    try:
        frame = repl.decode_repl(data, max_frame=FOLLOWER_MAX_FRAME)
    except ProtocolError as e:
        await ws.send(codec.enc_error(ErrorCode(e.code), e.message))
        return False
    if isinstance(frame, HandoverAsk):  # another group's primary, for a moving slot (M2.3)
        feed(HandoverAsked(ws, frame, time.monotonic(), nonce))
        return True
    if not isinstance(frame, Follow | ReplAck | SharedAck):
        msg = "a follower sends follow/rack/sack"
        await ws.send(codec.enc_error(ErrorCode.BAD_REQUEST, msg))
        return False
    feed(FollowerFrame(ws, frame, time.monotonic(), nonce))
    return True


# --- backup side --------------------------------------------------------------------


async def challenge_of(ws: Any) -> bytes:
    """The nonce of the primary's first frame (a ``challenge``), which our ``follow`` signs."""
    async with asyncio.timeout(CHALLENGE_TIMEOUT):
        data = await ws.recv()
    frame = repl.decode_repl(data, max_frame=FOLLOWER_MAX_FRAME)
    if not isinstance(frame, Challenge):
        raise ProtocolError(f"the primary's first frame is {type(frame).__name__}, not challenge")
    return frame.nonce


def dial_from(listen: str, url: str) -> tuple[str, int] | None:
    """The local address to dial ``url`` from: our listen address when it can reach ``url``.

    A broker bound to one address of a multi-homed host (or, in an isolated dev
    cluster, to its own loopback address) then calls from that address, so the
    primary, a firewall or a test's partition proxy sees which broker is calling.
    None (any address) when either side is not an IP literal, for a wildcard
    listen address, and where a loopback source could not reach the target or
    the address families differ.
    """
    host = listen.rpartition(":")[0].strip("[]")
    try:
        src = ipaddress.ip_address(host)
    except ValueError:
        return None
    if src.is_unspecified:
        return None
    try:
        dst = ipaddress.ip_address(urlsplit(url).hostname or "")
    except ValueError:
        return None
    if dst.version != src.version or dst.is_loopback != src.is_loopback:
        return None
    return (str(src), 0)


async def follow(
    follow_id: int,
    primary: Member,
    listen: str,
    links: dict[int, Any],
    feed: Callable[[Event], None],
    *,
    tls: ssl.SSLContext | None = None,
) -> None:
    """Keep a link to ``primary`` open until cancelled; ``links[follow_id]`` is it while open.

    A ``wss://`` primary is verified with ``tls`` (from ``tls_ca``; None: the system's
    trust store): a certificate that does not verify is logged once and never followed.
    """
    backoff = 0.05
    url = primary.repl_url or primary.url
    local_addr = dial_from(listen, url)
    tls = tlsconfig.for_url(url, tls)
    tls_warned = False

    def report(what: LinkEnd, clean: bool = False, detail: str = "") -> None:
        feed(LinkEvent(follow_id, what, time.monotonic(), clean, detail))

    while True:
        try:
            async with websockets.connect(
                url,
                local_addr=local_addr,
                ssl=tls,
                subprotocols=[REPL_SUBPROTOCOL],  # type: ignore[list-item]
                max_size=REPL_MAX_FRAME,
                compression=None,
                open_timeout=5,
                ping_interval=5,
                ping_timeout=10,
                close_timeout=1,
            ) as ws:
                nonce = await challenge_of(ws)
                links[follow_id] = ws
                backoff = 0.05
                feed(LinkEvent(follow_id, LinkEnd.CONNECTED, time.monotonic(), nonce=nonce))
                async for data in ws:
                    try:
                        frame = repl.decode_repl(data, max_frame=REPL_MAX_FRAME)
                    except ProtocolError:
                        err = codec.decode_broker(data)
                        report(LinkEnd.REJECTED, detail=f"{err.get('code')}: {err.get('message')}")
                        break
                    if isinstance(frame, Leader | DedupPage | Append | Purge | SharedState):
                        feed(PrimaryFrame(follow_id, frame, time.monotonic()))
            report(LinkEnd.CLOSED, clean=True)
        except asyncio.CancelledError:
            raise
        except ConnectionRefusedError:
            report(LinkEnd.REFUSED)
        except ssl.SSLError as e:
            if tlsconfig.is_tls_failure(e) and not tls_warned:
                tls_warned = True
                log.warning("TLS handshake with primary %s at %s failed: %s", primary.id, url, e)
            report(LinkEnd.CLOSED, detail=f"TLS: {e}")
        except TimeoutError:
            report(LinkEnd.TIMED_OUT)
        except ConnectionClosedOK:
            report(LinkEnd.CLOSED, clean=True)
        except (OSError, ConnectionClosed, InvalidHandshake, ProtocolError) as e:
            report(LinkEnd.CLOSED, detail=str(e))
        except Exception:  # never stop following silently: that would stall the ISR for good
            log.exception("following %s failed unexpectedly; retrying", primary.id)
            report(LinkEnd.CLOSED, detail="unexpected error")
        finally:
            links.pop(follow_id, None)
        await asyncio.sleep(backoff)
        backoff = min(backoff * 2, 0.5)
