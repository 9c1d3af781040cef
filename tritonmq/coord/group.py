"""The broker's view of its group in ZooKeeper: members, state, session.

It translates only: watches become a wake-up of the broker's reconcile loop,
and the broker asks it to create or compare-and-set the state znode. Every
decision is made in :mod:`tritonmq.core.group`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any

from kazoo.client import KazooState
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from tritonmq.coord import paths
from tritonmq.coord.bridge import to_future
from tritonmq.coord.inspect import read_cluster
from tritonmq.coord.slots import cluster_path, parse_cluster, slot_path
from tritonmq.coord.zkclient import BLIPS, ClusterAcls, ZkCredential, new_client, secure
from tritonmq.core.events import SessionState
from tritonmq.core.group import GroupState, Member
from tritonmq.core.slothistory import SlotHistory
from tritonmq.core.slots import SlotMap
from tritonmq.errors import SlotHistoryError

log = logging.getLogger("tritonmq.coord")


Session = SessionState  # the core's enum: the coordinator reports, the core decides
Spawn = Callable[[Coroutine[Any, Any, Any], str], Any]
FIRST_WARNING_S = 2.0  # ZooKeeper not there at start: said after this, then every timeout
STOP_TIMEOUT = 3.0  # closing the session never holds a planned stop longer than this


def group_paths(chroot: str, group: str) -> tuple[str, str]:
    return paths.members(chroot, group), paths.state(chroot, group)


class GroupCoordinator:
    def __init__(
        self,
        hosts: str,
        chroot: str,
        group: str,
        me: Member,
        *,
        session_timeout: float,
        on_change: Callable[[], None],
        spawn: Spawn | None = None,
        auth: ZkCredential | None = None,
        reader: ZkCredential | None = None,
    ) -> None:
        self.me = me
        self.group = group
        # None: an insecure cluster, znodes open to anyone
        self.acls = ClusterAcls(auth, reader) if auth is not None else None
        self.members_path, self.state_path = group_paths(chroot, group)
        self.zk = new_client(
            hosts,
            timeout=session_timeout,
            auth=auth,
            reader=reader,
            connection_retry={"max_tries": -1, "max_delay": 0.5},
        )
        self.session = Session.LOST
        self.suspended_since = 0.0
        self.state: GroupState | None = None
        self.members: dict[str, Member] = {}
        self.slot_map: SlotMap | None = None  # None: no map yet, every topic is ours
        self.slot_histories: tuple[SlotHistory, ...] | None = None  # read with the map
        self.chroot = chroot
        self.registered = False
        self._on_change = on_change
        self._spawn: Spawn = spawn or self._keep
        self._tasks: set[asyncio.Task[Any]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._refreshing = False
        self._again = False
        self._refreshed: asyncio.Future[bool] | None = None  # the running refresh's outcome
        self._closing = False
        self._started = False

    # --- lifecycle ---------------------------------------------------------------

    async def start(self, timeout: float = 15.0) -> None:
        """Connect and register. ZooKeeper out of reach (at start, or lost while we register)
        is waited for as long as it takes, with a warning every ``timeout`` seconds: a broker
        started during an outage registers when ZooKeeper returns (issue 26; it exited)."""
        self._loop = asyncio.get_running_loop()
        self.zk.add_listener(self._session_listener)
        self.zk.start_async()  # kazoo reconnects for ever (connection_retry max_tries -1)
        while True:
            await self._until_connected(timeout)
            self.session = Session.CONNECTED
            try:
                if self.acls is not None:  # our path closed to anyone without the credential
                    await asyncio.to_thread(secure, self.zk, self.chroot, self.acls, self.group)
                await self._call(self.zk.ensure_path_async(self.members_path))
                await self.register()
                break
            except BLIPS as e:
                log.warning("lost ZooKeeper while registering (%s); waiting for it", e)
        self._started = True
        await self.refresh()

    async def _until_connected(self, every: float) -> None:
        """Until the session is connected; a warning each ``every`` seconds meanwhile."""
        loop = asyncio.get_running_loop()
        back = asyncio.Event()

        def listener(state: str) -> bool:  # on kazoo's thread
            if state == KazooState.CONNECTED:
                loop.call_soon_threadsafe(back.set)
                return True  # removes it
            return False

        self.zk.add_listener(listener)
        try:
            waited, wait = 0.0, min(every, FIRST_WARNING_S)
            while not self.zk.connected:
                try:
                    async with asyncio.timeout(wait):
                        await back.wait()
                except TimeoutError:
                    waited, wait = waited + wait, every
                    log.warning(
                        "waiting for ZooKeeper at %s (%.0fs so far); the broker registers once "
                        "it answers",
                        self.zk.hosts,
                        waited,
                    )
        finally:
            self.zk.remove_listener(listener)

    def _keep(self, coro: Coroutine[Any, Any, Any], name: str) -> None:
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def stop(self, timeout: float = STOP_TIMEOUT) -> None:
        """Close the session cleanly: our ephemeral member znode vanishes at once.

        On a daemon thread and with a deadline: with ZooKeeper unreachable kazoo's
        stop can block for long, and a pool thread would hold the process's exit.
        """
        self._closing = True
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()

        def settle() -> None:
            if not done.done():
                done.set_result(None)

        def close() -> None:
            try:
                self.zk.stop()
                self.zk.close()
            except Exception as e:  # shutting down anyway
                log.warning("closing ZooKeeper session: %s", e)
            finally:
                loop.call_soon_threadsafe(settle)

        threading.Thread(target=close, name="zk-stop", daemon=True).start()
        try:
            async with asyncio.timeout(timeout):
                await done
        except TimeoutError:
            log.warning("ZooKeeper session did not close within %.1fs; exiting anyway", timeout)

    def _session_listener(self, state: str) -> None:
        # Runs on kazoo's thread: hand over to the loop and return at once.
        if self._loop is not None and not self._closing:
            self._loop.call_soon_threadsafe(self._on_session, state)

    def _on_session(self, state: str) -> None:
        if state == KazooState.LOST:
            self.session = Session.LOST
            self.registered = False
        elif state == KazooState.SUSPENDED:
            self.session = Session.SUSPENDED
            self.suspended_since = time.monotonic()
        else:
            self.session = Session.CONNECTED
            if self._started:
                self._spawn(self._resume(), "zk-resume")
        log.info("zookeeper session %s", self.session.value)
        self._on_change()

    async def _resume(self) -> None:
        try:
            if not self.registered:
                await self.register()
            await self.refresh()
        except Exception as e:
            log.warning("re-registering after reconnect failed: %s", e)

    # --- registration ------------------------------------------------------------

    async def register(self) -> None:
        """Create our ephemeral member znode, waiting out a previous incarnation's session."""
        path = f"{self.members_path}/{self.me.id}"
        znode = {"url": self.me.url, "boot": self.me.boot}
        if self.me.repl_url:
            znode["repl_url"] = self.me.repl_url
        data = json.dumps(znode).encode()
        warned = False
        while not self._closing:
            try:
                await self._call(self.zk.create_async(path, data, ephemeral=True))
                self.registered = True
                return
            except NodeExistsError:
                try:
                    _, stat = await self._call(self.zk.get_async(path))
                except NoNodeError:
                    continue
                if stat.ephemeralOwner == self.zk.client_id[0]:
                    # ours: created by this session before a reconnect. Not the boot: a
                    # broker back from its segment files keeps its boot, and the znode of
                    # its previous process vanishes with that process's session
                    self.registered = True
                    return
                if not warned:
                    log.info(
                        "member %s is still registered by an earlier run; waiting for its session to expire",
                        self.me.id,
                    )
                    warned = True
                gone = asyncio.Event()
                exists = await self._call(self.zk.exists_async(path, watch=self._setter(gone)))
                if exists is not None:
                    try:
                        async with asyncio.timeout(30):
                            await gone.wait()
                    except TimeoutError:
                        pass

    def _setter(self, event: asyncio.Event) -> Any:
        loop = asyncio.get_running_loop()
        return lambda _e: loop.call_soon_threadsafe(event.set)

    # --- reads and watches -------------------------------------------------------

    def _watch(self, _event: Any) -> None:
        if self._loop is not None and not self._closing:
            self._loop.call_soon_threadsafe(lambda: self._spawn(self.refresh(), "zk-refresh"))

    async def refresh(self) -> bool:
        """Re-read members and state, re-arming one-shot watches; coalesces concurrent calls.
        Returns once a read begun after the call is done (a caller that comes while one runs
        waits for the read that runs again for it: what it then holds may judge a write
        made before the call); False when the read failed."""
        if self._refreshing and self._refreshed is not None:
            self._again = True
            return await asyncio.shield(self._refreshed)
        self._refreshing = True
        done = self._refreshed = asyncio.get_running_loop().create_future()
        ok = False
        try:
            while True:
                self._again = False
                await self._read()
                if not self._again:
                    break
            ok = True
        except Exception as e:
            log.debug("refresh failed (%s); will retry on reconnect", e)
        finally:
            self._refreshing = False
            self._refreshed = None
            done.set_result(ok)
        self._on_change()
        return ok

    async def _read(self) -> None:
        children = await self._call(
            self.zk.get_children_async(self.members_path, watch=self._watch)
        )
        members: dict[str, Member] = {}
        for child in children:
            try:
                raw, _ = await self._call(
                    self.zk.get_async(f"{self.members_path}/{child}", watch=self._watch)
                )
            except NoNodeError:
                continue
            d = json.loads(raw)
            members[child] = Member(child, d["url"], d["boot"], d.get("repl_url", ""))
        self.members = members
        try:
            raw, stat = await self._call(self.zk.get_async(self.state_path, watch=self._watch))
            self.state = GroupState.from_json(raw, stat.version)
        except NoNodeError:
            await self._call(self.zk.exists_async(self.state_path, watch=self._watch))
            self.state = None
        await self._read_slots()

    async def _read_slots(self) -> None:
        """Re-read the slot map when ``/cluster``'s version moved (watched, like the rest)."""
        path = cluster_path(self.chroot)
        try:
            raw, _ = await self._call(self.zk.get_async(path, watch=self._watch))
        except NoNodeError:
            await self._call(self.zk.exists_async(path, watch=self._watch))
            return
        slots, version = parse_cluster(raw)
        if self.slot_map is not None and self.slot_map.version == version:
            return
        gets = [self._call(self.zk.get_async(slot_path(self.chroot, n))) for n in range(slots)]
        raws = [raw for raw, _ in await asyncio.gather(*gets)]
        owners = [str(json.loads(raw)["group"]) for raw in raws]
        try:
            self.slot_histories = tuple(SlotHistory.decode(raw) for raw in raws)
        except SlotHistoryError as e:  # routed by owner alone, as before moves existed
            log.error("a slot znode breaks the history's rules: %s", e)
            self.slot_histories = None
            self.slot_map = SlotMap(tuple(owners), version)
            return
        self.slot_map = SlotMap.of_histories(self.slot_histories, version)

    async def read_groups(self) -> dict[str, Any]:
        """Every group's epoch, primary, ISR and live members (as `tritonmq status` reads them)."""
        info = await asyncio.to_thread(read_cluster, self.zk, self.chroot, with_slots=False)
        groups: dict[str, Any] = info["groups"]
        return groups

    # --- writes ------------------------------------------------------------------

    async def create_state(self, state: GroupState) -> GroupState | None:
        try:
            await self._call(self.zk.create_async(self.state_path, state.to_json(), makepath=True))
        except NodeExistsError:
            return None
        new = GroupState(state.epoch, state.primary, state.isr, state.boots, state.start_ts, 0)
        if self.state is None:
            self.state = new
        return new

    async def cas_state(self, state: GroupState) -> GroupState | None:
        """Write ``state`` if the znode is still at ``state.version``; the written state, or None."""
        try:
            stat = await self._call(
                self.zk.set_async(self.state_path, state.to_json(), version=state.version)
            )
        except (BadVersionError, NoNodeError):
            return None
        new = GroupState(
            state.epoch, state.primary, state.isr, state.boots, state.start_ts, stat.version
        )
        if self.state is None or self.state.version < new.version:
            self.state = new
        return new

    async def call(self, async_result: Any) -> Any:
        """Await a kazoo async call from the event loop."""
        return await self._call(async_result)

    async def _call(self, async_result: Any) -> Any:
        assert self._loop is not None
        return await to_future(self._loop, async_result)
