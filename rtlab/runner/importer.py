# SPDX-License-Identifier: MIT
"""`rtlab results import FILE.jsonl`: store a raw engine output file after the fact.

This recovers a run whose host process died (the raw stream is written to the
store's runs/ directory line by line while measuring) or a probe run by hand
(`rtlab-probe timer ... > out.jsonl`).

A run writes one raw file per probe and phase (`runner.raw_layout.raw_for`): `ID.jsonl`
is the first phase's (first probe's), `ID.N-PHASE.jsonl` phase N's, and when a
phase has several probes `ID.N-PHASE-LABEL.jsonl` the others (in the first
phase) or all of them (in later phases), and before anything runs
`ID.layout.json` lists every phase with its files and labels
(`runner.raw_layout.write_layout`). Given any of these files, the whole run is imported as
one result, its phases named from the layout (or, without one, from the file
names); `one_file` imports just the file given, as before. A traced phase's capture and
samples beside its raw file (`ID.N-PHASE.trace/`, `ID.N-PHASE.samples`) are attributed
as the runner does (rtlab.runner.import_trace) and kept in the store's runs directory.
"""

from __future__ import annotations

import re
import shutil
import socket
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rtlab import __version__
from rtlab.engine.jsonl import StreamCollector, UnknownSchemaError, log_notes
from rtlab.errors import RtlabError, UsageError
from rtlab.exitcodes import ExitCode
from rtlab.fileio import IMPORT_LIMIT, read_input
from rtlab.probes.extras import probe_notes
from rtlab.probes.registry import shape as probe_shape
from rtlab.results.model import RunResult
from rtlab.results.store import Store
from rtlab.results.validate import ensure_valid, nothing_measured
from rtlab.runner.import_trace import ImportedTrace, attribute_imported, run_threshold
from rtlab.runner.outcome import STATUS_RANK, combine_probes, merge_phases
from rtlab.runner.raw_layout import LAYOUT_SUFFIX
from rtlab.runner.tracing import capture_parts

_ID_RE = re.compile(r"[0-9a-f]{8}")
# a later phase's (or an extra probe's) raw file: ID.N-PHASE[-LABEL].jsonl
_PHASE_FILE_RE = re.compile(r"(?P<id>[0-9a-f]{8})\.(?P<n>[1-9][0-9]{0,3})-(?P<rest>.+)\.jsonl")
FIRST_PHASE_DEFAULT = "phase1"


def import_jsonl(path: Path, store: Store, command_line: list[str] | None = None, *,
                 one_file: bool = False, transport: Any = None) -> RunResult:
    """Store the run of a raw file. A store raw file of a multi-phase run (`ID.jsonl` with
    `ID.N-*.jsonl` beside it, or one of those) brings its whole run unless `one_file`.
    `transport`: the board the files were fetched from (its kernel's symbols)."""
    if not one_file:
        found = _run_files(path)
        if found is not None:
            return _import_run(path, *found, store, command_line, transport)
    col = _read(path)
    if col.state is None:
        raise UsageError(f"{path} holds no engine snapshot or result: nothing to import"
                         + (f" ({col.stream.corrupt_lines} corrupt lines)"
                            if col.stream.corrupt_lines else ""))
    # Reuse the id of a raw file from the store's runs/ directory (a lost run).
    run_id = path.stem if _ID_RE.fullmatch(path.stem) else None
    _refuse_stored(store, run_id)
    run_id = run_id or store.new_id()
    status, partial = stored_status(col)
    host = _host(col, path, command_line)
    result = col.to_result(run_id, status=status, partial=partial, host=host,
                           extra_notes=[f"imported from {path.name}",
                                        *log_notes(col.stream.logs)])
    ensure_valid(result, _record(path, col))
    traces: list[ImportedTrace] = []
    if _ID_RE.fullmatch(path.stem) and len(result.phases) == 1:  # a run's first raw file
        name = _first_phase_name(run_id, path, {path: col})
        if name is not None and capture_parts(path.parent / f"{run_id}.1-{name}.trace"):
            result.phases[0].name = name  # as the run called it (and its capture)
            kept, tnotes = attribute_imported(path.parent, run_id, 1, name, col,
                                              result.phases[0],
                                              run_threshold(path.parent, run_id), transport)
            traces += [kept] if kept is not None else []
            result.notes += tnotes
    _conclude(result)
    store.add(result, probe_shape)
    _copy(path, store.raw_path(run_id))
    for t in traces:
        t.keep(store.runs_dir)
    return result


