"""A replica's segment files: its log's operations (core/journal.py), each framed with a
CRC32, appended in order, rolled by size, deleted whole by retention.

A frame is ``magic (1 byte) | crc32 of the body (4) | length of the body (4) | body``,
the body one operation in msgpack. One frame per operation: the primary notes one
``APPEND`` per batch it stamped, so a batch is one ``write(2)`` and one CRC. Recovery reads
the frames in order and stops at the first that does not check out: a frame cut short at
the end of the newest segment is a *torn tail* (a write the process or the host did not
finish; nothing acknowledged is in it, as acknowledgements follow writes); anything else
(a CRC mismatch, a bad header, a cut frame before the end) is *damage*: the log ends
there, the rest is deleted, and the broker comes back as a new incarnation that copies
what it lacks from its primary (docs/replication.md D3).

Blocking file I/O: :meth:`SegmentStore.recover` and :meth:`SegmentStore.sync` run off the
event loop (``asyncio.to_thread``); :meth:`SegmentStore.append` is a ``write(2)`` of one
event's operations to the OS, cheap enough in line.
"""

from __future__ import annotations

import os
import struct
import threading
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgpack

from tritonmq.core import journal
from tritonmq.core.journal import Op

MAGIC = 0xA7  # frame format 1
HEADER = struct.Struct(">BII")  # magic, crc32 of the body, length of the body
MAX_BODY = 1 << 30  # a length beyond this is damage, not a frame
SUFFIX = ".seg"
BASE_FILE = "base.frame"  # what segments deleted by retention left (a BASE operation)


def encode(op: Op) -> bytes:
    body = msgpack.packb(op, use_bin_type=True)
    return HEADER.pack(MAGIC, zlib.crc32(body), len(body)) + body


def decode_body(body: bytes) -> Op:
    """One operation as it was noted (tuples where the log keeps tuples)."""
    raw = msgpack.unpackb(body, raw=False, strict_map_key=False)
    tag = raw[0]
    if tag == journal.APPEND:
        entries = [None if e is None else (e[0], tuple(e[1])) for e in raw[2]]
        return (tag, raw[1], entries)
    if tag == journal.EPOCHS:
        return (tag, raw[1], [tuple(e) for e in raw[2]])
    if tag == journal.PURGE_POINTS:
        return (tag, [tuple(p) for p in raw[1]])
    if tag == journal.DEDUP:
        return (tag, [tuple(t) for t in raw[1]])
    if tag == journal.BASE:
        epochs, points, published = ([tuple(x) for x in raw[i]] for i in (2, 3, 5))
        return (tag, raw[1], epochs, points, raw[4], published, *raw[6:])
    return tuple(raw)


@dataclass(slots=True)
class Segment:
    """One file: its number, size, and what it covers (for retention)."""

    n: int
    path: Path
    size: int = 0
    end_ts: int = 0  # the highest ts appended up to the end of this segment (0: none yet)
    newest_ms: int = 0  # the newest wall-clock ms a PUBLISHED operation in it says


@dataclass(slots=True)
class Recovered:
    """What :meth:`SegmentStore.recover` found: the operations to replay, and where the
    valid log ended if it did not end at the end of the files."""

    ops: list[Op] = field(default_factory=list)
    frames: int = 0
    bytes: int = 0
    cut: str = ""  # "": every frame checked out; "torn tail"; or the damage found
    cut_at: str = ""  # file:offset of the cut
    dropped_bytes: int = 0  # bytes after the cut, deleted

    @property
    def damaged(self) -> bool:
        """Did the files lose something before their end (not a write cut short)?"""
        return bool(self.cut) and self.cut != "torn tail"


class StorageError(Exception):
    """The segment files cannot be written (disk full, unwritable ``data_dir``)."""


