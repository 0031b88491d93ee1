# SPDX-License-Identifier: MIT
"""Spike attribution during a run (`rtlab run --trace`, scenario `[trace]`).

For each phase the measured probe's engine records the ordinary tracepoints of its
CPUs itself (`--trace-dir`: its own trace instance, journaled, a reader on a
housekeeping CPU; docs/tracing.md), on this machine or on a board alike, and writes
every sample to a `--samples` file. A board's capture and samples are fetched home
when the phase ends. Afterwards every sample above the threshold is attributed
(`attribute_run`). The capture is kept beside the raw JSON Lines
(`<run>.<n>-<phase>.trace/`, bounded by `CAPTURE_LIMIT_MB` per CPU) so
`rtlab spikes RUN --threshold DUR` can attribute again later.

What is stored per result phase (docs/results.md): `spikes` (at most
`MAX_SPIKE_RECORDS` cause records, the worst, in time order), `spike_summary`
(counts by dominant cause class over all spikes) and `trace` (where the capture
and samples are, the threshold, what was lost).
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rtlab.engine.snapshot import record_bytes, snapshot
from rtlab.errors import RtlabError, SkippedError
from rtlab.runner import kernel_split as ksplit
from rtlab.trace.attribution import attribute_run, is_virtualized
from rtlab.trace.capture import TraceCapture
from rtlab.trace.causes import Spike
from rtlab.trace.spike_sources import read_samples
from rtlab.trace.symbols import KALLSYMS, LocalSymbols, parse_kallsyms
from rtlab.trace.tracefs import TraceFS

MAX_SPIKE_RECORDS = 1000  # cause records stored per phase (the worst)
MAX_ATTRIBUTED = 20_000  # spikes attributed per phase (the worst); the rest only counted
CAPTURE_LIMIT_MB = 128  # per traced CPU written by the engine (later pages counted, not kept)
# a traced engine sets its instance up before its header: a board asked for a large
# buffer may take this long to allocate it (or refuse it) while it says nothing
TRACE_START_GRACE_S = 60.0
BOARD_LIMIT_MB = 32  # the same on a board, whose runs directory is often RAM
CLASSES = ("task", "irq", "softirq", "timer", "unexplained", "other", "untraced")
PROC_FILESYSTEMS = "/proc/filesystems"
TRACEFS_MOUNTPOINT = "/sys/kernel/tracing"


def check_available() -> None:
    """Before anything starts: tracefs is mounted here (the engine records into its own
    instance there; it never mounts tracefs itself). SkippedError (exit 4) with a one-line
    reason and the command that fixes it otherwise."""

    if TraceFS.find() is not None:
        return
    try:
        fs = Path(PROC_FILESYSTEMS).read_text()
    except OSError:
        fs = ""
    if not any(line.split()[-1:] == ["tracefs"] for line in fs.splitlines()):
        raise SkippedError("--trace: this kernel has no tracefs",
                           hint="a kernel with CONFIG_FTRACE and CONFIG_TRACING")
    raise SkippedError("--trace: tracefs is not mounted",
                       hint=f"mount it: mount -t tracefs nodev {TRACEFS_MOUNTPOINT}")


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
    """Recording of one phase by the measured probe's engine (`--trace-dir`, docs/tracing.md),
    on this machine or on a board: `engine_options()` for each engine process of the measured
    probe before it starts, `finish()` after it ended. On a board the capture and the samples
    are written there and fetched home at the end (`fetch_capture`)."""

    threshold_ns: int
    buffer_kb: int
    capture_dir: Path  # where the capture ends up on this machine (the runs directory)
    samples_path: Path  # this machine's copy of the samples
    target_runs: str | None = None  # a board's runs directory (None: this machine)
    parts: list[str] = field(default_factory=list)  # the engines' trace dirs, on the target
    started: float = 0.0
    kernel_split: bool = False  # also the kernel's timerlat view (rtlab.runner.kernel_split)
    writes_samples: bool = True  # False: a polling probe, whose gaps come in its output

    @property
    def remote(self) -> bool:
        return self.target_runs is not None

    def target_path(self, name: str) -> str:
        """A file of this phase where the target writes it."""
        if self.target_runs is None:
            return str(self.capture_dir.parent / name)
        return f"{self.target_runs}/{name}"

    def engine_options(self, part: int) -> dict[str, Any]:
        """The options that make one engine process of the measured probe record (part k of
        a probe split in parts: each records its own CPUs into its own directory)."""
        name = self.capture_dir.name + ("" if part == 0 else f".p{part + 1}")
        path = self.target_path(name)
        if path not in self.parts:
            self.parts.append(path)
        if not self.started:
            self.started = time.monotonic()
        return {"trace_dir": path, "trace_buffer_kb": self.buffer_kb,
                "trace_limit_mb": CAPTURE_LIMIT_MB if not self.remote else BOARD_LIMIT_MB,
                **(ksplit.engine_options() if self.kernel_split else {})}

    def close(self) -> None:
        """Nothing to stop: the engine records and cleans up its own instance."""

    def _collect(self, transport: Any) -> tuple[TraceCapture | None, list[str]]:
        """The phase's capture on this machine (fetched from a board, parts merged)."""
        notes: list[str] = []
        local: list[Path] = []
        for path in self.parts:
            name = path.rsplit("/", 1)[-1]
            dest = self.capture_dir.parent / name
            if self.remote:
                try:
                    fetch_capture(transport, path, dest)
                except RtlabError as exc:
                    notes.append(f"trace capture not fetched from {transport.target}: "
                                 f"{exc.message}")
                    continue
            if (dest / "meta.json").is_file():
                local.append(dest)
        if self.remote and self.target_runs is not None and self.writes_samples:
            try:
                fetch_file(transport, self.target_path(self.samples_path.name),
                           self.samples_path)
                remove_on_board(transport, self.target_path(self.samples_path.name))
            except RtlabError as exc:
                notes.append(f"samples not fetched from {transport.target}: {exc.message}")
        if not local:
            return None, notes
        cap = merge_captures([TraceCapture.load(d) for d in local])
        cap.symbols = (board_symbols(transport, notes) if self.remote else LocalSymbols())
        keep_capture(cap, local, self.capture_dir)
        return cap, notes

    def finish(self, header: dict[str, Any] | None, phase: str,
               gaps: Sequence[tuple[int, int, int]] | None = None, transport: Any = None
               ) -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any], list[str]]:
        """Collect the capture, attribute: (spikes, spike_summary, trace info, notes).
        `gaps`: (cpu, start, end) of a polling probe's gaps, attributed instead of samples."""

        elapsed = max(time.monotonic() - self.started, 1e-9) if self.started else 1e-9
        cap, notes = self._collect(transport)
        header = header or {}
        empty = {"threshold_ns": self.threshold_ns, "spikes": 0, "attributed": 0,
                 "stored": 0, "by_class": {}, "top_causes": {}}
        if cap is None:
            err = ((header.get("trace") or {}).get("error")
                   or "the engine wrote no trace capture")
            notes.append(f"tracing: {err}; spikes not attributed")
            return [], empty, {"threshold_ns": self.threshold_ns, "capture": None}, notes
        info = trace_info(cap, header, self.capture_dir.name,
                          virtualized=_virtualized(header, self.remote))
        info.update({
            "samples": (self.samples_path.name  # relative to the runs directory
                        if self.samples_path.parent == self.capture_dir.parent
                        else str(self.samples_path)),
            "threshold_ns": self.threshold_ns,
            "buffer_kb": self.buffer_kb,
            "target": transport.target if self.remote and transport is not None else None,
            "capture_bytes": sum(f.stat().st_size for f in self.capture_dir.rglob("*")
                                 if f.is_file()),
            "pages_per_s": round(info["pages"] / elapsed, 1),
        })
        notes += capture_notes(cap, BOARD_LIMIT_MB if self.remote else CAPTURE_LIMIT_MB)
        if self.kernel_split:
            info["kernel_split"] = ksplit.phase_split(cap, self.threshold_ns,
                                                      info["start_monotonic_ns"])
            notes += ksplit.notes_of(info["kernel_split"])
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
            return [], empty, info, notes
        t0 = time.monotonic()
        spikes, summary = attribute(cap, self.samples_path, info, self.threshold_ns, phase)
        info["attribution_s"] = round(time.monotonic() - t0, 3)
        if summary["attributed"] < summary["spikes"]:
            notes.append(f"tracing: {summary['spikes']} spikes, only the worst "
                         f"{summary['attributed']} attributed")
        return spikes, summary, info, notes


