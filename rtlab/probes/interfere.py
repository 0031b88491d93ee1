# SPDX-License-Identifier: MIT
"""Host arithmetic of `rtlab-probe interfere`: the Amdahl fit, pair ratios, sharing costs.

Amdahl's law: S(N) = 1 / ((1 - p) + p / N). The probe reports raw execution
times per CPU count; the speed-up of N CPUs is median(T1) / median(TN) (medians
because a noisy machine adds one-sided outliers), and p is fitted to the
speed-ups by least squares on S (a bounded 1-D minimisation started from the
exact linear solution of 1/S = 1 - p (1 - 1/N)).

A fit is only shown when it is physically possible: 0 <= p <= 1 (within
P_TOLERANCE) and no speed-up above N. Outside that, the job got slower with more
CPUs (other work ran on the CPUs added) or faster than N CPUs can make it (the
1-CPU runs were slowed, or the working set fits the caches of N CPUs but not of
one): Amdahl's law does not describe that run, so no fit is printed and
`AmdahlSummary.note()` says why.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rtlab.cpulist import format_cpulist
from rtlab.probes.context import probe_cpus, what_ran
from rtlab.probes.description import Phase, ProbeInfo, RunResult
from rtlab.results.histogram import LogLinHistogram
from rtlab.results.shape import ResultShape
from rtlab.results.summary import percentile

P_MIN, P_MAX = -1.0, 1.0  # the search interval of the fit
P_TOLERANCE = 0.02  # a parallel fraction in [-0.02, 1.02] counts as within [0, 1]


def amdahl_speedup(p: float, n: float) -> float:
    return 1.0 / ((1.0 - p) + p / n)


def _sse(p: float, points: Sequence[tuple[int, float]]) -> float:
    return sum((s - amdahl_speedup(p, n)) ** 2 for n, s in points)


def fit_amdahl(points: Sequence[tuple[int, float]]) -> float:
    """Parallel fraction p minimising sum (S_i - S(N_i; p))^2 over (N_i, S_i) points.

    Needs at least one point with N > 1. p is searched in [-1, 1] (p < 0 means
    adding CPUs slows the job down, which a noisy or oversubscribed machine can show;
    such a p is no Amdahl fit, see `AmdahlSummary.problem`).
    """
    pts = [(int(n), float(s)) for n, s in points if n >= 1 and s > 0]
    xs = [(1.0 - 1.0 / n, 1.0 - 1.0 / s) for n, s in pts if n > 1]
    if not xs:
        raise ValueError("the Amdahl fit needs a speed-up for at least one N > 1")
    den = sum(x * x for x, _ in xs)
    p0 = max(P_MIN, min(P_MAX, sum(x * y for x, y in xs) / den))
    # golden-section search around the linear solution, on the S residuals
    lo, hi = max(P_MIN, p0 - 0.5), min(P_MAX, p0 + 0.5)
    g = (5 ** 0.5 - 1) / 2
    a, b = hi - g * (hi - lo), lo + g * (hi - lo)
    fa, fb = _sse(a, pts), _sse(b, pts)
    for _ in range(200):
        if fa < fb:
            hi, b, fb = b, a, fa
            a = hi - g * (hi - lo)
            fa = _sse(a, pts)
        else:
            lo, a, fa = a, b, fb
            b = lo + g * (hi - lo)
            fb = _sse(b, pts)
        if hi - lo < 1e-12:
            break
    p = (lo + hi) / 2
    return p if _sse(p, pts) <= _sse(p0, pts) else p0


@dataclass(frozen=True)
class AmdahlRow:
    n: int
    runs: int
    median_ns: float
    min_ns: int
    max_ns: int
    jitter_ns: int  # max - min of the runs
    speedup: float


@dataclass(frozen=True)
class AmdahlSummary:
    rows: list[AmdahlRow]
    p_fit: float  # the least-squares p in [-1, 1], physically possible or not
    serial_injected: float | None  # from the probe's config
    cpus: tuple[int, ...] = ()  # the probe's --cpus: N CPUs are the first N of them

    @property
    def serial_fit(self) -> float:
        return 1.0 - self.p_fit

    @property
    def parallel(self) -> float:
        """p_fit clamped to [0, 1]: what is shown when the fit is within the tolerance."""
        return min(1.0, max(0.0, self.p_fit))

    @property
    def superlinear(self) -> bool:
        """Some speed-up above N (beyond the tolerance)."""
        return any(r.speedup > r.n * (1 + P_TOLERANCE) for r in self.rows)

    @property
    def fitted(self) -> bool:
        """True when the fit is within Amdahl's physical bounds (and may be shown)."""
        return self.problem is None

    @property
    def problem(self) -> str | None:
        """Why p_fit is no Amdahl fit (one clause), or None when 0 <= p <= 1 and no
        speed-up exceeds N (within P_TOLERANCE)."""
        if -P_TOLERANCE <= self.p_fit <= 1 + P_TOLERANCE and not self.superlinear:
            return None
        if self.superlinear:
            above = [r for r in self.rows if r.speedup > r.n * (1 + P_TOLERANCE)]
            return (f"speed-up above N ({_speedups(above)}): the 1-CPU runs were slowed, or "
                    "the working set fits the caches of N CPUs but not of one")
        at_bound = self.p_fit <= P_MIN + 1e-9  # the true least-squares p is lower still
        p = f"{'≤ ' if at_bound else ''}{self.p_fit:.3f}"
        return (f"the fitted parallel fraction {p} is outside [0, 1]: the job got slower "
                f"with more CPUs ({_speedups(self.rows[1:])})")

    def busy_cpus(self) -> list[int]:
        """The CPUs that most likely ran other work: each CPU whose addition made the job
        slower than with one CPU fewer; for a speed-up above N, the first CPU (its
        1-CPU runs are the baseline). Empty without the probe's CPU list."""
        if not self.cpus:
            return []
        if self.superlinear:
            return [self.cpus[0]]
        out, before = [], 1.0
        for r in self.rows:
            if r.n > 1 and r.n <= len(self.cpus) and r.speedup < before * (1 - P_TOLERANCE):
                out.append(self.cpus[r.n - 1])
            before = r.speedup
        return out

    def note(self, evidence: Sequence[str] = ()) -> str | None:
        """The explanation shown instead of the fit (None when the fit is shown):
        what is wrong, which CPUs were not quiet and, from `evidence` (what the result
        recorded about those CPUs), what ran there."""
        problem = self.problem
        if problem is None:
            return None
        busy = self.busy_cpus()
        who = (f"CPU{'s' if len(busy) > 1 else ''} {format_cpulist(busy)}" if busy
               else "the CPUs")
        verb = ("may not have been" if self.superlinear
                else "was not" if len(busy) == 1 else "were not")
        quiet = f"{who} {verb} quiet"
        seen = "; ".join(evidence) if evidence else (
            "the result does not record what else ran there")
        return (f"no Amdahl fit: {problem}; {quiet}: {seen}. Measure on shielded CPUs or "
                "with --policy fifo")


