# SPDX-License-Identifier: MIT
"""Spike attribution during a run (`rtlab run --trace`, scenario `[trace]`).

For each phase: a `Recorder` (rtlab.trace) records the ordinary tracepoints of
the measured CPUs into its own trace instance, its reader pinned to a
housekeeping CPU when there is one; the measured probe writes every sample to
a `--samples` file in the runs directory; afterwards every sample above the
threshold is attributed (`attribute_run`). The capture is saved beside the raw
JSON Lines (`<run>.<n>-<phase>.trace/`, bounded by `CAPTURE_LIMIT_MB` per CPU)
so `rtlab spikes RUN --threshold DUR` can attribute again later.

What is stored per result phase (docs/results.md): `spikes` (at most
`MAX_SPIKE_RECORDS` cause records, the worst, in time order), `spike_summary`
(counts by dominant cause class over all spikes) and `trace` (where the capture
and samples are, the threshold, what was lost).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rtlab.errors import SkippedError
from rtlab.trace.attribution import attribute_run, is_virtualized
from rtlab.trace.causes import Spike
from rtlab.trace.spike_sources import read_samples
from rtlab.trace.tracefs import Recorder, TraceFS

MAX_SPIKE_RECORDS = 1000  # cause records stored per phase (the worst)
MAX_ATTRIBUTED = 20_000  # spikes attributed per phase (the worst); the rest only counted
CAPTURE_LIMIT_MB = 128  # per traced CPU, in memory and on disk (oldest pages dropped)
CLASSES = ("task", "irq", "softirq", "timer", "unexplained", "other", "untraced")
PROC_FILESYSTEMS = "/proc/filesystems"
TRACEFS_MOUNTPOINT = "/sys/kernel/tracing"


def check_available() -> None:
    """Before anything starts: tracefs is mounted or can be mounted here.
    SkippedError (exit 4) with a one-line reason otherwise."""

    if TraceFS.find() is not None:
        return
    try:
        fs = Path(PROC_FILESYSTEMS).read_text()
    except OSError:
        fs = ""
    if not any(line.split()[-1:] == ["tracefs"] for line in fs.splitlines()):
        raise SkippedError("--trace: this kernel has no tracefs",
                           hint="a kernel with CONFIG_FTRACE and CONFIG_TRACING")
    if os.geteuid() != 0:
        raise SkippedError("--trace: tracefs is not mounted and mounting it needs root",
                           hint="run as root or mount -t tracefs nodev /sys/kernel/tracing")
    if not Path(TRACEFS_MOUNTPOINT).is_dir():
        raise SkippedError(f"--trace: no tracefs mount point {TRACEFS_MOUNTPOINT}")


def cause_class(cause: Any) -> str:
    """The dominant cause of one spike as a class: task, irq, softirq, timer,
    unexplained, other (only the probe's own wake path) or untraced."""
    if cause.coverage == "none":
        return "untraced"
    best = max(cause.interference(), key=lambda c: c.duration_ns, default=None)
    if best is None or cause.unexplained_ns >= best.duration_ns:
        return "unexplained" if cause.unexplained_ns > 0 else "other"
    return _kind_class(best.kind, best.name)


def _kind_class(kind: str, name: str | None) -> str:
    if kind == "hrtimer" or (kind == "vector" and name == "local_timer"):
        return "timer"
    if kind in ("vector", "ipi", "irq"):
        return "irq"
    if kind in ("task", "softirq"):
        return kind
    return "other"


def record_of(cause: Any, start_monotonic_ns: int, phase: str) -> dict[str, Any]:
    """A stored spike record: the cause dict plus run-relative time, class and phase."""
    d = cause.to_dict()
    d["at_ns"] = cause.wake_ns - start_monotonic_ns  # wake-up, as in the samples file
    d["class"] = cause_class(cause)
    d["phase"] = phase
    return d


def build_records(causes: Sequence[Any], start_monotonic_ns: int, phase: str,
                  threshold_ns: int, total: int | None = None,
                  limit: int = MAX_SPIKE_RECORDS) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(spikes, spike_summary): the `limit` worst records in time order, and the
    counts over all `causes` (`total`: spikes found, attributed or not)."""
    by_class: dict[str, int] = {}
    tops: dict[str, int] = {}
    unexplained = latency = 0
    for c in causes:
        cls = cause_class(c)
        by_class[cls] = by_class.get(cls, 0) + 1
        top = cls if cls in ("unexplained", "untraced", "other") else c.top()
        tops[top] = tops.get(top, 0) + 1
        unexplained += c.unexplained_ns
        latency += c.latency_ns
    worst = sorted(causes, key=lambda c: -c.latency_ns)[:limit]
    worst.sort(key=lambda c: (c.wake_ns, c.cpu))
    records = [record_of(c, start_monotonic_ns, phase) for c in worst]
    n = len(causes) if total is None else total
    summary: dict[str, Any] = {
        "threshold_ns": threshold_ns,
        "spikes": n,
        "attributed": len(causes),
        "stored": len(records),
        "by_class": dict(sorted(by_class.items(), key=lambda kv: -kv[1])),
        "top_causes": dict(sorted(tops.items(), key=lambda kv: -kv[1])[:10]),
        "latency_ns": latency,
        "unexplained_ns": unexplained,
    }
    return records, summary


def attribute_gaps(capture: Any, gaps: Sequence[tuple[int, int, int]], info: dict[str, Any],
                   threshold_ns: int, phase: str
                   ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Attribute the gaps a polling probe (noise) listed: each gap [start, end] on a CPU is
    classified like a late wake-up whose deadline was its start."""

    start = int(info["start_monotonic_ns"])
    tids = dict(zip(info.get("channel_cpus") or [], info.get("channel_tids") or [],
                    strict=False))
    above = [Spike(cpu, s, e, tids.get(cpu), source="gap") for cpu, s, e in gaps
             if e - s > threshold_ns]
    total = len(above)
    if total > MAX_ATTRIBUTED:
        above = sorted(above, key=lambda sp: -sp.latency_ns)[:MAX_ATTRIBUTED]
    causes = attribute_run(capture, above, start, threshold_ns=threshold_ns,
                           virtualized=info.get("virtualized"))
    return build_records(causes, start, phase, threshold_ns, total=total)


def attribute(capture: Any, samples_path: Path, info: dict[str, Any], threshold_ns: int,
              phase: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Attribute the samples of one traced phase (`info`: the phase's `trace` dict)."""

    start = int(info["start_monotonic_ns"])
    cpus = info.get("channel_cpus") or []
    above = [s for s in read_samples(samples_path)
             if s[2] > threshold_ns and s[0] < len(cpus) and cpus[s[0]] is not None]
    total = len(above)
    if total > MAX_ATTRIBUTED:
        above = sorted(above, key=lambda s: -s[2])[:MAX_ATTRIBUTED]
    causes = attribute_run(capture, above, start, threshold_ns=threshold_ns,
                           channel_cpus=cpus, channel_tids=info.get("channel_tids"),
                           at_is_deadline=False, virtualized=info.get("virtualized"))
    return build_records(causes, start, phase, threshold_ns, total=total)


@dataclass
class PhaseTrace:
    """Recording of one phase: start() before the probes, finish() after them."""

    cpus: list[int]
    online: list[int]
    threshold_ns: int
    buffer_kb: int
    capture_dir: Path
    samples_path: Path
    recorder: Any = None
    info: dict[str, Any] = field(default_factory=dict)
    started: float = 0.0

    def start(self) -> None:

        housekeeping = [c for c in self.online if c not in self.cpus]
        self.recorder = Recorder(self.cpus, reader_cpus=housekeeping[:1] or None,
                                 buffer_kb=self.buffer_kb, memory_limit_mb=CAPTURE_LIMIT_MB)
        self.recorder.start()
        self.started = time.monotonic()

    def close(self) -> None:
        if self.recorder is not None:
            try:
                self.recorder.stop()
            finally:
                self.recorder.close()

    def finish(self, header: dict[str, Any] | None, phase: str,
               gaps: Sequence[tuple[int, int, int]] | None = None
               ) -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any], list[str]]:
        """Stop, save the capture, attribute: (spikes, spike_summary, trace info, notes).
        `gaps`: (cpu, start, end) of a polling probe's gaps, attributed instead of samples."""

        rec = self.recorder
        notes: list[str] = []
        try:
            rec.stop()
            elapsed = max(time.monotonic() - self.started, 1e-9)
            cap = rec.capture()
            lost = {int(k): int(v) for k, v in rec.lost_events().items() if v}
            missing = list(rec.missing_events)
        finally:
            rec.close()
        cap.save(self.capture_dir)
        pages = sum(len(p) for p in cap.pages.values())
        size = sum(f.stat().st_size for f in self.capture_dir.rglob("*") if f.is_file())
        evicted_total = sum(int(v) for v in cap.evicted.values())
        header = header or {}
        threads = (header.get("effective") or {}).get("threads") or []
        info: dict[str, Any] = {
            "capture": self.capture_dir.name,
            "samples": (self.samples_path.name  # relative to the runs directory
                        if self.samples_path.parent == self.capture_dir.parent
                        else str(self.samples_path)),
            "threshold_ns": self.threshold_ns,
            "buffer_kb": self.buffer_kb,
            "cpus": self.cpus,
            "reader_cpus": rec.reader_cpus,
            "start_monotonic_ns": header.get("start_monotonic_ns"),
            # samples channel index = position in the header's effective.threads
            "channel_cpus": [t.get("cpu") for t in threads],
            "channel_tids": [t.get("tid") for t in threads],
            "virtualized": is_virtualized(),
            "events_missing": missing,
            "lost_events": {str(k): v for k, v in lost.items()},
            "evicted_pages": evicted_total,
            "pages": pages,
            "capture_bytes": size,
            "pages_per_s": round(pages / elapsed, 1),
        }
        if lost:
            notes.append("trace lost events on "
                         + ", ".join(f"CPU{c}: {v}" for c, v in sorted(lost.items()))
                         + " (spikes there may be partly unexplained)")
        if evicted_total:
            notes.append(f"trace capture bounded at {CAPTURE_LIMIT_MB} MB per CPU: "
                         f"{evicted_total} oldest pages dropped (early spikes untraced)")
        if info["start_monotonic_ns"] is not None and gaps:
            t0 = time.monotonic()
            spikes, summary = attribute_gaps(cap, gaps, info, self.threshold_ns, phase)
            info["attribution_s"] = round(time.monotonic() - t0, 3)
            gaps_path = self.samples_path.with_suffix(".gaps.json")
            gaps_path.write_text(json.dumps([list(g) for g in gaps]))
            info["samples"] = None  # a polling probe: its gap list was attributed instead
            info["gaps"] = gaps_path.name  # for `rtlab spikes --threshold`
            return spikes, summary, info, notes
        if info["start_monotonic_ns"] is None or not self.samples_path.exists():
            notes.append("tracing: no engine header or samples file, spikes not attributed")
            return [], {"threshold_ns": self.threshold_ns, "spikes": 0, "attributed": 0,
                        "stored": 0, "by_class": {}, "top_causes": {}}, info, notes
        t0 = time.monotonic()
        spikes, summary = attribute(cap, self.samples_path, info, self.threshold_ns, phase)
        info["attribution_s"] = round(time.monotonic() - t0, 3)
        if summary["attributed"] < summary["spikes"]:
            notes.append(f"tracing: {summary['spikes']} spikes, only the worst "
                         f"{summary['attributed']} attributed")
        return spikes, summary, info, notes


def phase_trace(spec: Any, cpus: Sequence[int], online: Sequence[int], runs_dir: Path,
                run_id: str, index: int, phase: str) -> PhaseTrace:
    stem = f"{run_id}.{index + 1}-{phase}"
    runs_dir.mkdir(parents=True, exist_ok=True)
    return PhaseTrace(cpus=sorted(set(cpus)), online=sorted(online),
                      threshold_ns=spec.threshold_ns, buffer_kb=spec.buffer_kb,
                      capture_dir=runs_dir / f"{stem}.trace",
                      samples_path=runs_dir / f"{stem}.samples")