def capture_parts(capture_dir: Path) -> list[Path]:
    """The capture directories the engines of one phase wrote beside each other: `capture_dir`
    and the `.pN` parts of a probe split in parts (`PhaseTrace.engine_options`), in order."""
    parts = [capture_dir] if (capture_dir / "meta.json").is_file() else []
    more = {int(d.name[len(capture_dir.name) + 2:]): d
            for d in capture_dir.parent.glob(capture_dir.name + ".p*")
            if d.name[len(capture_dir.name) + 2:].isdigit() and (d / "meta.json").is_file()}
    return parts + [more[k] for k in sorted(more)]


def keep_capture(cap: TraceCapture, parts: Sequence[Path], capture_dir: Path) -> None:
    """Keep a phase's capture as the one directory `capture_dir`: the parts of a probe
    merged into it (the parts removed), or the one part's meta.json written again with the
    names of the kernel functions it holds."""
    if list(parts) != [capture_dir]:
        for d in parts:
            if d != capture_dir:
                shutil.rmtree(d, ignore_errors=True)
        shutil.rmtree(capture_dir, ignore_errors=True)
        cap.save(capture_dir)
    else:
        cap.save(capture_dir, pages=False)


def trace_info(cap: TraceCapture, header: dict[str, Any], capture_name: str, *,
               virtualized: bool | None) -> dict[str, Any]:
    """A phase's `trace` dict from its capture and the engine header (docs/results.md)."""
    rmeta = cap.meta
    threads = (header.get("effective") or {}).get("threads") or []
    lost = {c: lost_count(v) for c, v in cap.lost.items() if lost_count(v)}
    dropped = {int(k): int(v) for k, v in (rmeta.get("dropped_pages") or {}).items()}
    return {
        "capture": capture_name,
        "cpus": cap.cpus,
        "reader_cpus": sorted({int(c) for c in _reader_cpus(rmeta)}),
        "recorder": "engine",
        "mode": rmeta.get("mode") or "full",
        "start_monotonic_ns": header.get("start_monotonic_ns"),
        # samples channel index = position in the header's effective.threads
        "channel_cpus": [t.get("cpu") for t in threads],
        "channel_tids": [t.get("tid") for t in threads],
        "virtualized": virtualized,
        "events_missing": list(rmeta.get("events_missing") or []),
        "lost_events": {str(k): v for k, v in lost.items()},
        "evicted_pages": sum(dropped.values()),
        "pages": sum(len(p) for p in cap.pages.values()),
    }