def _read(path: Path) -> StreamCollector:
    data = read_input(path, "import file", IMPORT_LIMIT)  # regular, bounded (rtlab.fileio)
    col = StreamCollector(cumulative=True)  # an imported file: its records only grow
    # NUL bytes are not "binary" here: a raw file cut by a crash can end in zeros (delayed
    # allocation); its lines up to there are kept, the damaged ones counted as corrupt
    text = data.decode("utf-8", errors="replace")
    for number, line in enumerate(text.splitlines(keepends=True), 1):
        try:
            col.feed(line)
        except UnknownSchemaError as exc:  # a file we cannot read: bad input, exit 2
            raise UsageError(f"{path}:{number}: {exc.message}", hint=exc.hint) from None
    if col.contradiction is not None:  # numbers that contradict each other: not stored
        raise UsageError(f"{path}: {col.contradiction}", hint="nothing was stored")
    return col


def _record(path: Path, col: StreamCollector) -> str:
    """FILE:LINE of the record whose numbers a result holds (validation errors)."""
    return f"{path}:{col.state_line}" if col.state_line is not None else str(path)


def _conclude(result: RunResult) -> None:
    """A run that measured nothing is not `completed`, and the probe's own notes are
    added (as for a live run: runner.run)."""
    why = nothing_measured(result, probe_shape(result.probe))
    if why is not None:
        result.notes.append(why)
        if result.status in ("completed", "threshold"):
            result.status = "failed"
    else:
        result.notes += probe_notes(result)


def stored_status(col: StreamCollector) -> tuple[str, bool]:
    """Status and partial of a run from what its engine said last (cf. runner.classify);
    also for monitor segments."""
    engine_status = col.result.get("status") if col.result else None
    if engine_status == "completed":
        return "completed", False
    if engine_status == "threshold":
        return "threshold", False
    if engine_status == "error":
        return "failed", True
    return "partial", True


def _refuse_stored(store: Store, run_id: str | None) -> None:
    if run_id is not None and store.exists(run_id):
        raise RtlabError(f"run {run_id} is already stored; stored runs are never overwritten")


def _host(col: StreamCollector, given: Path, command_line: list[str] | None
          ) -> dict[str, Any]:
    system = (col.header or {}).get("system") or {}
    return {
        "rtlab_version": __version__,
        "hostname": system.get("hostname") or socket.gethostname(),
        "start_wall": wall_iso((col.header or {}).get("start_realtime_ns")),
        "end_wall": _end_wall(col),
        "command_line": command_line if command_line is not None else list(sys.argv),
        "transport": None,
        "imported_from": str(given),
    }


def _end_wall(col: StreamCollector) -> str | None:
    return wall_iso(col.result.get("end_realtime_ns")) if col.result else None


def _copy(src: Path, dest: Path) -> None:
    """Keep the raw file in the store's runs/ directory (never over an existing one)."""
    if src.resolve() != dest.resolve() and not dest.exists():
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dest)


# a whole run from its raw files ---------------------------------------------------------


def _run_files(path: Path) -> tuple[str, list[tuple[int, str, Path]]] | None:
    """(run id, its `ID.N-REST.jsonl` files) when `path` is a raw file of a run that has
    more than one; None for a lone `ID.jsonl` or a file not named like a store raw file."""
    m = _PHASE_FILE_RE.fullmatch(path.name)
    if m is not None:
        run_id = m["id"]
    elif path.suffix == ".jsonl" and _ID_RE.fullmatch(path.stem):
        run_id = path.stem
    else:
        return None
    siblings = []
    for p in sorted(path.parent.glob(f"{run_id}.*-*.jsonl")):
        s = _PHASE_FILE_RE.fullmatch(p.name)
        if s is not None and s["id"] == run_id:
            siblings.append((int(s["n"]), s["rest"], p))
    has_layout = (path.parent / (run_id + LAYOUT_SUFFIX)).is_file()
    return (run_id, siblings) if siblings or has_layout else None


def _layout_file(directory: Path, run_id: str) -> list[_PhaseFiles] | None:
    """The phases and files the runner wrote down before it started (`ID.layout.json`,
    runner.raw_layout.write_layout); None when there is none or it cannot be read."""
    import json

    try:
        doc = json.loads((directory / (run_id + LAYOUT_SUFFIX)).read_text())
        phases = [_PhaseFiles(i + 1, str(ph["name"]),
                              [(None if f.get("label") is None else str(f["label"]),
                                directory / Path(str(f["file"])).name) for f in ph["files"]])
                  for i, ph in enumerate(doc["phases"])]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return phases if doc.get("run_id") == run_id and phases else None