class SegmentStore:
    """The segment files of one replica under ``directory``."""

    def __init__(self, directory: str | Path, segment_bytes: int = 64 * 1024 * 1024) -> None:
        self.dir = Path(directory)
        self.segment_bytes = segment_bytes
        self.segments: list[Segment] = []
        self._fd = -1
        self._lock = threading.Lock()  # the fds handed between the loop and the sync thread
        self._to_sync: list[int] = []  # fds of rolled segments, fsynced then closed by sync()
        self._dir_dirty = False
        self.written = 0  # bytes written since open
        self.synced_writes = 0  # ``written`` as of the start of the last completed sync

    # --- recovery (blocking: off the event loop) -------------------------------------------

    def recover(self) -> Recovered:
        """Read every segment, cut the log at the first frame that does not check out, and
        open the newest segment for appending."""
        self.dir.mkdir(parents=True, exist_ok=True)
        out = Recovered()
        base = self.dir / BASE_FILE
        through = 0  # segments up to this one were deleted by retention (the BASE says)
        if base.exists():
            data = base.read_bytes()
            op, used = _frame_at(data, 0)
            if op is None or used != len(data):
                out.cut, out.cut_at = "damaged base file", str(base)
            else:
                through = int(op[6]) if len(op) > 6 else 0
                out.ops.append(op[:6])
        files = sorted(p for p in self.dir.iterdir() if p.suffix == SUFFIX and p.stem.isdigit())
        for path in [p for p in files if int(p.stem) <= through]:
            path.unlink()  # a crash between writing the BASE and deleting them (delete())
        files = [p for p in files if int(p.stem) > through]
        end_ts = 0
        for i, path in enumerate(files):
            seg = Segment(int(path.stem), path)
            if out.cut:  # after damage: not part of the log
                out.dropped_bytes += path.stat().st_size
                path.unlink()
                continue
            data = path.read_bytes()
            ops, pos, cut = scan(data, last=i == len(files) - 1)
            for op in ops:
                end_ts, seg.newest_ms = _covers(op, end_ts, seg.newest_ms)
            out.ops += ops
            out.frames += len(ops)
            if cut:
                out.cut, out.cut_at = cut, f"{path.name}:{pos}"
                out.dropped_bytes += len(data) - pos
                with open(path, "r+b") as f:
                    f.truncate(pos)
                    os.fsync(f.fileno())
            seg.size = pos
            seg.end_ts = end_ts
            out.bytes += pos
            self.segments.append(seg)
            with open(path, "rb") as f:  # a previous process may have died before its fsync:
                os.fsync(f.fileno())  # what is reported fsynced from now on must be
        if not self.segments:
            self.segments.append(Segment(1, self.dir / f"{1:012d}{SUFFIX}"))
        self._fd = os.open(self.segments[-1].path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        _fsync_dir(self.dir)
        return out

    # --- writing (in line: a write(2) to the OS) -------------------------------------------

    def append(self, ops: Sequence[Op]) -> int:
        """Write one event's operations; rolls to a new segment past ``segment_bytes`` (after
        them: a segment holds whole events). Raises StorageError when the OS refuses."""
        data = b"".join(encode(op) for op in ops)
        seg = self.segments[-1]
        try:
            view = memoryview(data)
            while view:
                n = os.write(self._fd, view)
                view = view[n:]
        except OSError as e:
            raise StorageError(f"writing {seg.path.name}: {e.strerror or e}") from e
        for op in ops:
            seg.end_ts, seg.newest_ms = _covers(op, seg.end_ts, seg.newest_ms)
        seg.size += len(data)
        self.written += len(data)
        if seg.size >= self.segment_bytes:
            self._roll()
        return len(data)

    def _roll(self) -> None:
        last = self.segments[-1]
        seg = Segment(last.n + 1, self.dir / f"{last.n + 1:012d}{SUFFIX}", 0, last.end_ts)
        try:
            fd = os.open(seg.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        except OSError as e:
            raise StorageError(f"creating {seg.path.name}: {e.strerror or e}") from e
        with self._lock:
            self._to_sync.append(self._fd)
            self._fd = fd
            self._dir_dirty = True
        self.segments.append(seg)

    def sync(self) -> int:
        """fsync what was written (blocking: run it off the loop). Returns ``written`` as of
        the start: everything written before the call is on the disk once it returns."""
        written = self.written
        with self._lock:
            rolled, self._to_sync = self._to_sync, []
            fd = os.dup(self._fd) if self._fd >= 0 else -1
            dir_dirty, self._dir_dirty = self._dir_dirty, False
        try:
            for old in rolled:
                os.fsync(old)
                os.close(old)
            if fd >= 0:
                os.fsync(fd)
            if dir_dirty:
                dfd = os.open(self.dir, os.O_RDONLY)
                try:
                    os.fsync(dfd)
                finally:
                    os.close(dfd)
        finally:
            if fd >= 0:
                os.close(fd)
        self.synced_writes = written
        return written

    # --- retention ------------------------------------------------------------------------

    def deletable(
        self, upto_ts: int, now_ms: int, retention_s: float, retention_bytes: int
    ) -> list[Segment]:
        """The oldest closed segments every record of which is purged and forgotten (their
        ts <= ``upto_ts``) and which retention lets go: older than ``retention_s`` (by the
        newest record in them), or beyond ``retention_bytes`` of segments kept."""
        closed = self.segments[:-1]
        total = sum(s.size for s in self.segments)
        out: list[Segment] = []
        for seg in closed:
            if seg.end_ts > upto_ts:
                break
            old = retention_s <= 0 or now_ms - seg.newest_ms >= retention_s * 1000
            over = retention_bytes > 0 and total > retention_bytes
            if not (old or over):
                break
            out.append(seg)
            total -= seg.size
        return out

    def delete(self, segments: Iterable[Segment], base: Op) -> int:
        """Delete ``segments`` (the oldest ones) and forget them; see :meth:`delete_files`."""
        gone = list(segments)
        freed = self.delete_files(gone, base)
        self.forget(gone)
        return freed

    def delete_files(self, gone: Sequence[Segment], base: Op) -> int:
        """Delete the files of ``gone`` (the oldest segments), first writing ``base``, what
        a replay starts from without them, naming the last of them: a crash before every
        unlink is done leaves segments :meth:`recover` deletes, not replays over the BASE.
        Blocking: off the loop; the caller then :meth:`forget`s them on the loop (the loop
        appends to the list meanwhile). Returns bytes freed."""
        if not gone:
            return 0
        tmp = self.dir / (BASE_FILE + ".tmp")
        with open(tmp, "wb") as f:
            f.write(encode((*base[:6], max(s.n for s in gone))))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.dir / BASE_FILE)
        _fsync_dir(self.dir)  # the BASE is in place before any segment goes
        freed = 0
        for seg in gone:
            freed += seg.size
            seg.path.unlink(missing_ok=True)
        _fsync_dir(self.dir)
        return freed

    def forget(self, gone: Iterable[Segment]) -> None:
        names = {s.n for s in gone}
        self.segments = [s for s in self.segments if s.n not in names]

    def close(self) -> None:
        with self._lock:
            fds, self._to_sync = [*self._to_sync, self._fd], []
            self._fd = -1
        for fd in fds:
            if fd >= 0:
                os.close(fd)

    @property
    def bytes(self) -> int:
        return sum(s.size for s in self.segments)


def scan(data: bytes, *, last: bool) -> tuple[list[Op], int, str]:
    """The operations framed in one segment's ``data``, the length of its valid part, and
    why it ends there ("": it does not; "torn tail": the newest segment's last write cut
    short with nothing valid after it, when ``last``; else the damage found). Pure: the
    simulator's disks are scanned by it too."""
    ops: list[Op] = []
    pos = 0
    while pos < len(data):
        op, used = _frame_at(data, pos)
        if op is None:
            torn = last and used == -1 and not _frame_after(data, pos)
            return ops, pos, "torn tail" if torn else _damage(used)
        ops.append(op)
        pos += used
    return ops, pos, ""


def _frame_at(data: bytes, pos: int) -> tuple[Op | None, int]:
    """The operation framed at ``pos`` and its length; (None, -1): cut short by the end of
    ``data``; (None, -2): a bad header; (None, -3): a CRC mismatch; (None, -4): a body
    that does not decode."""
    if pos + HEADER.size > len(data):
        return None, -1
    magic, crc, length = HEADER.unpack_from(data, pos)
    if magic != MAGIC or length > MAX_BODY:
        return None, -2
    start = pos + HEADER.size
    if start + length > len(data):
        # cut short, or a length damaged upward over a body that is all there
        return None, -5 if zlib.crc32(data[start:]) == crc else -1
    body = data[start : start + length]
    if zlib.crc32(body) != crc:
        return None, -3
    try:
        op = decode_body(body)
    except Exception:  # a body that checks out and does not decode is damage all the same
        return None, -4
    return op, HEADER.size + length


def _frame_after(data: bytes, pos: int) -> bool:
    """Is there a valid frame after ``pos``? A frame cut short by the end of the file is a
    torn tail only if nothing valid follows it: a flipped bit in a length field also makes
    a frame run past the end, with the rest of the log after it."""
    i = data.find(MAGIC.to_bytes(1, "big"), pos + 1)
    while i >= 0:
        op, _ = _frame_at(data, i)
        if op is not None:
            return True
        i = data.find(MAGIC.to_bytes(1, "big"), i + 1)
    return False


def _damage(code: int) -> str:
    names = {-1: "frame cut short", -2: "bad frame header", -3: "crc mismatch"}
    return names.get(code, "bad frame length" if code == -5 else "undecodable frame")


def _fsync_dir(path: Path) -> None:
    dfd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def _covers(op: Op, end_ts: int, newest_ms: int) -> tuple[int, int]:
    """The highest ts appended and newest wall-clock ms, after ``op``."""
    tag = op[0]
    if tag == journal.APPEND and op[2]:
        return max(end_ts, op[1] + len(op[2]) - 1), newest_ms
    if tag == journal.PUBLISHED:
        return end_ts, max(newest_ms, op[2])
    # a reset starts the log over at its base, and adopted uuids are of records up to
    # their ts: the segment is needed until everything up to there is purged and forgotten
    if tag == journal.RESET:
        return max(end_ts, op[1] - 1), newest_ms
    if tag == journal.DEDUP and op[1]:
        return max(end_ts, max(t[0] for t in op[1])), newest_ms
    return end_ts, newest_ms


def frames_of(ops: Iterable[Any]) -> bytes:
    """The bytes :meth:`SegmentStore.append` writes for ``ops`` (tests, tools)."""
    return b"".join(encode(op) for op in ops)