def capture_notes(cap: TraceCapture, limit_mb: int) -> list[str]:
    """What a run's notes say about its capture: errors, an unfinished capture, lost
    events, pages not kept."""
    rmeta, notes = cap.meta, []
    lost = {c: lost_count(v) for c, v in cap.lost.items() if lost_count(v)}
    dropped = sum(int(v) for v in (rmeta.get("dropped_pages") or {}).values())
    if rmeta.get("error"):
        notes.append(f"tracing: {rmeta['error']}")
    if rmeta.get("complete") is False:
        notes.append("trace capture incomplete (the engine did not finish it): "
                     "spikes after its end are untraced")
    if lost:
        notes.append("trace lost events on "
                     + ", ".join(f"CPU{c}: {v}" for c, v in sorted(lost.items()))
                     + " (spikes there may be partly unexplained)")
    if rmeta.get("mode") == "flight":
        pass  # its pages not written belong to windows not kept: flight_notes says why
    elif dropped and rmeta.get("error"):  # a write failed (a full disk): not the bound
        notes.append(f"trace capture: {dropped} pages not kept after that error "
                     "(later spikes untraced)")
    elif dropped:
        notes.append(f"trace capture bounded at {limit_mb} MB per CPU: "
                     f"{dropped} pages not kept (later spikes untraced)")
    return notes


