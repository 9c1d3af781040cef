"""Replication links (``tritonmq.repl.v1``): the backup's follow loop and the primary's side.

A backup connects to the primary, says where its log ends and which epochs it
holds, truncates to where the primary says they agree, then appends and
acknowledges batches. Entries for several caught-up backups are encoded once.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import time
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import websockets
from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed, InvalidHandshake

from tritonmq.core.actions import Replicate
from tritonmq.core.group import Member
from tritonmq.core.replication import PrimaryCore, Rejected
from tritonmq.errors import ProtocolError, ReplicationError
from tritonmq.wire import codec
from tritonmq.wire.frames import (
    REPL_SUBPROTOCOL,
    Append,
    ErrorCode,
    Follow,
    Leader,
    Purge,
    ReplAck,
)

if TYPE_CHECKING:
    from tritonmq.broker.node import Broker

log = logging.getLogger("tritonmq.replica")
REPL_MAX_FRAME = 256 * 1024 * 1024
DEAD_AFTER_REFUSALS = 3
DEAD_AFTER_SECONDS = 0.1


# --- primary side -------------------------------------------------------------------


async def serve_follower(broker: Broker, ws: ServerConnection) -> None:
    fid = ""
    p: PrimaryCore | None = None
    try:
        try:
            hello = codec.decode_repl(await asyncio.wait_for(ws.recv(), 10))
        except ProtocolError as e:
            await ws.send(codec.enc_error(ErrorCode(e.code), e.message))
            return
        p = broker.primary
        if not isinstance(hello, Follow):
            await ws.send(
                codec.enc_error(ErrorCode.BAD_REQUEST, "a replication link starts with follow")
            )
            return
        if p is None or hello.group != broker.cfg.group:
            await ws.send(codec.enc_error(ErrorCode.NOT_PRIMARY, "not the primary of this group"))
            return
        res = p.attach(
            hello.id, hello.boot, hello.epoch, hello.epochs, hello.last_ts, time.monotonic()
        )
        if isinstance(res, Rejected):
            await ws.send(codec.enc_error(res.code, res.message))
            return
        fid = hello.id
        old = broker.repl_links.pop(fid, None)
        if old is not None:
            asyncio.ensure_future(old.close(1000, "replaced by a newer link"))
        broker.repl_links[fid] = ws
        await ws.send(codec.enc_leader(res))
        log.info("%s follows from ts %d (epoch %d)", fid, res.truncate_to, res.epoch)
        broker.perform(p.pump(fid))
        async for data in ws:
            frame = codec.decode_repl(data)
            if isinstance(frame, ReplAck) and broker.primary is p:
                broker.perform(p.acked(fid, frame.epoch, frame.ts, time.monotonic()))
    except (ConnectionClosed, ProtocolError, TimeoutError) as e:
        log.debug("replication link from %s ended: %s", fid or "?", e)
    finally:
        if fid and broker.repl_links.get(fid) is ws:
            del broker.repl_links[fid]
            if p is not None and broker.primary is p:
                p.detach(fid, time.monotonic())
                log.info("%s stopped following", fid)


def send_entries(broker: Broker, p: PrimaryCore, a: Replicate) -> None:
    links = [broker.repl_links[f] for f in a.followers if f in broker.repl_links]
    if not links:
        return
    websockets.broadcast(links, codec.enc_append(*p.entries_for(a.start, a.end)))


def heartbeat(broker: Broker, p: PrimaryCore) -> None:
    """Tell caught-up backups the commit point when no new entries would carry it."""
    links = [broker.repl_links[f] for f in p.heartbeat() if f in broker.repl_links]
    if links:
        websockets.broadcast(links, codec.enc_append(p.epoch, p.commit_ts, p.log.last_ts + 1, []))


# --- backup side --------------------------------------------------------------------


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


async def follow(broker: Broker, primary: Member, epoch: int) -> None:
    """Follow ``primary`` at ``epoch`` until cancelled, reconnecting as needed."""
    backoff = 0.05
    core = broker.backup
    assert core is not None and broker.me is not None
    url = primary.repl_url or primary.url
    local_addr = dial_from(broker.cfg.listen, url)
    refused, first_refused = 0, 0.0
    while True:
        try:
            async with websockets.connect(
                url,
                local_addr=local_addr,
                subprotocols=[REPL_SUBPROTOCOL],  # type: ignore[list-item]
                max_size=REPL_MAX_FRAME,
                compression=None,
                open_timeout=5,
                ping_interval=5,
                ping_timeout=10,
            ) as ws:
                log_ = broker.log
                await ws.send(
                    codec.enc_follow(
                        Follow(
                            broker.cfg.group,
                            broker.me.id,
                            broker.me.boot,
                            epoch,
                            log_.last_ts,
                            list(log_.epochs),
                        )
                    )
                )
                reply = await ws.recv()
                try:
                    lead = codec.decode_repl(reply, max_frame=REPL_MAX_FRAME)
                except ProtocolError:
                    err = codec.decode_broker(reply)
                    raise ReplicationError(f"{err.get('code')}: {err.get('message')}") from None
                if not isinstance(lead, Leader):
                    raise ReplicationError("expected a leader frame")
                cut = core.on_leader(lead)
                if cut:
                    log.warning("truncated %d entries not in the history of epoch %d", cut, epoch)
                log.info(
                    "caught up from ts %d of %s, epoch %d", lead.truncate_to, primary.id, epoch
                )
                backoff = 0.05
                async for data in ws:
                    frame = codec.decode_repl(data)
                    if isinstance(frame, Append):
                        ts = core.on_append(frame)
                        broker.commit_ts = core.commit_ts
                        await ws.send(codec.enc_rack(epoch, ts))
                    elif isinstance(frame, Purge):
                        core.on_purge(frame)
        except asyncio.CancelledError:
            raise
        except ConnectionRefusedError:
            # Nothing listens on the primary's port: its process is gone. A few refusals in
            # a row let us claim before ZooKeeper expires its session (a freeze or a
            # partition times out instead, and waits for the session).
            now = time.monotonic()
            refused, first_refused = refused + 1, first_refused if refused else now
            if refused >= DEAD_AFTER_REFUSALS and now - first_refused >= DEAD_AFTER_SECONDS:
                broker.suspect_dead(primary)
        except (
            OSError,
            ConnectionClosed,
            InvalidHandshake,
            ReplicationError,
            ProtocolError,
            TimeoutError,
        ) as e:
            refused = 0
            log.debug("following %s: %s; retrying", primary.id, e)
        except Exception:  # never stop following silently: that would stall the ISR for good
            log.exception("following %s failed unexpectedly; retrying", primary.id)
        await asyncio.sleep(backoff)
        backoff = min(backoff * 2, 0.5)