@dataclass
class _PhaseFiles:
    number: int  # 1-based, as in the file names
    name: str
    files: list[tuple[str | None, Path]] = field(default_factory=list)  # (label, raw file)


def _import_run(given: Path, run_id: str, siblings: list[tuple[int, str, Path]],
                store: Store, command_line: list[str] | None, transport: Any = None
                ) -> RunResult:

    first = given.parent / f"{run_id}.jsonl"
    written = _layout_file(given.parent, run_id)
    if written is not None:
        paths = [p for ph in written for _, p in ph.files if p.exists()]
    else:
        paths = ([first] if first.exists() else []) + [p for _, _, p in siblings]
    cols: dict[Path, StreamCollector | str] = {}
    for p in paths:
        try:
            cols[p] = _read(p)
        except UsageError as exc:  # unreadable: this phase (probe) is lost, not the run
            cols[p] = exc.one_line()
    lost: list[str] = []
    if written is not None:
        phases, notes = written, []
        while len(phases) > 1 and not any(p.exists() for _, p in phases[-1].files):
            lost.insert(0, phases.pop().name)  # the host died before these phases
        lost = [f"phases not run: {', '.join(lost)}"] if lost else []
    else:
        phases, notes = _layout(run_id, first, siblings, cols)
        numbers = {ph.number for ph in phases}
        lost = [f"phase {n} lost: no raw file {run_id}.{n}-*.jsonl"
                for n in range(2, max(numbers)) if n not in numbers]
    done: list[tuple[RunResult, ExitCode]] = []
    traces: list[ImportedTrace] = []
    threshold_ns = run_threshold(given.parent, run_id)
    last_col: StreamCollector | None = None
    host: dict[str, Any] = {}  # filled in below, shared by every phase's result
    for ph in phases:
        probes: list[tuple[RunResult, ExitCode]] = []
        for label, p in ph.files:
            col = cols.get(p)
            why = (col if isinstance(col, str) else
                   _why_empty(col) if col is not None and col.state is None else None)
            if col is None or why is not None:
                who = f"phase {ph.name}" + (f": probe {label}" if label is not None else "")
                lost.append(f"{who} lost: {p.name} {why or 'not found'}")
                continue
            assert isinstance(col, StreamCollector)
            if not host:
                host.update(_host(col, given, command_line))
            last_col = col
            status, partial = stored_status(col)
            res = col.to_result(run_id, status=status, partial=partial, host=host,
                                phase=ph.name, extra_notes=log_notes(col.stream.logs))
            ensure_valid(res, _record(p, col))
            if label is not None:
                for ch in res.phases[0].channels:
                    ch.name = f"{label}.{ch.name}"
                res.notes = [f"{label}: {n}" for n in res.notes]
            if p == ph.files[0][1]:  # the measured probe: its engine recorded the trace
                kept, tnotes = attribute_imported(given.parent, run_id, ph.number, ph.name,
                                                  col, res.phases[0], threshold_ns, transport)
                traces += [kept] if kept is not None else []
                res.notes += tnotes
            probes.append((res, ExitCode.OK))  # an import's exit code is 0 (or it fails)
        if probes:
            done.append(combine_probes(probes))
    if not done:
        raise UsageError(f"no raw file of run {run_id} holds an engine snapshot or result: "
                         "nothing to import (" + "; ".join(lost) + ")")
    _refuse_stored(store, run_id)
    assert last_col is not None
    host["end_wall"] = _end_wall(last_col)
    host["phases"] = [{"name": ph.name, "raw": [p.name for _, p in ph.files]}
                      for ph in phases]
    result, _ = merge_phases(done, len(phases), False, None)
    result.notes += notes + lost
    if lost and STATUS_RANK[result.status] < STATUS_RANK["partial"]:
        result.status = "partial"
    result.partial = result.partial or bool(lost)
    result.notes.append("imported from " + ", ".join(p.name for p in paths))
    _conclude(result)
    store.add(result, probe_shape)
    for p in paths:
        _copy(p, store.runs_dir / p.name)
    for t in traces:
        t.keep(store.runs_dir)
    if written is not None:
        layout = given.parent / (run_id + LAYOUT_SUFFIX)
        _copy(layout, store.runs_dir / layout.name)
    return result