def flight_notes(cap: TraceCapture, windows: Sequence[dict[str, Any]]) -> list[str]:
    """What a flight recording says about the spikes it could not keep windows for (never
    silent): how many, and why (the rate cap, a full disk, the ring)."""
    fl = cap.meta.get("flight") or {}
    notes = capture_notes(cap, int(cap.meta.get("limit_mb") or CAPTURE_LIMIT_MB))
    why: dict[str, int] = {}
    spikes = lost = 0
    for w in windows:  # a line not kept also stands for the triggers merged into it
        n = 1 + int(w.get("merged", 0)) if not w.get("kept") else 1
        spikes += n
        if not w.get("kept"):
            key = str(w.get("why") or "unknown")
            why[key] = why.get(key, 0) + n
            lost += n
    if lost:
        words = {"rate": f"over the cap of {fl.get('rate_bytes_per_s')} bytes/s",
                 "disk": "the target's disk was full", "aged": "already out of the ring",
                 "merged": "merged into a window that was dropped"}
        parts = [f"{n} {words.get(k, k)}" for k, n in sorted(why.items(), key=lambda kv: -kv[1])]
        notes.append(f"flight recorder: {lost} of {spikes} spikes above the trigger "
                     f"not explained, their windows not kept ({', '.join(parts)})")
    partial = int(fl.get("windows_partial") or 0)
    if partial:
        notes.append(f"flight recorder: {partial} spike windows began before the kept ring "
                     "(partly traced)")
    if int(fl.get("triggers_lost") or 0) or int(fl.get("lines_lost") or 0):
        notes.append(f"flight recorder: {fl.get('triggers_lost', 0)} triggers and "
                     f"{fl.get('lines_lost', 0)} window lines lost on the target")
    return notes


