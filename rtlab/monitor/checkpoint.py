# SPDX-License-Identifier: MIT
"""The monitor's state directory: one owner, raw segment files, an atomic checkpoint.

Layout (docs/monitor.md, "State directory"):

    STATE/lock                   flock'ed by the running monitor (one per directory)
    STATE/monitor.json           this monitor's id and the options it was started with
    STATE/checkpoint.json        totals, boards, open and pending segments (atomic)
    STATE/segments/BOARD/ID.jsonl  each engine run's raw output, written line by line

The checkpoint says, per board, which raw file is being measured and up to which
record (`seq`) its increments are in the totals. After a crash (kill -9, power cut)
the next start feeds the rest of that file (`SegmentFeed`): nothing is counted twice,
nothing is lost. A segment whose engine ended waits in `pending` until the store has
it; only then is its raw file removed.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import secrets
import time
from collections import deque
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rtlab.errors import RtlabError
from rtlab.monitor.live import BoardLive, ChannelLive

CHECKPOINT_VERSION = 1
_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


class StateInUse(RtlabError):
    pass


def board_dir_name(board: str) -> str:
    """A file-system-safe, readable folder name for a board."""
    return _SAFE.sub("_", board).strip("._") or "board"


@dataclass
class Segment:
    """One engine run of one board."""

    board: str
    run_id: str
    file: str  # relative to the state directory
    started: float  # unix time the monitor started it
    seq: int = 0  # its records up to this snapshot seq are in the totals
    result: bool = False  # its result record is in the totals (it ended)
    gap_before_s: float = 0.0  # time the board was not measured before this segment
    gap_reason: str = ""
    status: str = "open"  # open | ended | interrupted


@dataclass
class Gap:
    """A time a board was not measured: from its last record (or the first failure, for
    a board not reached yet) to the header of the engine that measured it again."""

    board: str
    start: float  # unix times
    end: float
    reason: str
    rebooted: bool = False  # the board came back with another boot id


@dataclass
class Checkpoint:
    monitor_id: str
    channels: list[ChannelLive] = field(default_factory=list)
    boards: list[BoardLive] = field(default_factory=list)
    open: dict[str, Segment] = field(default_factory=dict)  # board -> segment measuring
    pending: list[Segment] = field(default_factory=list)  # ended, not yet in the store
    counters: dict[str, int] = field(default_factory=dict)  # board -> segments started
    gaps: list[Gap] = field(default_factory=list)  # the last MAX_GAPS gaps

    def to_json(self) -> dict[str, Any]:
        return {
            "version": CHECKPOINT_VERSION,
            "monitor_id": self.monitor_id,
            "saved": time.time(),
            "channels": [_channel_json(c) for c in self.channels],
            "boards": [asdict(b) for b in self.boards],
            "open": {k: asdict(v) for k, v in self.open.items()},
            "pending": [asdict(s) for s in self.pending],
            "counters": dict(self.counters),
            "gaps": [asdict(g) for g in self.gaps[-MAX_GAPS:]],
        }

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> Checkpoint:
        if obj.get("version") != CHECKPOINT_VERSION:
            raise ValueError(f"checkpoint version {obj.get('version')!r} is not "
                             f"{CHECKPOINT_VERSION}")
        return cls(
            monitor_id=str(obj["monitor_id"]),
            channels=[_channel_from(c) for c in obj.get("channels") or []],
            boards=[BoardLive(**b) for b in obj.get("boards") or []],
            open={k: Segment(**v) for k, v in (obj.get("open") or {}).items()},
            pending=[Segment(**s) for s in obj.get("pending") or []],
            counters={k: int(v) for k, v in (obj.get("counters") or {}).items()},
            gaps=[Gap(**g) for g in obj.get("gaps") or []],
        )


MAX_GAPS = 1000


def _channel_json(c: ChannelLive) -> dict[str, Any]:
    d = asdict(c)
    d["buckets"] = sorted([int(k), int(v)] for k, v in c.buckets.items())
    d["recent"] = [list(x) for x in c.recent]
    return d


def _channel_from(d: dict[str, Any]) -> ChannelLive:
    d = dict(d)
    d["buckets"] = {int(k): int(v) for k, v in d.get("buckets") or []}
    d["recent"] = deque((float(a), int(b)) for a, b in d.get("recent") or [])
    return ChannelLive(**d)


class StateDir:
    """The state directory, held by one monitor at a time."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock_fd: int | None = None

    def acquire(self) -> None:
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            (self.path / "segments").mkdir(exist_ok=True)
            fd = os.open(self.path / "lock", os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise RtlabError(f"cannot use the state directory {self.path}: "
                             f"{exc.strerror or exc}",
                             hint="choose another one with --state-dir") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            owner = os.read(fd, 200).decode(errors="replace").strip() or "another process"
            os.close(fd)
            raise StateInUse(f"the state directory {self.path} is in use by {owner}",
                             hint="stop that monitor first, or give this one another "
                             "--state-dir") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"rtlab monitor pid {os.getpid()}\n".encode(), 0)
        self._lock_fd = fd

    def release(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    # identity -------------------------------------------------------------------------
    def monitor_id(self, options: dict[str, Any], known: str | None = None) -> str:
        """This state directory's monitor id (made at its first use; `known`: the
        checkpoint's, kept when monitor.json was lost, so its totals and pending segments
        stay this monitor's), and the options of the latest start beside it."""
        f = self.path / "monitor.json"
        try:
            info = json.loads(f.read_text())
            mid = str(info["id"])
        except (OSError, ValueError, KeyError):
            mid = known or secrets.token_hex(8)
        _write_atomic(f, json.dumps({"id": mid, "options": options}, indent=1) + "\n")
        return mid

    # checkpoint -----------------------------------------------------------------------
    def load(self) -> Checkpoint | None:
        f = self.path / "checkpoint.json"
        try:
            text = f.read_text()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise RtlabError(f"cannot read {f}: {exc.strerror or exc}") from exc
        try:
            return Checkpoint.from_json(json.loads(text))
        except (ValueError, KeyError, TypeError) as exc:
            raise RtlabError(f"{f} is damaged ({exc})",
                             hint="move it away to start the totals anew; the raw "
                             "segments beside it are kept") from None

    def save(self, cp: Checkpoint) -> None:
        _write_atomic(self.path / "checkpoint.json", json.dumps(cp.to_json()) + "\n")

    # segments -------------------------------------------------------------------------
    def segment_file(self, board: str, run_id: str) -> str:
        return f"segments/{board_dir_name(board)}/{run_id}.jsonl"

    def abs(self, rel: str) -> Path:
        return self.path / rel

    def remove(self, rel: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            (self.path / rel).unlink()


def _write_atomic(path: Path, text: str) -> None:
    """Write, fsync, rename, fsync the directory: after a crash or a power cut the file
    is the old one or the new one, and a returned call is on the disk."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
