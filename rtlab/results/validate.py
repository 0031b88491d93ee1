# SPDX-License-Identifier: MIT
"""Is a result consistent with itself? Checked before anything is stored or believed.

A result's numbers come from an engine on a board, from a raw file someone kept, or
from a peer tool's output; any of them can be damaged (a cut file, a hand edit, a
bug). A result whose numbers contradict each other would give a wrong SLO verdict
or headline without any sign of it, so every result is checked here first
(docs/results.md#validation):

* every count and sum is a non-negative integer that fits the store (int64);
* a channel's `samples` equal its histogram's total (importers place a peer's
  overflows in the histogram, at the reported max, so the total includes them);
* with samples, min and max are known, min <= max, the lowest populated bucket holds
  min and the highest holds max (so every populated bucket lies within [min, max]);
  a peer's import carries the peer's resolution (its counts sit at the lower edge of
  its buckets: `provenance.imported.resolution_ns`), so there min and max may lie up
  to that much above their bucket;
  without samples, there is no min, max, sum or bucket;
* the mean lies within [min, max] (min * samples <= sum <= max * samples);
* every window maximum lies within [min, max], the windows count no more samples
  than the channel, and when they count all of them their largest maximum is the
  channel's max; per-window histograms (when recorded) count no more than the
  channel and, window by window, what the window maxima count;
* phase names are unique in a run, channel names unique in a phase.

`problems(result)` lists what is wrong (empty: consistent), each naming its phase and
channel. Imports refuse a result with problems (`ensure_valid`); a live run keeps it
with status `invalid` (runner.outcome.classify), and no verdict is computed from it
(analysis.slo, report).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rtlab.errors import UsageError

if TYPE_CHECKING:  # pragma: no cover
    from rtlab.results.model import Channel, Phase, RunResult
    from rtlab.results.shape import ResultShape

INT64_MAX = (1 << 63) - 1


def problems(result: RunResult) -> list[str]:
    """Every inconsistency of `result`, one line each ("phase P, channel C: what")."""
    out: list[str] = []
    seen_phases: set[str] = set()
    for phase in result.phases:
        if phase.name in seen_phases:
            out.append(f"phase {phase.name}: the phase name appears twice")
        seen_phases.add(phase.name)
        out += _phase_problems(phase, _resolution(result))
    return out


def _resolution(result: RunResult) -> int:
    """How far above its histogram bucket a peer's exact min/max may lie (0: rtlab's own
    histograms are exact)."""
    imported = result.provenance.get("imported") if isinstance(result.provenance, dict) else None
    value = imported.get("resolution_ns") if isinstance(imported, dict) else None
    return value if isinstance(value, int) and value > 0 else 0


def first_problem(result: RunResult) -> str | None:
    """The first inconsistency, or None when the result is consistent."""
    found = problems(result)
    return found[0] if found else None


def failed_validation(result: RunResult, subject: str, when_stored: str) -> str | None:
    """Why no verdict may rest on `result` ("<subject> failed validation (<its first
    problem>)", or "<subject> failed validation <when_stored>" for a result stored as
    `invalid`), None when it may be believed. Checked when read too, not only when
    stored: a store written before validation existed may hold such a result."""
    found = first_problem(result)
    if found is not None:
        return f"{subject} failed validation ({found})"
    if result.status == "invalid":
        return f"{subject} failed validation {when_stored}"
    return None


def ensure_valid(result: RunResult, source: str) -> None:
    """Refuse (UsageError, exit 2) a result read from `source` (a file name, with the
    record when known) that contradicts itself; nothing is stored."""
    found = problems(result)
    if found:
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        raise UsageError(f"{source}: inconsistent result, not stored: {found[0]}{more}",
                         hint="the file is damaged or was edited; import an intact copy")


def nothing_measured(result: RunResult, shape: ResultShape) -> str | None:
    """Why a phase of `result` measured nothing (a note), or None; `shape`: its probe's
    (rtlab.probes.registry.shape). A phase whose headline channels hold no sample
    measured nothing, whatever the engine called it (e.g. `udp` with every round trip
    lost); for an event-counting probe (`ResultShape.work_counter`) it is a phase whose
    measuring threads did no work."""
    for phase in result.phases:
        if shape.work_counter is not None:  # a quiet CPU gives it no sample at all
            why = _no_work(result.probe, shape.work_counter, phase)
        elif phase.channels and not any(c.samples for c in phase.headline(shape)):
            names = ", ".join(c.name for c in phase.headline(shape))
            why = f"measured nothing: no sample on {names}" + (
                shape.why_nothing(phase) if shape.why_nothing is not None else "")
        elif not phase.channels:
            why = "measured nothing: the engine reported no channel"
        else:
            continue
        if why is not None:
            return (f"phase {phase.name}: {why}" if len(result.phases) > 1 else why)
    return None


def _no_work(probe: str, key: str, phase: Phase) -> str | None:
    """None when some thread of an event-counting probe counted any of its work `key`
    (its channels may rightly hold no sample)."""
    per_channel = ((phase.extras or {}).get(probe) or {}).get("channels") or []
    done = [c.get(key) for c in per_channel if isinstance(c, dict)]
    if done and not any(isinstance(n, int) and n > 0 for n in done):
        return f"measured nothing: no {probe} thread counted any {key}"
    return None


def _phase_problems(phase: Phase, resolution: int = 0) -> list[str]:
    out: list[str] = []
    if phase.elapsed_ns is not None and not _count_ok(phase.elapsed_ns):
        out.append(f"phase {phase.name}: elapsed_ns {phase.elapsed_ns} is out of range")
    names: set[str] = set()
    for ch in phase.channels:
        where = f"phase {phase.name}, channel {ch.name}"
        if ch.name in names:
            out.append(f"{where}: the channel name appears twice in the phase")
        names.add(ch.name)
        out += [f"{where}: {p}" for p in channel_problems(ch, resolution)]
    return out


def channel_problems(ch: Channel, resolution: int = 0) -> list[str]:
    """The inconsistencies of one channel (without its name); `resolution`: how far above
    their buckets a peer's exact min and max may lie."""
    bad = _range_problems(ch)
    if bad:  # the rest compares numbers that are not even well-formed
        return bad
    total = ch.hist.total
    if total > INT64_MAX:
        return [f"histogram total {total} is out of range"]
    if ch.samples != total:
        return [f"samples {ch.samples:,} but the histogram holds {total:,}"]
    if ch.samples == 0:
        return _empty_problems(ch)
    return (_extreme_problems(ch, resolution)
            or _mean_problems(ch) + _window_problems(ch) + _window_hist_problems(ch))