def attribute_windows(capture: Any, windows: Sequence[dict[str, Any]], info: dict[str, Any],
                      threshold_ns: int, phase: str
                      ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Attribute the spikes a flight recording kept windows for (its windows.jsonl lines);
    the spikes whose window was dropped are counted in the summary, not explained."""
    start = int(info.get("start_monotonic_ns") or 0)
    tids = info.get("channel_tids") or []
    kept, dropped = [], 0
    for w in windows:
        if not w.get("kept"):  # its line stands for itself and the triggers merged into it
            if max(int(w.get("value_ns", 0)), int(w.get("worst_ns", 0))) > threshold_ns:
                dropped += 1 + int(w.get("merged", 0))
            continue
        if int(w.get("value_ns", 0)) <= threshold_ns:
            continue
        ch = w.get("channel")
        tid = tids[ch] if isinstance(ch, int) and 0 <= ch < len(tids) else None
        kept.append(Spike(int(w["cpu"]), int(w["deadline_ns"]), int(w["wake_ns"]), tid,
                          source="flight"))
    total = len(kept) + dropped
    if len(kept) > MAX_ATTRIBUTED:
        kept = sorted(kept, key=lambda sp: -sp.latency_ns)[:MAX_ATTRIBUTED]
    causes = attribute_run(capture, kept, start, threshold_ns=threshold_ns,
                           virtualized=info.get("virtualized"))
    spikes, summary = build_records(causes, start, phase, threshold_ns, total=total)
    summary["not_kept"] = dropped
    return spikes, summary


def lost_count(counters: Any) -> int:
    """Events the kernel lost on one CPU, from its counters (overrun + dropped)."""
    if isinstance(counters, int):
        return counters
    if not isinstance(counters, dict):
        return 0
    return sum(int(v) for k, v in counters.items()
               if isinstance(v, int) and ("overrun" in k or "dropped" in k)
               and "commit" not in k)


def _reader_cpus(meta: dict[str, Any]) -> list[int]:
    c = meta.get("reader_cpu")
    if isinstance(c, list):
        return [int(x) for x in c if x is not None]
    return [] if c is None else [int(c)]


def _virtualized(header: dict[str, Any], remote: bool) -> bool | None:
    """Whether the traced machine is a VM (only the wording of "unexplained")."""
    if not remote:
        return is_virtualized()
    virt = header.get("virtualization") or (header.get("system") or {}).get("virtualization")
    return bool(virt) if virt is not None else None


def merge_captures(caps: Sequence[TraceCapture]) -> TraceCapture:
    """One capture from the parts of a probe (each its own CPUs, the same kernel)."""
    if len(caps) == 1:
        return caps[0]
    first = caps[0]
    pages: dict[int, list[bytes]] = {}
    lost: dict[int, dict[str, int]] = {}
    meta = dict(first.meta)
    dropped: dict[str, int] = {}
    missing: list[str] = []
    for cap in caps:
        pages.update(cap.pages)
        lost.update(cap.lost)
        for k, v in (cap.meta.get("dropped_pages") or {}).items():
            dropped[str(k)] = dropped.get(str(k), 0) + int(v)
        missing += [e for e in cap.meta.get("events_missing") or [] if e not in missing]
        if cap.meta.get("complete") is False:
            meta["complete"] = False
        if cap.meta.get("error") and not meta.get("error"):
            meta["error"] = cap.meta["error"]
    meta["dropped_pages"] = dropped
    meta["events_missing"] = missing
    meta["reader_cpu"] = sorted({c for cap in caps for c in _reader_cpus(cap.meta)})
    return TraceCapture(first.formats, pages, clock=first.clock, lost=lost, meta=meta,
                        symbols=first.symbols)


KALLSYMS_LIMIT = 64 << 20


def board_symbols(transport: Any, notes: list[str]) -> dict[int, str]:
    """The board's kernel text symbols (its /proc/kallsyms, read once per connection)."""
    cached = getattr(transport, "_rtlab_kallsyms", None)
    if cached is not None:
        return dict(cached)
    table: dict[int, str] = {}
    try:
        recs = snapshot(transport, [KALLSYMS], timeout_s=300.0, max_file=KALLSYMS_LIMIT,
                        max_total=KALLSYMS_LIMIT)
        for rec in recs:
            if rec.get("type") == "file":
                table = parse_kallsyms(record_bytes(rec).decode("utf-8", "replace")
                                       .splitlines())
    except RtlabError as exc:
        notes.append(f"kernel symbols of {transport.target} not read ({exc.message}): "
                     "timer callbacks are shown as addresses")
    with suppress(AttributeError):
        transport._rtlab_kallsyms = table
    return dict(table)


def fetch_file(transport: Any, path: str, dest: Path, limit: int = 1 << 30) -> None:
    """Copy one file of a board home (bounded by `limit` bytes)."""
    recs = snapshot(transport, [path], timeout_s=600.0, max_file=limit, max_total=limit)
    for rec in recs:
        if rec.get("type") == "error":
            raise RtlabError(f"{path}: {rec.get('error')}")
        if rec.get("type") == "file":
            if rec.get("truncated"):
                raise RtlabError(f"{path}: larger than {limit} bytes")
            dest.write_bytes(record_bytes(rec))


def fetch_capture(transport: Any, path: str, dest: Path, remove: bool = True) -> None:
    """Copy a capture directory a board's engine wrote home, then remove it there (the
    board's runs directory is often RAM; `remove=False`: left for the caller to remove).
    Bounded by the capture limit per CPU."""
    limit = (BOARD_LIMIT_MB + 1) << 20
    recs = snapshot(transport, [f"{path}/meta.json", f"{path}/*.pages", f"{path}/*.jsonl",
                                f"{path}/formats/*"],
                    timeout_s=600.0, max_file=limit, max_total=64 * limit)
    errors = [r for r in recs if r.get("type") == "error"]
    if errors:
        raise RtlabError(f"cannot read {errors[0].get('path')}: {errors[0].get('error')}")
    files = [r for r in recs if r.get("type") == "file"]
    if not any(str(r.get("path", "")).endswith("/meta.json") for r in files):
        raise RtlabError(f"no capture in {path}")
    tmp = dest.with_name(dest.name + ".part")
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "formats").mkdir(parents=True)
    for rec in files:
        rel = str(rec["path"])[len(path) + 1:]
        if rel.count("/") > 1 or ".." in rel.split("/"):
            continue
        (tmp / rel).write_bytes(record_bytes(rec))
    shutil.rmtree(dest, ignore_errors=True)
    tmp.rename(dest)
    if remove:
        remove_on_board(transport, path)


def remove_on_board(transport: Any, path: str) -> None:
    """Remove what was fetched home from the board's runs directory (often RAM there);
    a failure leaves it for `rtlab board clean`."""
    with suppress(RtlabError, OSError):
        transport.run_command(["rm", "-rf", path], timeout_s=60.0,
                              what="removing a fetched trace file")


def phase_trace(spec: Any, runs_dir: Path, run_id: str, index: int, phase: str,
                target_runs: str | None = None) -> PhaseTrace:
    stem = f"{run_id}.{index + 1}-{phase}"
    runs_dir.mkdir(parents=True, exist_ok=True)
    return PhaseTrace(threshold_ns=spec.threshold_ns, buffer_kb=spec.buffer_kb,
                      capture_dir=runs_dir / f"{stem}.trace",
                      samples_path=runs_dir / f"{stem}.samples", target_runs=target_runs,
                      kernel_split=spec.kernel_split)