def _why_empty(col: StreamCollector) -> str:
    return ("holds no engine snapshot or result"
            + (f" ({col.stream.corrupt_lines} corrupt lines)" if col.stream.corrupt_lines
               else ""))


def _layout(run_id: str, first: Path, siblings: list[tuple[int, str, Path]],
            cols: dict[Path, StreamCollector | str]) -> tuple[list[_PhaseFiles], list[str]]:
    """The run's phases in order with their files and probe labels, read off the file
    names as `runner.raw_layout.raw_for` wrote them; notes on what the names could not say."""
    def probe(p: Path) -> str | None:
        col = cols.get(p)
        return col.probe if isinstance(col, StreamCollector) else None

    groups: dict[int, list[tuple[str, Path]]] = {}
    for n, rest, p in siblings:
        groups.setdefault(n, []).append((rest, p))
    notes: list[str] = []
    several = 1 in groups or any(len(g) > 1 for g in groups.values())
    phases = {n: _PhaseFiles(n, g[0][0], [(None, g[0][1])]) for n, g in groups.items()}
    if several:  # several probes per phase: split each NAME-LABEL, bigger groups first
        known: set[str] = set()
        for n, g in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
            name, labels = _split([r for r, _ in g], [probe(p) for _, p in g], known)
            phases[n] = _PhaseFiles(n, name, list(zip(labels, [p for _, p in g], strict=True)))
            if n > 1:
                known.update(labels)
    one = phases.get(1)
    if one is None:
        name = _first_phase_name(run_id, first, cols)
        if name is None:
            name = FIRST_PHASE_DEFAULT
            notes.append(f"the first phase's name is in no raw file: called it {name!r}")
        one = phases[1] = _PhaseFiles(1, name)
    label = None
    if several:
        missing = known - {lb for lb, _ in one.files}
        if len(missing) == 1:
            (label,) = missing
        else:
            label = probe(first) or "probe1"
            notes.append(f"phase {one.name}: the label of {first.name}'s probe is in no "
                         f"file name: used {label!r} (its probe's name, the default label)")
        order = [label] + [lb for lb, _ in one.files]
        for ph in phases.values():
            ph.files.sort(key=lambda f: (order.index(f[0]) if f[0] in order else len(order),
                                         f[0] or ""))
    one.files.insert(0, (label, first))
    return [phases[n] for n in sorted(phases)], notes


def _split(rests: list[str], probes: list[str | None], known: set[str]
           ) -> tuple[str, list[str]]:
    """Phase name and probe labels of one phase's `NAME-LABEL` file names (both may hold
    `-`). Preferred: labels other phases have, then labels equal to the probes' names (the
    default label), then the longest phase name."""
    cands = []
    for i, c in enumerate(rests[0]):
        name = rests[0][:i]
        if c == "-" and i and all(r.startswith(name + "-") and len(r) > i + 1 for r in rests):
            cands.append((name, [r[i + 1:] for r in rests]))
    if not cands:
        return rests[0], list(rests)
    return max(cands, key=lambda nl: (bool(known) and set(nl[1]) <= known,
                                      nl[1] == probes, len(nl[0])))


def _first_phase_name(run_id: str, first: Path, cols: dict[Path, StreamCollector | str]
                      ) -> str | None:
    """The first phase's name where a traced run wrote it: its samples file (named in the
    engine header) or its trace capture beside the raw file (`ID.1-NAME.samples|.trace`)."""
    col = cols.get(first)
    header = col.header if isinstance(col, StreamCollector) else None
    given = ((header or {}).get("config") or {}).get("samples_file")
    names = [Path(given).name] if isinstance(given, str) else []
    names += sorted(p.name for p in first.parent.glob(f"{run_id}.1-*"))
    for name in names:
        m = re.fullmatch(re.escape(run_id) + r"\.1-(.+)\.(samples|trace)", name)
        if m is not None:
            return m[1]
    return None


def wall_iso(ns: object) -> str | None:
    """A wall-clock time in ns as stored (ISO 8601, UTC, milliseconds); None if unset."""
    if not isinstance(ns, int) or isinstance(ns, bool) or ns <= 0:
        return None
    from datetime import UTC, datetime

    return datetime.fromtimestamp(ns / 1e9, UTC).isoformat(timespec="milliseconds")
