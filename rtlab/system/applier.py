# SPDX-License-Identifier: MIT
"""The applying process, `rtlab-probe sys apply` (docs/sys-protocol.md), and the host's
side of talking to it.

`Applier` spawns the applying process and talks to it; `SystemSession` is the
context manager the runner uses: leaving it (normally, by an exception, or
after the runner turned SIGINT/SIGTERM into an exception) releases, which
restores everything. If this Python process is killed, the applier sees EOF on
its stdin and restores by itself. What it leaves behind is read by
`rtlab.system.journal_files`.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import subprocess
import time
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rtlab.engine.ssh import ssh_error
from rtlab.errors import RtlabError, SkippedError
from rtlab.system.journal_files import DEFAULT_DIR, RESTORE_TIMEOUT_S, RestoreReport, fill_report
from rtlab.system.target_lock import LOCK_NAME, TargetBusyError, busy_error, lock_info, owner_label

if TYPE_CHECKING:
    from rtlab.engine.transport import Transport

ANSWER_TIMEOUT_S = 30.0
SKIPPED_EXIT = 4  # a privilege is missing (not root)
BUSY_EXIT = 5  # `sys apply --lock`: another owner holds the target (docs/sys-protocol.md)


class ApplyError(RtlabError):
    """An operation that the plan marked as required failed (the session restores)."""

    def __init__(self, message: str, *, op: dict[str, Any] | None = None,
                 answer: dict[str, Any] | None = None, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.op = op or {}
        self.answer = answer or {}


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
        fill_report(rep, recs)
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