def _speedups(rows: Sequence[AmdahlRow]) -> str:
    return ", ".join(f"{r.n} CPUs {r.speedup:.2f}x" for r in rows)


def _result(records: Sequence[Mapping[str, Any]], mode: str) -> Mapping[str, Any]:
    res = next((r for r in reversed(records) if r.get("type") == "result"), None)
    if res is None or res.get("interfere", {}).get("mode") != mode:
        raise ValueError(f"no result record of interfere --mode {mode}")
    return res["interfere"]


def amdahl_from_times(times: Mapping[int, Sequence[int]]) -> tuple[list[AmdahlRow], float]:
    t1 = statistics.median(times[1])
    rows = []
    for n in sorted(times):
        v = times[n]
        if not v:
            continue
        med = statistics.median(v)
        rows.append(AmdahlRow(n=n, runs=len(v), median_ns=med, min_ns=min(v), max_ns=max(v),
                              jitter_ns=max(v) - min(v), speedup=t1 / med))
    return rows, fit_amdahl([(r.n, r.speedup) for r in rows])


def summarize_amdahl(records: Sequence[Mapping[str, Any]],
                     cpus: Sequence[int] | None = None) -> AmdahlSummary:
    """The fit of an amdahl run; `cpus`: the probe's CPU list (default: the header's)."""
    x = _result(records, "amdahl")
    times = {int(r["n"]): [int(v) for v in r["ns"]] for r in x["runs"]}
    rows, p = amdahl_from_times(times)
    if cpus is None:
        header = next((r for r in records if r.get("type") == "header"), {})
        cpus = (header.get("config") or {}).get("cpus") or ()
    return AmdahlSummary(rows=rows, p_fit=p, serial_injected=x["serial_permille"] / 1000,
                         cpus=tuple(int(c) for c in cpus))


@dataclass(frozen=True)
class PairRow:
    workload: str
    pair_class: str
    cpu_b: int | None
    median_ns: float
    ratio: float  # median paired / median solo (1.0 for solo)


def summarize_pairs(records: Sequence[Mapping[str, Any]]) -> tuple[list[PairRow], list[str]]:
    """Interference ratio per workload and pair class; also the classes missing here."""
    x = _result(records, "pairs")
    solo = {r["workload"]: statistics.median(r["ns"]) for r in x["runs"]
            if r["class"] == "solo" and r["ns"]}
    rows = []
    for r in x["runs"]:
        if not r["ns"] or r["workload"] not in solo:
            continue
        med = statistics.median(r["ns"])
        rows.append(PairRow(workload=r["workload"], pair_class=r["class"], cpu_b=r["cpu_b"],
                            median_ns=med, ratio=med / solo[r["workload"]]))
    return rows, list(x.get("classes_missing", []))


