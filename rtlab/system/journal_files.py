# SPDX-License-Identifier: MIT
"""The journal files of `rtlab-probe sys apply` (docs/sys-protocol.md): where they live,
their lines read into `JournalInfo`, listing them on this machine or on a board, and
restoring the ones no live applier holds.

Journals left by a crash of both rtlab and its applier are found by `stale_journals()`
and undone by `restore_all()` (`rtlab restore`). The process that writes them is
`rtlab.system.applier`; the target's owner lock beside them is `rtlab.system.target_lock`.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rtlab.errors import RtlabError

if TYPE_CHECKING:
    from rtlab.engine.transport import Transport

SCHEMA = 1
DEFAULT_DIR = Path("/run/rtlab")
SHIELD_JOURNAL = "shield.journal"
RESTORE_TIMEOUT_S = 120.0


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


def parse_lines(text: str) -> list[dict[str, Any]]:
    """The JSON objects of `text`, one a line; a torn or foreign line is passed over."""
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
    return _journal_info(path, held, parse_lines(text))


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
    lines = parse_lines(proc.stdout)
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
    fill_report(rep, parse_lines(proc.stdout))
    if proc.returncode != 0 and not rep.failed:
        rep.error = proc.stderr.strip() or f"restore exited with {proc.returncode}"
    return rep


def fill_report(rep: RestoreReport, recs: Iterable[dict[str, Any]]) -> None:
    """Count into `rep` what the `restored` and `restore_done`/`released` records say."""
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
