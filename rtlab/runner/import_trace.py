# SPDX-License-Identifier: MIT
"""The trace capture of an imported run (`rtlab results import`, `rtlab results fetch`).

A traced run whose host died leaves each phase's capture (`ID.N-PHASE.trace/`, with the
`.trace.pN` parts of a probe split in parts) and samples (`ID.N-PHASE.samples`) beside its
raw JSON Lines, on this machine or in a board's runs directory (fetched home first). The
import attributes them as the runner does (rtlab.runner.tracing): the threshold is the
run's `[trace]` threshold when its layout file says it, else the default; the channels'
CPUs and threads and the start time come from the phase's engine header. A capture that
cannot be read is a note, never a failed import. What is kept goes into the store's runs
directory once the run is stored (`ImportedTrace.keep`).
"""

from __future__ import annotations

import json
import shutil
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rtlab.runner import kernel_split as ksplit
from rtlab.runner.raw_layout import LAYOUT_SUFFIX
from rtlab.runner.tracing import (
    BOARD_LIMIT_MB,
    CAPTURE_LIMIT_MB,
    _virtualized,
    attribute,
    attribute_gaps,
    board_symbols,
    capture_notes,
    capture_parts,
    keep_capture,
    merge_captures,
    trace_info,
)
from rtlab.scenario.model import TraceSpec
from rtlab.scenario.units import format_duration
from rtlab.trace.capture import TraceCapture
from rtlab.trace.symbols import LocalSymbols


def run_threshold(directory: Path, run_id: str) -> int:
    """The trace threshold the run was recorded with (its layout file's `trace`), or the
    default of `[trace]`."""
    try:
        doc = json.loads((directory / (run_id + LAYOUT_SUFFIX)).read_text())
        value = doc["trace"]["threshold_ns"]
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return TraceSpec().threshold_ns


@dataclass
class ImportedTrace:
    """One phase's capture found beside an imported raw file, attributed."""

    name: str  # the capture directory's name (`ID.N-PHASE.trace`)
    parts: list[Path]  # where the engines wrote it (the first is `name`)
    capture: TraceCapture
    samples: Path | None = None  # the samples file beside it
    gaps: list[tuple[int, int, int]] = field(default_factory=list)  # a polling probe's

    def keep(self, runs_dir: Path) -> None:
        """Keep the capture (parts merged) and the samples in the store's runs directory,
        as a live run does; once the run is stored."""
        dest = runs_dir / self.name
        runs_dir.mkdir(parents=True, exist_ok=True)
        if all(p.parent.resolve() == runs_dir.resolve() for p in self.parts):
            keep_capture(self.capture, self.parts, dest)  # beside the store: in place
        elif not dest.exists():
            self.capture.save(dest)  # merged, with its format files
        if self.samples is not None and not (runs_dir / self.samples.name).exists():
            shutil.copyfile(self.samples, runs_dir / self.samples.name)
        if self.gaps:
            gaps = runs_dir / self.name.removesuffix(".trace")
            gaps = gaps.with_name(gaps.name + ".gaps.json")
            if not gaps.exists():
                gaps.write_text(json.dumps([list(g) for g in self.gaps]))


def attribute_imported(directory: Path, run_id: str, number: int, phase_name: str,
                       col: Any, phase: Any, threshold_ns: int, transport: Any = None
                       ) -> tuple[ImportedTrace | None, list[str]]:
    """Attribute the capture of phase `number` (1-based) beside the raw files in
    `directory`, if it has one: sets `phase.trace`, `.spikes` and `.spike_summary` (the
    result phase of the probe whose collector is `col`). (what to keep, notes)."""
    stem = f"{run_id}.{number}-{phase_name}"
    parts = capture_parts(directory / f"{stem}.trace")
    if not parts:
        return None, []
    try:
        return _attribute(directory, stem, parts, col, phase, threshold_ns, transport)
    except Exception as exc:  # never fails the import: the run is stored without it
        what = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        return None, [f"tracing: the trace capture {stem}.trace cannot be read ({what}); "
                      "spikes not attributed"]


def _attribute(directory: Path, stem: str, parts: list[Path], col: Any, phase: Any,
               threshold_ns: int, transport: Any
               ) -> tuple[ImportedTrace | None, list[str]]:
    notes: list[str] = []
    cap = merge_captures([TraceCapture.load(d) for d in parts])
    header = col.header or {}
    here = (transport is None and ((header.get("system") or {}).get("hostname")
                                   == socket.gethostname()))
    if transport is not None:
        cap.symbols = board_symbols(transport, notes)
    elif here and not cap.symbols:
        cap.symbols = LocalSymbols()
    info = trace_info(cap, header, f"{stem}.trace", virtualized=_virtualized(header, not here))
    samples = directory / f"{stem}.samples"
    kept = ImportedTrace(f"{stem}.trace", parts, cap,
                         samples=samples if samples.is_file() else None)
    limit = int(str(cap.meta.get("limit_mb") or 0)) or (
        CAPTURE_LIMIT_MB if transport is None else BOARD_LIMIT_MB)
    info.update({
        "samples": samples.name if kept.samples is not None else None,
        "threshold_ns": threshold_ns,
        "buffer_kb": cap.meta.get("buffer_kb"),
        "target": getattr(transport, "target", None),
        "capture_bytes": sum(f.stat().st_size for d in parts for f in d.rglob("*")
                             if f.is_file()),
        "imported": True,
    })
    notes += capture_notes(cap, limit)
    start = info["start_monotonic_ns"]
    if cap.meta.get("tracer") == "timerlat":
        info["kernel_split"] = ksplit.phase_split(cap, threshold_ns, start)
        notes += ksplit.notes_of(info["kernel_split"])
    gaps = list(col.gaps) or _gaps_file(directory / f"{stem}.gaps.json")
    empty = {"threshold_ns": threshold_ns, "spikes": 0, "attributed": 0, "stored": 0,
             "by_class": {}, "top_causes": {}}
    if start is not None and gaps:
        spikes, summary = attribute_gaps(cap, gaps, info, threshold_ns, phase.name)
        kept.gaps = gaps
        info["samples"] = None
        info["gaps"] = f"{stem}.gaps.json"
    elif start is not None and kept.samples is not None:
        spikes, summary = attribute(cap, samples, info, threshold_ns, phase.name)
        if summary["attributed"] < summary["spikes"]:
            notes.append(f"tracing: {summary['spikes']} spikes, only the worst "
                         f"{summary['attributed']} attributed")
    else:
        phase.trace, phase.spikes, phase.spike_summary = info, [], empty
        notes.append("tracing: no engine header or samples file beside the capture, "
                     "spikes not attributed")
        return kept, notes
    phase.trace, phase.spikes, phase.spike_summary = info, spikes, summary
    notes.append(f"tracing: spikes attributed at import from {stem}.trace "
                 f"(threshold {format_duration(threshold_ns)})")
    return kept, notes


def _gaps_file(path: Path) -> list[tuple[int, int, int]]:
    """A polling probe's gap list a live run wrote beside its capture (`.gaps.json`)."""
    try:
        return [(int(g[0]), int(g[1]), int(g[2])) for g in json.loads(path.read_text())]
    except (OSError, ValueError, TypeError, IndexError):
        return []