@dataclass(frozen=True)
class SharingRow:
    variant: str  # shared | percpu | false
    threads: int
    median_ns_per_op: float | None  # None: too few batches for the percentile
    p99_ns_per_op: float | None
    max_ns_per_op: float


def summarize_sharing(records: Sequence[Mapping[str, Any]]) -> list[SharingRow]:
    """Cost per operation (median, p99, max over batches and threads) per variant and N."""
    x = _result(records, "sharing")
    batch = int(x["batch"])
    res = next(r for r in reversed(records) if r.get("type") == "result")
    chans = {c["name"]: c for c in res["channels"]}
    rows = []
    for r in x["runs"]:
        cs = [chans[n] for n in r["channels"] if chans[n]["samples"]]
        if not cs:
            continue
        hist = LogLinHistogram()
        for c in cs:
            hist = hist.merge(LogLinHistogram.from_json(c["hist"]))
        lo, hi = min(c["min_ns"] for c in cs), max(c["max_ns"] for c in cs)

        def per_op(p: float, hist: LogLinHistogram = hist, lo: int = lo, hi: int = hi
                   ) -> float | None:
            v = percentile(hist, p, lo, hi)  # the project's rule (docs/usage.md)
            return None if v is None else v / batch

        rows.append(SharingRow(
            variant=r["variant"], threads=int(r["threads"]),
            median_ns_per_op=per_op(50.0), p99_ns_per_op=per_op(99.0),
            max_ns_per_op=hi / batch,
        ))
    return rows


def _interfere_record(phase: Phase) -> dict[str, Any]:
    """The engine's final record of an interfere phase, rebuilt from the stored phase."""
    x = (phase.extras or {}).get("interfere") or {}
    record: dict[str, Any] = {"type": "result", "interfere": x,
                              "channels": [c.to_dict() for c in phase.channels]}
    for c in record["channels"]:
        c["max_ns"] = c.get("max_ns") or 0
    return record


def _amdahl_note(result: RunResult, phase: Phase) -> str | None:
    """Why an amdahl phase gets no fit (None: it gets one), naming what the result
    recorded on the CPUs that were not quiet."""
    if ((phase.extras or {}).get("interfere") or {}).get("mode") != "amdahl":
        return None
    try:
        a = summarize_amdahl([_interfere_record(phase)], probe_cpus(result))
    except (KeyError, ValueError, TypeError, ZeroDivisionError):
        return None  # the summary line says that it is unavailable
    return a.note(what_ran(result, phase, a.busy_cpus() or list(a.cpus)))


def phase_lines(result: RunResult, phase: Phase) -> list[str]:
    mode = ((phase.extras or {}).get("interfere") or {}).get("mode")
    record = _interfere_record(phase)
    try:
        if mode == "amdahl":
            a = summarize_amdahl([record], probe_cpus(result))
            speed = ", ".join(f"{r.n}: {r.speedup:.2f}x" for r in a.rows)
            inj = (f" (injected serial {a.serial_injected:.3f})"
                   if a.serial_injected is not None else "")
            if not a.fitted:  # a p outside [0, 1] is no fit: say why instead
                return [f"speed-up by CPUs {speed}{inj}", str(_amdahl_note(result, phase))]
            return [f"Amdahl fit: parallel fraction {a.parallel:.3f}, serial "
                    f"{1 - a.parallel:.3f}{inj}; speed-up by CPUs {speed}"]
        if mode == "pairs":
            rows, missing = summarize_pairs([record])
            txt = "; ".join(f"{r.workload} {r.pair_class} {r.ratio:.2f}x" for r in rows
                            if r.pair_class != "solo")
            more = f" (not on this machine: {', '.join(missing)})" if missing else ""
            return [f"interference ratio (paired/solo median): {txt or 'n/a'}{more}"]
        if mode == "sharing":
            rows2 = summarize_sharing([record])
            return ["sharing cost per op (median/p99): " + "; ".join(
                f"{r.variant}x{r.threads} {_ns(r.median_ns_per_op)}/{_ns(r.p99_ns_per_op)} ns"
                for r in rows2)]
    except (KeyError, ValueError, TypeError, ZeroDivisionError) as exc:
        return [f"interfere summary unavailable: {exc}"]
    return []


def notes(result: RunResult) -> list[str]:
    """An amdahl phase whose Amdahl fit is outside its physical bounds says why no fit is
    given (kept in the result's notes by the runner and the importer)."""
    many = len(result.phases) > 1
    out = []
    for phase in result.phases:
        note = _amdahl_note(result, phase)
        if note is not None:
            out.append(f"phase {phase.name}: {note}" if many else note)
    return out


def _ns(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.1f}"


INFO = ProbeInfo("interfere", ResultShape(measures="run time"), phase_lines=phase_lines,
                 notes=notes)
