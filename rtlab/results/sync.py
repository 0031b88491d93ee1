# SPDX-License-Identifier: MIT
"""Copying runs between two stores: `rtlab results push` and `rtlab results pull`.

A laptop's SQLite store and the lab's PostgreSQL database (or any two stores) exchange
runs without duplicates. What is copied, and what is not:

* A run is identified by its id. A run whose id the destination does not hold is
  copied with its raw files (engine output, phase layout, trace capture), its result
  stored exactly as the source holds it (the same JSON text, so both stores then hold
  the same content digest, `store.content_digest`).
* A run the destination holds with the same content (equal digests) is "already
  there": nothing is copied, so a second push copies nothing.
* A run the destination holds with other content (the same id, a different result)
  is a conflict: reported, never overwritten (stored runs are never overwritten).
* A run whose numbers fail validation but that is not marked `invalid` (stored by an
  rtlab older than validation) is refused: nothing inconsistent is stored as good. A
  run marked `invalid` is copied as it is (still `invalid`). A result of a version
  this rtlab does not know is refused (upgrade rtlab).

Each run is copied in one transaction of the destination (`Store.add_copy`): a
transfer stopped at any point (the server went away, Ctrl-C, kill -9) leaves every run
either whole or absent, and running it again completes it. Several processes may push
into one store at once: a run two of them copy at the same moment is stored once (the
other finds it there, with the same content).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import Any

from rtlab.errors import RtlabError, UsageError
from rtlab.results.shape import ShapeOf
from rtlab.results.store import RawFile, Store, StoredRun
from rtlab.results.validate import first_problem


@dataclass(frozen=True)
class Selection:
    """Which runs of the source to copy: all of them, or those matching every criterion
    given (run references, hosts, probes, started at or after `since`)."""

    refs: tuple[str, ...] = ()
    hosts: tuple[str, ...] = ()
    probes: tuple[str, ...] = ()
    since: datetime | None = None

    def to_json(self) -> dict[str, Any]:
        return {"runs": list(self.refs), "hosts": list(self.hosts),
                "probes": list(self.probes),
                "since": self.since.isoformat() if self.since else None}


def parse_since(text: str) -> datetime:
    """`--since`: an ISO 8601 date (midnight UTC) or date and time (UTC unless it has an
    offset)."""
    try:
        if len(text) == 10:
            d = date.fromisoformat(text)
            return datetime(d.year, d.month, d.day, tzinfo=UTC)
        value = datetime.fromisoformat(text)
    except ValueError:
        raise UsageError(f"--since {text!r} is not an ISO 8601 date or time",
                         hint="e.g. 2026-11-01 or 2026-11-01T08:00:00+01:00") from None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


@dataclass
class TransferReport:
    """What a transfer did (or, with `dry_run`, would do)."""

    source: str
    dest: str
    dry_run: bool
    selected: int = 0
    copied: list[str] = field(default_factory=list)
    already: list[str] = field(default_factory=list)
    conflicts: list[tuple[str, str]] = field(default_factory=list)
    refused: list[tuple[str, str]] = field(default_factory=list)
    files: int = 0  # raw files of the copied runs
    bytes: int = 0  # their size
    seconds: float = 0.0
    stopped: RtlabError | None = None  # the error that stopped the transfer early
    interrupted: bool = False  # Ctrl-C or SIGTERM stopped it early

    @property
    def complete(self) -> bool:
        return self.stopped is None and not self.interrupted

    @property
    def left(self) -> int:
        """Selected runs not dealt with (the transfer stopped before them)."""
        return self.selected - len(self.copied) - len(self.already) - len(self.conflicts) \
            - len(self.refused)

    def to_json(self, direction: str, selection: Selection) -> dict[str, Any]:
        return {
            "schema": 1, "direction": direction, "from": self.source, "to": self.dest,
            "dry_run": self.dry_run, "selection": selection.to_json(),
            "selected": self.selected, "copied": list(self.copied),
            "already": list(self.already),
            "conflicts": [{"run": r, "reason": why} for r, why in self.conflicts],
            "refused": [{"run": r, "reason": why} for r, why in self.refused],
            "files": self.files, "bytes": self.bytes, "seconds": round(self.seconds, 3),
            "complete": self.complete, "left": self.left,
            "stopped": (self.stopped.one_line() if self.stopped is not None
                        else "interrupted" if self.interrupted else None),
        }


def same_store(a: Store, b: Store) -> bool:
    """One store opened twice (also as a path and as a sqlite:/// URL of that path)."""
    return a.identity == b.identity


def transfer(source: Store, dest: Store, selection: Selection, *, shape_of: ShapeOf,
             dry_run: bool = False, stop: Callable[[], bool] = lambda: False
             ) -> TransferReport:
    """Copy the selected runs of `source` that `dest` does not hold (module docstring);
    `shape_of`: each run's probe's result shape (`Store.add`).
    Never raises for one run: a conflict or a refused run is reported and the others
    go on. A database error or an interruption stops the transfer; the report says how
    far it got (`stopped`, `interrupted`, `left`). `stop()` true (Ctrl-C, SIGTERM): stop
    at the next point where no database call is under way, before the next run or the
    next chunk of the run being copied, which is then dropped whole (rolled back). A
    KeyboardInterrupt (a second Ctrl-C) stops at once, wherever it lands."""
    if same_store(source, dest):
        raise UsageError(f"{source.display} is both the source and the destination")
    report = TransferReport(source.display, dest.display, dry_run)
    t0 = time.monotonic()
    ids = [source.resolve(ref) for ref in selection.refs] if selection.refs else None
    rows = source.select(ids=ids, hosts=selection.hosts, probes=selection.probes,
                         since=selection.since)
    report.selected = len(rows)
    there = dest.digests([r.id for r in rows])
    ours = source.digests(list(there))
    try:
        for row in rows:
            if stop():
                report.interrupted = True
                break
            if row.id in there:
                _compare(source, dest, row.id, ours[row.id], there[row.id], report)
            else:
                _copy_one(source, dest, row.id, report, dry_run, stop, shape_of)
    except (KeyboardInterrupt, _Stopped):
        report.interrupted = True
    except RtlabError as exc:
        if stop():  # a second Ctrl-C inside the database driver fails its call
            report.interrupted = True
        else:
            report.stopped = exc
    report.seconds = time.monotonic() - t0
    return report


def _compare(source: Store, dest: Store, run_id: str, ours: str, theirs: str,
             report: TransferReport) -> str:
    if ours == theirs:
        report.already.append(run_id)
        return "already"
    why = (f"{dest.display} holds run {run_id} with other content "
           f"({_differences(source.stored(run_id), dest.stored(run_id))}); not copied, "
           "stored runs are never overwritten")
    report.conflicts.append((run_id, why))
    return "conflict"


class _Stopped(Exception):
    """Raised between two chunks of a run being copied when the transfer is asked to
    stop: the destination's transaction (or raw files) of that run is taken back."""


def _checked(chunks: Iterable[bytes], stop: Callable[[], bool]) -> Iterator[bytes]:
    for chunk in chunks:
        if stop():
            raise _Stopped
        yield chunk


def _copy_one(source: Store, dest: Store, run_id: str, report: TransferReport,
              dry_run: bool, stop: Callable[[], bool], shape_of: ShapeOf) -> str:
    try:
        run = source.stored(run_id)
    except RtlabError as exc:
        if _is_fatal(exc) or stop():  # failed by an interrupt: not refused
            raise
        report.refused.append((run_id, f"run {run_id} not copied: {exc.one_line()}"))
        return "refused"
    why = _why_refused(run)
    if why is not None:
        report.refused.append((run_id, why))
        return "refused"
    files = source.raw_files(run_id)

    def content(raw: RawFile) -> Callable[[], Any]:
        return lambda: _checked(source.read_raw(run_id, raw), stop)

    if not dry_run:
        try:
            stored = dest.add_copy(run, [(raw, content(raw)) for raw in files], shape_of)
        except RtlabError as exc:
            if _is_fatal(exc) or stop():
                raise
            report.refused.append((run_id, exc.one_line()))
            return "refused"
        if not stored:  # another process stored it since we looked
            theirs = dest.digests([run_id]).get(run_id)
            return _compare(source, dest, run_id, run.digest, theirs or "", report)
    report.copied.append(run_id)
    report.files += len(files)
    report.bytes += sum(f.size for f in files)
    return "copied"


def _why_refused(run: StoredRun) -> str | None:
    """Why a stored run may not be copied: unreadable, of an unknown version, or
    numbers that fail validation without being marked invalid."""
    try:
        result = run.result()
    except RtlabError as exc:
        return f"run {run.run_id} not copied: {exc.one_line()}"
    if result.run_id != run.run_id:
        return f"run {run.run_id} not copied: its stored result names run {result.run_id}"
    if result.status != "invalid":
        problem = first_problem(result)
        if problem is not None:
            return (f"run {run.run_id} not copied: its numbers contradict each other "
                    f"({problem}) but it is not marked invalid")
    return None


def _is_fatal(exc: RtlabError) -> bool:
    """A database or file system failure stops the transfer (each later run would fail
    the same way); anything else concerns one run."""
    from sqlalchemy.exc import SQLAlchemyError

    return isinstance(exc.__cause__, (SQLAlchemyError, OSError))


def _differences(a: StoredRun, b: StoredRun) -> str:
    try:
        da, db = json.loads(a.text), json.loads(b.text)
    except ValueError:
        return "one of them is damaged"
    keys = sorted(k for k in set(da) | set(db) if da.get(k) != db.get(k))
    return f"differs in: {', '.join(keys)}" if keys else "differs in its JSON text only"
