# SPDX-License-Identifier: MIT
"""Importers of peer tools' output into the rtlab result model.

`import_file(path, fmt)` parses a whole file into a `RunResult` (nothing is
stored until it parsed completely); `rtlab results import --format FMT FILE`
stores it. Every imported result is marked in `provenance["imported"]`
(format, file name, tool version, resolution) and in its notes.

Formats (docs/results.md#importing-peer-tools-files lists every version read):

* `cyclictest-json`     - `cyclictest --json=FILE`
* `cyclictest-hist`     - the text output of `cyclictest -h N` (stdout, with or without -q);
                          rows cut but trailer intact: the trailer's statistics, flagged
* `jitterdebugger`      - `results.json` of `jitterdebugger -o DIR` (every version, also
                          the ones without a `version` key)
* `oslat`               - oslat's printed summary (v1.x, v2.x) or its `--json=FILE`
* `rtla-timerlat-hist`  - the text output of `rtla timerlat hist` (also -u, `ALL:` block)
* `rtla-osnoise-hist`   - the text output of `rtla osnoise hist`
* `sockperf`            - `sockperf ping-pong --full-log FILE` (every layout since 2.x),
                          or sockperf's printed summary alone (percentiles only, flagged)

Resolution: peers count whole-µs buckets (cyclictest truncates a latency to
`floor(µs)`); each count is placed at its bucket's lower edge (k µs = k·1000 ns)
in rtlab's log-linear histogram, so imported values carry the peer's ±1 µs
truncation (the log-linear bucket itself adds < 0.8 %). Samples beyond the
peer's histogram range (cyclictest overflows, jitterdebugger's silently dropped
samples > 1 ms: count minus the histogram's sum) are placed at the reported max,
so percentiles beyond the range are upper bounds; the number is in the notes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from rtlab.errors import UsageError
from rtlab.fileio import IMPORT_LIMIT, decode_text, read_input
from rtlab.results.importers import jitterdebugger, oslat, rtla, sockperf
from rtlab.results.importers.common import ImportFormatError
from rtlab.results.importers.cyclictest import parse_hist, parse_json
from rtlab.results.model import RunResult
from rtlab.results.shape import ShapeOf
from rtlab.results.validate import ensure_valid
from rtlab.textfmt import shown

if TYPE_CHECKING:  # pragma: no cover
    from rtlab.results.store import Store

# each format's parser: (the file's text, the run id) -> the result
_PARSERS: dict[str, Callable[[str, str], RunResult]] = {
    "cyclictest-json": parse_json,
    "cyclictest-hist": parse_hist,
    "jitterdebugger": jitterdebugger.parse,
    "oslat": oslat.parse,
    "rtla-timerlat-hist": rtla.parse,
    "rtla-osnoise-hist": rtla.parse_osnoise,
    "sockperf": sockperf.parse,
}
FORMATS: tuple[str, ...] = tuple(_PARSERS)


def _parser(fmt: str) -> Callable[[str, str], RunResult]:
    parse = _PARSERS.get(fmt)
    if parse is None:
        raise UsageError(f"unknown import format {fmt!r}",
                         hint=f"choose one of {', '.join(FORMATS)}")
    return parse


@dataclass(frozen=True)
class ImportContext:
    """What the user tells about an imported file that the file may not say: the host
    (so `rtlab history --host` finds it), kernel, preemption model, and when it was
    measured (default: what the file says, else the file's modification time)."""

    host: str | None = None
    kernel: str | None = None
    preempt: str | None = None
    measured_at: datetime | None = None

    @classmethod
    def from_args(cls, host: str | None, kernel: str | None, preempt: str | None,
                  date: str | None) -> ImportContext:
        for what, value in (("--host", host), ("--kernel", kernel), ("--preempt", preempt)):
            if value is not None and (not value.strip() or not value.isprintable()
                                      or any(c.isspace() for c in value)
                                      or len(value) > NAME_MAX):
                raise UsageError(f"{what} {shown(value)} is not a valid name",
                                 hint=f"give a non-empty word without spaces, at most "
                                      f"{NAME_MAX} characters")
        when = None
        if date is not None:
            try:
                when = datetime.fromisoformat(date)
            except ValueError:
                raise UsageError(f"--date {shown(date)} is not an ISO 8601 date or time",
                                 hint="e.g. 2026-03-01 or 2026-03-01T14:05:00+01:00") from None
            if when.tzinfo is None:
                when = when.astimezone()  # local time, as the user's clock says
        return cls(host, kernel, preempt, when)

    def apply(self, result: RunResult, file_mtime: float | None) -> None:
        prov = result.provenance
        system = prov.setdefault("engine", {}).setdefault("system", {})
        host = prov.setdefault("host", {})
        given = {"hostname": self.host, "release": self.kernel, "preempt": self.preempt}
        for key, value in given.items():
            if value is None:
                continue
            if system.get(key) not in (None, value):
                result.notes.append(f"{key} {system[key]!r} of the file replaced by "
                                    f"{value!r} given at import")
            system[key] = value
        if self.host is not None:
            host["hostname"] = self.host
        if self.measured_at is not None:
            host["start_wall"] = self.measured_at.isoformat()
            host["start_wall_source"] = "given at import (--date)"
        elif not host.get("start_wall") and file_mtime is not None:
            host["start_wall"] = datetime.fromtimestamp(file_mtime, UTC).isoformat()
            host["start_wall_source"] = "modification time of the imported file"


NAME_MAX = 255  # --host/--kernel/--preempt: a host name has at most 253 characters


def import_file(path: str | Path, fmt: str, run_id: str,
                context: ImportContext | None = None, *, nsecs: bool = False) -> RunResult:
    """Parse `path` as `fmt` into a result with id `run_id`. Raises UsageError (one line,
    exit code 2) when the file cannot be read or is not a complete file of that format.
    `nsecs`: the cyclictest-hist file was written by `cyclictest -N` (values in ns)."""
    parse = _parser(fmt)
    if nsecs:
        if fmt != "cyclictest-hist":
            raise UsageError("--nsecs applies to --format cyclictest-hist only",
                             hint="the other formats say their unit themselves")

        def parse(text: str, run_id: str) -> RunResult:
            return parse_hist(text, run_id, unit_ns=1)
    p = Path(path)
    # a regular file of at most IMPORT_LIMIT bytes (rtlab.fileio); Ctrl-C interrupts
    text = decode_text(read_input(p, "import file", IMPORT_LIMIT), "import file", p,
                       lenient=True)
    try:
        result = parse(text, run_id)
    except ImportFormatError as exc:
        raise UsageError(f"{p.name} is not a valid {fmt} file: {exc}", hint=exc.hint) from exc
    except (LookupError, TypeError, AttributeError, ValueError, ArithmeticError) as exc:
        # a structure the parser did not foresee: still one line, nothing stored
        raise UsageError(f"{p.name} is not a valid {fmt} file: unexpected content "
                         f"({type(exc).__name__}: {exc})",
                         hint=f"check that the file is complete and really {fmt}") from exc
    ensure_valid(result, str(p))
    result.provenance.setdefault("imported", {})["file"] = p.name
    result.provenance.setdefault("host", {})["imported_from"] = str(p)
    try:
        mtime: float | None = p.stat().st_mtime
    except OSError:
        mtime = None
    (context or ImportContext()).apply(result, mtime)
    return result


def import_into_store(path: str | Path, fmt: str, store: Store,
                      command_line: list[str] | None = None,
                      context: ImportContext | None = None, *, nsecs: bool = False,
                      shape_of: ShapeOf) -> RunResult:
    """Parse a peer tool's file completely, then store it under a new run id (`shape_of`:
    as for `Store.add`)."""
    result = import_file(path, fmt, store.new_id(), context, nsecs=nsecs)
    if command_line is not None:
        result.provenance["host"]["command_line"] = command_line
    store.add(result, shape_of)
    return result


__all__ = ["FORMATS", "ImportContext", "ImportFormatError", "import_file", "import_into_store"]
