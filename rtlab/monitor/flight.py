# SPDX-License-Identifier: MIT
"""`rtlab monitor --trace`: the engine's flight recorder in every segment.

A days-long watch cannot ship every trace event over the link. Each segment's engine
records in flight mode (`--trace-mode flight`, docs/engine-output.md "Trace capture"):
the board keeps a bounded ring of pages and writes only the pages around each sample
above the trigger, at most `rate` bytes per second, every dropped window counted. When
the segment ends the host fetches that capture (from a board through its engine) beside
the segment's raw file; when the segment is stored, the worst spikes of its windows are
attributed and stored with it, and the capture is kept in the store's runs directory so
`rtlab spikes RUN` can explain them again.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rtlab.errors import RtlabError
from rtlab.results.model import RunResult
from rtlab.runner.tracing import (
    attribute_windows,
    fetch_capture,
    flight_notes,
    trace_info,
)
from rtlab.trace.capture import TraceCapture

DEFAULT_TRIGGER_NS = 100_000
DEFAULT_RATE = 64 * 1024  # bytes/s a board may send for its trace windows


@dataclass(frozen=True)
class MonitorTrace:
    """What `--trace` asks of every segment's engine."""

    trigger_ns: int = DEFAULT_TRIGGER_NS
    rate: int = DEFAULT_RATE  # bytes per second (0: no cap)

    def engine_args(self, trace_dir: str) -> list[str]:
        return ["--trace-dir", trace_dir, "--trace-mode", "flight",
                "--trace-trigger", f"{self.trigger_ns}ns", "--trace-rate", str(self.rate)]

    def as_json(self) -> dict[str, Any]:
        return {"trigger_ns": self.trigger_ns, "rate": self.rate}


def local_dir(raw: Path) -> Path:
    """Where a segment's capture is kept beside its raw file in the state directory."""
    return raw.with_suffix(".trace")


def target_dir(transport: Any, raw: Path) -> str:
    """Where the segment's engine writes its capture: beside the raw file here, in the
    board's runs directory there."""
    if transport.is_local:
        raw.parent.mkdir(parents=True, exist_ok=True)  # the engine makes the capture's dir
        return str(local_dir(raw))
    return f"{transport.board.runs_dir}/{local_dir(raw).name}"


def bring_home(transport: Any, raw: Path) -> str | None:
    """After a segment: a board's capture fetched beside the raw file (None), or why not."""
    if transport.is_local:
        return None
    try:
        fetch_capture(transport, target_dir(transport, raw), local_dir(raw))
    except RtlabError as exc:
        return f"trace windows not fetched from {transport.target}: {exc.message}"
    return None


def attach(result: RunResult, raw: Path, runs_dir: Path, header: dict[str, Any],
           virtualized: bool | None) -> None:
    """Attribute a stored segment's trace windows into its phase, and keep the capture in
    the store's runs directory (`<run>.1-<phase>.trace`). A segment without a capture (no
    --trace, or none fetched) is left as it is."""
    src = local_dir(raw)
    if not (src / "meta.json").is_file() or not result.phases:
        return
    phase = result.phases[0]
    name = f"{result.run_id}.1-{phase.name}.trace"
    dest = runs_dir / name
    from rtlab.trace.capture import flight_windows

    try:
        cap = TraceCapture.load(src)
        windows = flight_windows(src)
    except (OSError, ValueError) as exc:
        result.notes.append(f"trace windows of this segment unreadable: {exc}")
        return
    info = trace_info(cap, header, name, virtualized=virtualized)
    info["samples"] = None
    info["windows"] = "windows.jsonl"
    threshold = int((cap.meta.get("flight") or {}).get("trigger_ns") or DEFAULT_TRIGGER_NS)
    info["threshold_ns"] = threshold
    spikes, summary = attribute_windows(cap, windows, info, threshold, phase.name)
    phase.spikes, phase.spike_summary, phase.trace = spikes, summary, info
    result.notes += flight_notes(cap, windows)
    runs_dir.mkdir(parents=True, exist_ok=True)
    if not dest.exists():
        shutil.copytree(src, dest)


def forget(raw: Path) -> None:
    """The segment is stored: its capture in the state directory goes with its raw file."""
    shutil.rmtree(local_dir(raw), ignore_errors=True)
