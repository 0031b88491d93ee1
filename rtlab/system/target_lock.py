# SPDX-License-Identifier: MIT
"""The target's owner lock (`target.lock` beside the journals): one rtlab run or shield
owns a system at a time (docs/system.md, "One owner at a time").

The lock is taken by the applier (`sys apply --lock`, rtlab.system.applier); this module
names its owner (`owner_label`), reads who holds it (`lock_info`, on a board through
`sys lockinfo`) and words the refusal of a second taker (`busy_error`).
"""

from __future__ import annotations

import fcntl
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rtlab.errors import RtlabError
from rtlab.system.journal_files import parse_lines

if TYPE_CHECKING:
    from rtlab.engine.transport import Transport

LOCK_NAME = "target.lock"
OWNER_MAX = 128  # bytes of a lock owner's label (the engine's SYS_OWNER_MAX)
_LABEL = re.compile(r"^rtlab (?P<what>.+?) started on (?P<host>\S+) as pid (?P<pid>\d+)"
                    r"(?:: (?P<command>.*))?$", re.S)


class TargetBusyError(RtlabError):
    """Another rtlab process owns the target (its lock beside the journals): exit 1,
    one line naming the holder (docs/system.md, "One owner at a time")."""

    def __init__(self, message: str, holder: LockHolder | None = None,
                 hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.holder = holder


def _command_line() -> str:
    """This process's command line as a user typed it (`rtlab run x.toml ...`)."""
    import shlex
    import sys

    argv = list(sys.argv) or ["python"]
    first = Path(argv[0]).name
    if first in ("rtlab", "__main__.py", "-m", "-c"):
        first = "rtlab"
    return shlex.join([first, *argv[1:]])


def owner_label(what: str = "run", command: str | None = None) -> str:
    """Who holds a target: this rtlab process, named so another user can find it:
    `rtlab run started on HOST as pid N: rtlab run x.toml` (cut to OWNER_MAX bytes)."""
    import socket

    cmd = _command_line() if command is None else command
    cmd = "".join(c if c >= " " and c != "\x7f" else "?" for c in cmd)
    head = f"rtlab {what} started on {socket.gethostname()} as pid {os.getpid()}"
    label = f"{head}: {cmd}" if cmd else head
    data = label.encode()
    if len(data) > OWNER_MAX:
        label = data[: OWNER_MAX - 3].decode("utf-8", "ignore") + "\u2026"
    return label


@dataclass
class LockHolder:
    """Who holds (or last held) a target's lock: `sys lockinfo` (docs/sys-protocol.md)."""

    lock: str
    held: bool
    pid: int | None = None  # the process holding the flock (an applier)
    owner: str | None = None  # its label (owner_label)
    since_ns: int | None = None

    def _label(self) -> re.Match[str] | None:
        return _LABEL.match(self.owner) if self.owner else None

    @property
    def owner_pid(self) -> int | None:
        """The rtlab process that took the lock (the label's pid), when known."""
        m = self._label()
        return int(m.group("pid")) if m else None

    @property
    def command(self) -> str | None:
        m = self._label()
        return m.group("command") if m else None

    @property
    def since(self) -> str:
        if self.since_ns is None:
            return "an unknown time"
        from datetime import UTC, datetime

        return datetime.fromtimestamp(self.since_ns / 1e9, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    def owner_alive(self) -> bool | None:
        """Whether the rtlab process named by the label still runs: None when it is not
        a process of this machine (another host's, or no parsable label)."""
        import socket

        m = self._label()
        if m is None or m.group("host") != socket.gethostname():
            return None
        try:  # a zombie (killed, not reaped yet) is gone
            stat = Path(f"/proc/{int(m.group('pid'))}/stat").read_text()
        except OSError:
            return False
        return stat[stat.rindex(")") + 2] != "Z"

    @property
    def restoring(self) -> bool:
        """Held although the rtlab process that took it is gone: its applier is undoing
        the changes (it restores by itself when its controller dies) and then lets go."""
        return self.held and self.owner_alive() is False

    def who(self) -> str:
        """`rtlab run pid 1234 on HOST (`rtlab run x.toml`)`, or the raw label."""
        m = self._label()
        if m is None:
            name = self.owner or "an unknown holder (the lock file names none)"
            return f"{name} (pid {self.pid})" if self.pid else name
        cmd = m.group("command")
        return (f"rtlab {m.group('what')} pid {m.group('pid')} on {m.group('host')}"
                + (f" (`{cmd}`)" if cmd else ""))

    def to_dict(self) -> dict[str, Any]:
        return {"lock": self.lock, "held": self.held, "owner": self.owner,
                "owner_pid": self.owner_pid, "command": self.command,
                "applier_pid": self.pid, "since_ns": self.since_ns,
                "since": self.since if self.since_ns is not None else None}


def _parse_holder(lock: str, held: bool, rec: dict[str, Any]) -> LockHolder:
    pid, owner, since = rec.get("pid"), rec.get("owner"), rec.get("since_ns")
    return LockHolder(lock, held, pid if isinstance(pid, int) else None,
                      owner if isinstance(owner, str) else None,
                      since if isinstance(since, int) else None)


def lock_info(transport: Transport | None, lock: Path | str) -> LockHolder:
    """Whether the target lock is held, and by whom. Read-only (a shared flock for an
    instant, which a taker retries through). On a board through `sys lockinfo`."""
    lock = str(lock)
    if transport is not None and not transport.is_local:
        proc = transport.run(["sys", "lockinfo", "--lock", lock])
        recs = [r for r in parse_lines(proc.stdout) if r.get("type") == "lock"]
        if proc.returncode != 0 or not recs:
            line = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
            raise RtlabError(f"cannot read the target lock on {transport.target}: {line}")
        return _parse_holder(lock, bool(recs[0].get("held")), recs[0])
    try:
        fd = os.open(lock, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return LockHolder(lock, False)
    try:
        held = False
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            fcntl.flock(fd, fcntl.LOCK_UN)
        except BlockingIOError:
            held = True
        for _ in range(10):  # a taker writes its line right after taking the lock
            recs = parse_lines(os.pread(fd, 4096, 0).decode("utf-8", "replace"))
            if recs or not held:
                break
            time.sleep(0.02)
    finally:
        os.close(fd)
    return _parse_holder(lock, held, recs[0] if recs else {})


def target_name(transport: Transport) -> str:
    """The target as a message names it: `this machine` or the board's name."""
    return "this machine" if transport.is_local else str(transport.target)


def busy_error(transport: Transport, lock: str, engine_line: str) -> TargetBusyError:
    """The one line of a refused taker: who holds the target (pid, command line, since)."""
    try:
        holder: LockHolder | None = lock_info(transport, lock)
    except (RtlabError, OSError):
        holder = None
    if holder is None or not holder.held:  # gone meanwhile: what the engine saw
        return TargetBusyError(engine_line, holder, hint="try again; one rtlab run or shield "
                                                         "owns a system at a time")
    where = target_name(transport)
    if holder.restoring:
        return TargetBusyError(
            f"{where} is still being restored after {holder.who()} ended: its applier "
            f"(pid {holder.pid}) holds the lock {lock} since {holder.since}", holder,
            hint="try again in a moment; it lets go when the changes are undone")
    stop = (f"or stop it (kill {holder.owner_pid})"
            if holder.owner_alive() and holder.owner_pid else "or stop it")
    return TargetBusyError(
        f"{where} is in use by {holder.who()} since {holder.since} (lock {lock})", holder,
        hint=f"wait for it to end {stop}; one rtlab run or shield owns a system at a time")