def _count_ok(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= INT64_MAX


def _range_problems(ch: Channel) -> list[str]:
    out = []
    for key in ("samples", "missed", "sum_ns", "windows_lost", "ring_lost"):
        value = getattr(ch, key)
        if not _count_ok(value):
            out.append(f"{key} {value} is out of range (0 .. 2^63-1)")
    for key in ("min_ns", "max_ns", "max_at_ns", "window_ns"):
        value = getattr(ch, key)
        if value is not None and not _count_ok(value):
            out.append(f"{key} {value} is out of range (0 .. 2^63-1)")
    return out


def _empty_problems(ch: Channel) -> list[str]:
    kept = [k for k in ("min_ns", "max_ns") if getattr(ch, k) is not None]
    if ch.sum_ns:
        kept.append("sum_ns")
    return [f"no samples but {', '.join(kept)} set"] if kept else []


def _extreme_problems(ch: Channel, resolution: int) -> list[str]:
    if ch.min_ns is None or ch.max_ns is None:
        return [f"{ch.samples:,} samples but no min or max"]
    if ch.min_ns > ch.max_ns:
        return [f"min {ch.min_ns} ns is above max {ch.max_ns} ns"]
    buckets = list(ch.hist.buckets())
    low, high = buckets[0], buckets[-1]
    if not low.lo <= ch.min_ns <= low.hi + resolution:
        return [f"min {ch.min_ns} ns but the lowest histogram bucket holds "
                f"{_span(low.lo, low.hi)}"]
    if not high.lo <= ch.max_ns <= high.hi + resolution:
        return [f"max {ch.max_ns} ns but the highest histogram bucket holds "
                f"{_span(high.lo, high.hi)}"]
    return []


def _span(lo: int, hi: int) -> str:
    return f"{lo} ns" if lo == hi else f"{lo}..{hi} ns"


def _mean_problems(ch: Channel) -> list[str]:
    assert ch.min_ns is not None and ch.max_ns is not None
    if not ch.min_ns * ch.samples <= ch.sum_ns <= ch.max_ns * ch.samples:
        mean = ch.sum_ns / ch.samples
        return [f"mean {mean:.6g} ns (sum_ns {ch.sum_ns} / {ch.samples} samples) is outside "
                f"[min {ch.min_ns}, max {ch.max_ns}] ns"]
    return []


def _window_hist_problems(ch: Channel) -> list[str]:
    """The per-window histograms (engine `window_hist`) agree with the channel and with
    the window maxima of the same windows."""
    import numpy as np

    wh = getattr(ch, "window_hist", None)
    if wh is None or not len(wh):
        return []
    if (len(wh.count) and int(wh.count.min()) < 0) or int(wh.sum_ns.min()) < 0:
        return ["a per-window histogram holds a negative count or sum"]
    per_window = np.add.reduceat(wh.count, wh.ptr[:-1]) if len(wh.count) else None
    if per_window is not None:  # reduceat gives a neighbour's count for an empty window
        per_window = np.where(np.diff(wh.ptr) > 0, per_window, 0)
    total = int(per_window.sum()) if per_window is not None else 0
    if total > ch.samples or int(wh.sum_ns.sum()) > ch.sum_ns:
        return [f"the per-window histograms count {total:,} samples (sum "
                f"{int(wh.sum_ns.sum())} ns), more than the channel's {ch.samples:,} "
                f"(sum {ch.sum_ns} ns)"]
    w = ch.windows
    if per_window is not None and len(w):
        common, in_h, in_w = np.intersect1d(wh.index, w.index, return_indices=True)
        differ = per_window[in_h] != w.samples.astype("int64")[in_w]
        if np.any(differ):
            k = int(common[np.argmax(differ)])
            return [f"window {k}: its histogram and its maximum count different samples"]
    return []


def _window_problems(ch: Channel) -> list[str]:
    w = ch.windows
    if not len(w):
        return []
    assert ch.min_ns is not None and ch.max_ns is not None
    counted = w.samples.astype("int64")
    if int(counted.min()) < 0:
        return ["a window counts a negative number of samples"]
    maxima = w.max_ns[counted > 0]
    if len(maxima) and (int(maxima.min()) < ch.min_ns or int(maxima.max()) > ch.max_ns):
        return [f"window maxima span {int(maxima.min())}..{int(maxima.max())} ns, outside "
                f"[min {ch.min_ns}, max {ch.max_ns}] ns"]
    in_windows = int(counted.sum())
    if in_windows > ch.samples:
        return [f"the windows count {in_windows:,} samples, the channel {ch.samples:,}"]
    if in_windows == ch.samples and len(maxima) and int(maxima.max()) != ch.max_ns:
        return [f"the windows hold every sample but their largest maximum is "
                f"{int(maxima.max())} ns, not max {ch.max_ns} ns"]
    return []


__all__ = ["INT64_MAX", "channel_problems", "ensure_valid", "failed_validation", "first_problem",
           "nothing_measured", "problems"]
