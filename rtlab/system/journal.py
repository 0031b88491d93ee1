# SPDX-License-Identifier: MIT
"""Host side of `rtlab-probe sys apply|restore|status` (docs/sys-protocol.md).

`Applier` spawns the applying process and talks to it; `SystemSession` is the
context manager the runner uses: leaving it (normally, by an exception, or
after the runner turned SIGINT/SIGTERM into an exception) releases, which
restores everything. If this Python process is killed, the applier sees EOF on
its stdin and restores by itself. Journals left by a crash of both are found by
`stale_journals()` and undone by `restore_all()` (`rtlab restore`).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import select
import subprocess
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rtlab.engine.snapshot import snapshot
from rtlab.engine.ssh import ssh_error
from rtlab.errors import RtlabError, SkippedError

if TYPE_CHECKING:
    from rtlab.engine.transport import Transport

SCHEMA = 1
DEFAULT_DIR = Path("/run/rtlab")
SHIELD_JOURNAL = "shield.journal"
ANSWER_TIMEOUT_S = 30.0
SKIPPED_EXIT = 4  # a privilege is missing (not root)
BUSY_EXIT = 5  # `sys apply --lock`: another owner holds the target (docs/sys-protocol.md)
LOCK_NAME = "target.lock"
RESTORE_TIMEOUT_S = 120.0


class ApplyError(RtlabError):
    """An operation that the plan marked as required failed (the session restores)."""

    def __init__(self, message: str, *, op: dict[str, Any] | None = None,
                 answer: dict[str, Any] | None = None, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.op = op or {}
        self.answer = answer or {}


class TargetBusyError(RtlabError):
    """Another rtlab process owns the target (its lock beside the journals): exit 1,
    one line naming the holder (docs/system.md, "One owner at a time")."""

    def __init__(self, message: str, holder: LockHolder | None = None,
                 hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.holder = holder


@dataclass
class RestoreReport:
    journal: str
    restored: int = 0
    gone: int = 0
    skipped: int = 0
    failed: int = 0
    journal_kept: bool = False
    entries: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.failed == 0

    def summary(self) -> str:
        if self.error:
            return f"{self.journal}: {self.error}"
        text = f"{self.journal}: {self.restored} change(s) undone"
        if self.gone:
            text += f", {self.gone} object(s) gone meanwhile"
        if self.skipped:
            text += f", {self.skipped} removed with their cgroup"
        if self.failed:
            bad = ", ".join(
                f"#{e.get('seq')} {e.get('op')}: {e.get('error')}"
                for e in self.entries
                if e.get("result") == "failed"
            )
            text += f", {self.failed} FAILED ({bad}); journal kept, retry with `rtlab restore`"
        return text


@dataclass
class JournalInfo:
    path: Path
    held: bool  # a live applier holds the lock
    detached: bool  # written by `rtlab shield` (persistent on purpose)
    pid: int | None
    entries: list[dict[str, Any]]
    owner: str | None = None  # the header's `owner` (the label of a locked session)
    time_ns: int | None = None  # when the journal was started (CLOCK_REALTIME)

    @property
    def stale(self) -> bool:
        return not self.held


def _parse_lines(text: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            continue  # a torn last line: its change was never applied
        if isinstance(rec, dict):
            out.append(rec)
    return out


def read_journal(path: Path) -> JournalInfo:
    """Read a local journal and tell whether a live applier holds it (flock)."""
    with open(path, "rb") as f:
        held = False
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)
        except BlockingIOError:
            held = True
        if not held and os.fstat(f.fileno()).st_nlink == 0:
            # its applier restored and removed it between our open and flock: not stale
            raise FileNotFoundError(path)
        text = f.read().decode("utf-8", "replace")
    return _journal_info(path, held, _parse_lines(text))


def journal_dir(transport: Transport | None = None) -> Path:
    """Where the target's journals live: on this machine $RTLAB_JOURNAL_DIR, else
    /run/rtlab (tmpfs: gone after a reboot, which restores everything by itself); on a
    board always /run/rtlab (this machine's environment says nothing of the board)."""
    if transport is not None and not transport.is_local:
        return DEFAULT_DIR
    given = os.environ.get("RTLAB_JOURNAL_DIR")
    if given:  # checked like --journal-dir: a directory, or one that can be made
        from rtlab.fileio import check_directory

        return check_directory(given, "$RTLAB_JOURNAL_DIR")
    return DEFAULT_DIR


def run_session_name(transport: Transport) -> str:
    """The journal name of a run's session on its target: on a board with this host's
    name too, since runs from several hosts leave their journals there."""
    if transport.is_local:
        return f"run-{os.getpid()}"
    import socket

    return f"run-{socket.gethostname()}-{os.getpid()}"


def _journal_info(path: Path, held: bool, recs: list[dict[str, Any]]) -> JournalInfo:
    header = recs[0] if recs and recs[0].get("type") == "journal" else {}
    cancelled = {r.get("seq") for r in recs if r.get("op") == "cancel"}
    entries = [r for r in recs[1:] if r.get("op") != "cancel" and r.get("seq") not in cancelled]
    owner = header.get("owner")
    time_ns = header.get("time_ns")
    pid = header.get("pid")
    return JournalInfo(path=path, held=held, detached=bool(header.get("detached")),
                       pid=pid if isinstance(pid, int) and not isinstance(pid, bool) else None,
                       entries=entries,
                       owner=owner if isinstance(owner, str) else None,
                       time_ns=time_ns if isinstance(time_ns, int) else None)


def journals(directory: Path = DEFAULT_DIR,
             transport: Transport | None = None) -> list[JournalInfo]:
    """The journals in `directory` of the target (this machine when `transport` is None
    or local; a board's through its engine, `sys journals`)."""
    if transport is not None and not transport.is_local:
        return remote_journals(transport, directory)
    if not directory.is_dir():
        return []
    out: list[JournalInfo] = []
    for p in sorted(directory.glob("*.journal")):
        try:
            out.append(read_journal(p))
        except FileNotFoundError:
            continue  # restored meanwhile
    return out


def remote_journals(transport: Transport, directory: Path) -> list[JournalInfo]:
    """`rtlab-probe sys journals --dir DIR` on the target: one status line per journal
    followed by its lines (docs/sys-protocol.md)."""
    proc = transport.run(["sys", "journals", "--dir", str(directory)])
    lines = _parse_lines(proc.stdout)
    unreadable = [r for r in lines if r.get("type") == "error" and r.get("path")]
    # exit 1 with `error` records: some journals could not be read (they are listed, and
    # `sys restore` says why for each); any other failure lists nothing
    if proc.returncode != 0 and not (proc.returncode == 1 and unreadable):
        line = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
        raise RtlabError(f"cannot list the journals on {transport.target}: {line}")
    out: list[JournalInfo] = []
    current: tuple[Path, bool] | None = None
    recs: list[dict[str, Any]] = []
    for rec in [*lines, {"type": "journals_done"}]:
        kind = rec.get("type")
        if kind in ("status", "journals_done", "error"):
            if current is not None:
                out.append(_journal_info(current[0], current[1], recs))
            current = (Path(str(rec.get("path"))), bool(rec.get("held"))) \
                if kind == "status" else None
            recs = []
            if kind == "error" and rec.get("path"):  # unreadable: stale, nothing known
                out.append(_journal_info(Path(str(rec["path"])), False, []))
        elif current is not None:
            recs.append(rec)
    return out


def stale_journals(
    directory: Path = DEFAULT_DIR, *, include_shield: bool = True,
    transport: Transport | None = None,
) -> list[JournalInfo]:
    """Journals no live applier holds: changes left by a crash (or a persistent
    `rtlab shield`, which has `detached` set; leave it out with include_shield=False)."""
    return [j for j in journals(directory, transport)
            if j.stale and (include_shield or not j.detached)]


def restore_journal(transport: Transport, path: Path | str) -> RestoreReport:
    """`sys restore --journal PATH` on the target: undo it in reverse order (idempotent)."""
    rep = RestoreReport(journal=str(path))
    try:
        proc = transport.run(["sys", "restore", "--journal", str(path)],
                             timeout_s=RESTORE_TIMEOUT_S)
    except RtlabError as exc:
        rep.error = f"cannot run restore: {exc.message}"
        return rep
    _fill_report(rep, _parse_lines(proc.stdout))
    if proc.returncode != 0 and not rep.failed:
        rep.error = proc.stderr.strip() or f"restore exited with {proc.returncode}"
    return rep


def _fill_report(rep: RestoreReport, recs: Iterable[dict[str, Any]]) -> None:
    for r in recs:
        if r.get("type") == "restored":
            rep.entries.append(r)
        elif r.get("type") in ("restore_done", "released"):
            rep.restored = int(r.get("restored", 0))
            rep.gone = int(r.get("gone", 0))
            rep.skipped = int(r.get("skipped", 0))
            rep.failed = int(r.get("failed", 0))
            rep.journal_kept = bool(r.get("journal_kept"))


def restore_all(transport: Transport, directory: Path = DEFAULT_DIR) -> list[RestoreReport]:
    """Restore every stale journal in directory (held ones belong to live sessions)."""
    return [restore_journal(transport, j.path)
            for j in stale_journals(directory, transport=transport)]


class Applier:
    """One `sys apply` process. Ops go one JSON line each; answers come back in order."""

    def __init__(
        self,
        transport: Transport,
        journal: Path | str,
        *,
        detach: bool = False,
        timeout_s: float = ANSWER_TIMEOUT_S,
        lock: tuple[str, str] | None = None,
    ) -> None:
        self.journal = str(journal)
        self.detach = detach
        self.timeout_s = timeout_s
        self.answers: list[dict[str, Any]] = []
        self._buf = b""
        args = ["sys", "apply", "--journal", self.journal]
        if detach:
            args.append("--detach")
        if lock is not None:  # (lock file, owner label): one owner of the target at a time
            args += ["--lock", lock[0], "--owner", lock[1]]
        # Own session: a Ctrl-C on the terminal reaches the host only; the host then
        # releases. close_fds (default) keeps stdin's write end only in this process,
        # so our death means EOF for the applier (on a board: through SSH).
        self.proc = transport.popen(args)
        ready = self._read_record()
        if ready is None or ready.get("type") != "ready":
            code = self.proc.wait(timeout=5)
            err = self._stderr()
            if code == BUSY_EXIT and lock is not None:  # another rtlab owns the target
                line = err.splitlines()[-1] if err else "the target is in use"
                raise busy_error(transport, lock[0], line.removeprefix("rtlab-probe sys apply: "))
            if code == SKIPPED_EXIT:  # e.g. not root on a board: say where and how
                line = err.splitlines()[-1] if err else "a privilege is missing"
                where = "" if transport.is_local else f" on {transport.target}"
                raise SkippedError(
                    f"changing the system{where} was refused: "
                    f"{line.removeprefix('rtlab-probe sys apply: ')}",
                    hint="log in as root (e.g. --target root@HOST); a run measures as "
                         "another user only with --allow-non-rt and without a shield")
            if code == 255 and not transport.is_local:

                raise ssh_error(transport.target, err, during="starting the applier")
            raise RtlabError(f"the applier did not start: {err or ready}")
        self.pid = int(ready["pid"])
        self.closed = False

    def _stderr(self) -> str:
        if self.proc.poll() is None or self.proc.stderr is None:
            return ""
        return self.proc.stderr.read().decode("utf-8", "replace").strip()

    def _read_record(self, timeout_s: float | None = None) -> dict[str, Any] | None:
        """The next JSON line of stdout, None at EOF; RtlabError on timeout."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + (timeout_s or self.timeout_s)
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise RtlabError("the applier stopped answering", hint="see `rtlab restore`")
            r, _, _ = select.select([fd], [], [], left)
            if not r:
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                return None
            self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        try:
            rec = json.loads(line)
        except ValueError as exc:
            raise RtlabError(f"the applier wrote a bad line: {line[:200]!r}") from exc
        return rec if isinstance(rec, dict) else {}

    def _send(self, ops: Sequence[dict[str, Any]]) -> None:
        assert self.proc.stdin is not None
        data = b"".join(json.dumps(op, separators=(",", ":")).encode() + b"\n" for op in ops)
        try:
            self.proc.stdin.write(data)
            self.proc.stdin.flush()
        except BrokenPipeError as exc:
            raise RtlabError(f"the applier exited: {self._stderr()}") from exc

    def apply(self, ops: Sequence[dict[str, Any]], batch: int = 32) -> list[dict[str, Any]]:
        """Send ops; return one answer per op (`ok` false means not changed)."""
        out: list[dict[str, Any]] = []
        for i in range(0, len(ops), batch):
            chunk = ops[i : i + batch]
            self._send(chunk)
            for _ in chunk:
                rec = self._read_record()
                if rec is None:
                    raise RtlabError(f"the applier exited: {self._stderr()}")
                out.append(rec)
        self.answers.extend(out)
        return out

    def release(self) -> RestoreReport:
        """Restore everything now and wait for the applier to exit."""
        rep = RestoreReport(journal=self.journal)
        if self.closed:
            return rep
        self.closed = True
        recs: list[dict[str, Any]] = []
        try:
            self._send([{"op": "release"}])
            while True:
                rec = self._read_record(RESTORE_TIMEOUT_S)
                if rec is None:
                    break
                recs.append(rec)
                if rec.get("type") == "released":
                    break
        except RtlabError as exc:
            rep.error = exc.message
        _fill_report(rep, recs)
        self._finish()
        return rep

    def detach_now(self) -> int:
        """--detach: close stdin; the applier exits leaving changes and journal."""
        self.closed = True
        return self._finish()

    def _finish(self) -> int:
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
        try:
            return self.proc.wait(timeout=RESTORE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return -1


OWNER_MAX = 128  # bytes of a lock owner's label (the engine's SYS_OWNER_MAX)
_LABEL = re.compile(r"^rtlab (?P<what>.+?) started on (?P<host>\S+) as pid (?P<pid>\d+)"
                    r"(?:: (?P<command>.*))?$", re.S)


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
        recs = [r for r in _parse_lines(proc.stdout) if r.get("type") == "lock"]
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
            recs = _parse_lines(os.pread(fd, 4096, 0).decode("utf-8", "replace"))
            if recs or not held:
                break
            time.sleep(0.02)
    finally:
        os.close(fd)
    return _parse_holder(lock, held, recs[0] if recs else {})


def _where(transport: Transport) -> str:
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
    where = _where(transport)
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


def open_applier(transport: Transport, journal: Path | str, *, detach: bool = False,
                 lock: tuple[str, str] | None = None,
                 wait_s: float = RESTORE_TIMEOUT_S) -> Applier:
    """Start an applier; with `lock`, when the target's holder is a dead rtlab whose
    applier is still restoring, wait (up to wait_s) for it to let go, then take it."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            return Applier(transport, journal, detach=detach, lock=lock)
        except TargetBusyError as exc:
            if lock is None or exc.holder is None or not exc.holder.restoring:
                raise
            while time.monotonic() < deadline:
                time.sleep(0.1)
                try:
                    now = lock_info(transport, lock[0])
                except (RtlabError, OSError):
                    break
                if not now.held or now.pid != exc.holder.pid:
                    break
            else:
                raise


@contextlib.contextmanager
def hold_target(transport: Transport, directory: Path | str, what: str
                ) -> Iterator[SystemSession]:
    """Own the target for a short command that changes it without a session of its own
    (`rtlab shield --reset`, `rtlab restore`): the lock, held by an applier with an
    empty journal (`lock-PID`), let go when the block ends however it ends."""
    import socket

    name = f"lock-{os.getpid()}" if transport.is_local else \
        f"lock-{socket.gethostname()}-{os.getpid()}"
    with SystemSession(transport, directory, name=name, owner=owner_label(what)) as s:
        yield s


@dataclass
class LockCleanup:
    """What `clean_lock` did with a target's journal directory and its lock."""

    directory: str
    lock: str
    existed: bool  # the directory was there
    lock_removed: bool = False
    dir_removed: bool = False
    kept: str | None = None  # why they stay (one line), None when removed or absent

    def to_dict(self) -> dict[str, Any]:
        return {"dir": self.directory, "lock": self.lock, "existed": self.existed,
                "lock_removed": self.lock_removed, "dir_removed": self.dir_removed,
                "kept": self.kept}


def _dir_listing(transport: Transport, directory: Path) -> dict[str, Any] | None:
    """The target's `directory` as its engine lists it (a `dir` or `error` record)."""
    recs = [r for r in snapshot(transport, [f"{directory}/"])
            if r.get("type") in ("dir", "error")]
    return recs[0] if recs else None


def clean_lock(transport: Transport, directory: Path = DEFAULT_DIR) -> LockCleanup:
    """Remove the target's lock file and its journal directory (`rtlab board clean`),
    when nothing holds the lock and no journal is pending there. A held lock (a run or
    shield owns the target) raises TargetBusyError naming the holder; pending journals
    keep both, with the reason. The lock file is unlinked while this process holds it
    (an applier that opened it meanwhile locks the new file instead: the engine checks
    that the file it locked is still the one at its path); the directory goes after,
    when it is empty."""
    directory = Path(directory)
    lock = str(directory / LOCK_NAME)
    out = LockCleanup(str(directory), lock, existed=True)
    where = _where(transport)
    listing = _dir_listing(transport, directory)
    if listing is None or listing.get("type") == "error":
        code = (listing or {}).get("error")
        out.existed = code != "ENOENT"
        if out.existed:
            out.kept = (f"{directory} cannot be read on {where} ({code}): removing it "
                        "needs root")
        return out
    holder = lock_info(transport, lock)
    if holder.held:
        raise TargetBusyError(
            f"{where} is in use by {holder.who()} since {holder.since} (lock {lock}): "
            "nothing was removed", holder,
            hint="clean again when it has ended; one rtlab run or shield owns a system "
                 "at a time")
    again = "" if transport.is_local else f" --target {transport.target}"

    def pending(own: Path | None = None) -> str | None:
        found = [j for j in journals(directory, transport) if j.path != own]
        if not found:
            return None
        shield = any(j.detached for j in found)
        return (f"{directory} kept: {len(found)} journal(s) of system changes pending "
                f"({', '.join(j.path.name for j in found[:3])}): undo them with "
                f"`rtlab restore{again}`"
                + (f" (the persistent shield: `rtlab shield --reset{again}`)" if shield else "")
                + ", then clean again")

    out.kept = pending()
    if out.kept:
        return out
    with hold_target(transport, directory, "board clean") as session:
        out.kept = pending(session.journal)
        if out.kept:
            return out
        rm = transport.run_command(["rm", "-f", lock], what=f"removing {lock}")
        out.lock_removed = rm.returncode == 0
    rmdir = transport.run_command(["rmdir", str(directory)], what=f"removing {directory}")
    out.dir_removed = rmdir.returncode == 0
    if not out.lock_removed:
        out.kept = f"{lock} could not be removed: {(rm.stderr or '').strip() or rm.returncode}"
    elif not out.dir_removed:
        left = _dir_listing(transport, directory) or {}
        names = [str(n) for n in left.get("entries") or []]
        if names:  # something else is there (or a run started meanwhile): left alone
            out.kept = (f"{directory} kept: it is not empty ({', '.join(names[:3])}"
                        + (", …" if len(names) > 3 else "") + ")")
        else:
            out.dir_removed = left.get("type") == "error"  # gone meanwhile
    return out


def proc_starttime(pid: int) -> int:
    """Field 22 of /proc/PID/stat (local processes)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat[stat.rindex(")") + 2 :].split()[19])


class SystemSession:
    """A held set of journaled changes; leaving the context restores them.

    with SystemSession([probe], DEFAULT_DIR) as s:
        s.apply(plan.ops, required=plan.required)
        s.record_spawn(pgid)             # load generators to kill on restore
        ...
    """

    def __init__(
        self,
        transport: Transport,
        journal_dir: Path | str = DEFAULT_DIR,
        *,
        name: str | None = None,
        owner: str | None = None,
    ) -> None:
        self.transport = transport
        self.journal = Path(journal_dir) / f"{name or f'session-{os.getpid()}'}.journal"
        # with `owner`: hold the target's owner lock beside the journals for the session
        self.lock = (str(Path(journal_dir) / LOCK_NAME), owner) if owner else None
        self.applier: Applier | None = None
        self.report: RestoreReport | None = None

    def __enter__(self) -> SystemSession:
        self.applier = open_applier(self.transport, self.journal, lock=self.lock)
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def _a(self) -> Applier:
        if self.applier is None or self.applier.closed:
            raise RtlabError("the system session is not open")
        return self.applier

    def apply(
        self, ops: Sequence[dict[str, Any]], required: Iterable[int] = ()
    ) -> list[dict[str, Any]]:
        """Apply ops; if an op whose index is in `required` fails, raise ApplyError
        (leaving the context then restores what was applied)."""
        answers = self._a().apply(ops)
        for i in required:
            if i < len(answers) and not answers[i].get("ok"):
                a = answers[i]
                raise ApplyError(f"{ops[i].get('op')} {ops[i].get('path', '')}: {a.get('error')}",
                                 op=dict(ops[i]), answer=a)
        return answers

    def record_spawn(self, pgid: int, starttime: int | None = None) -> None:
        """Kill this process group (SIGTERM, then SIGKILL) on restore."""
        st = proc_starttime(pgid) if starttime is None else starttime
        self._check(self._a().apply([{"op": "spawned", "pgid": pgid, "starttime": st}])[0])

    def record_netns(self, name: str) -> None:
        """Delete network namespace NAME (/run/netns/NAME) on restore."""
        self._check(self._a().apply([{"op": "netns", "name": name}])[0])

    def move(self, tid: int, cgroup: str) -> None:
        """Move a task (v1: thread; v2: process) into a cgroup, e.g. the shield."""
        self._check(self._a().apply([{"op": "move", "tid": tid, "cgroup": cgroup}])[0])

    def hold_dma_latency(self, usec: int) -> None:
        self._check(
            self._a().apply([{"op": "hold", "path": "/dev/cpu_dma_latency", "value": usec}])[0]
        )

    @staticmethod
    def _check(ans: dict[str, Any]) -> None:
        if not ans.get("ok"):
            raise ApplyError(f"{ans.get('op')}: {ans.get('error')}")

    def release(self) -> RestoreReport | None:
        if self.applier is not None and not self.applier.closed:
            self.report = self.applier.release()
        return self.report
