# SPDX-License-Identifier: MIT
"""Service-level objectives (SLO gates) on latency results.

Grammar (case-insensitive, spaces optional around operators)::

    slo     := clause ("and" clause)*
    clause  := metric op value
    metric  := min | avg | mode | max | p<NN>[.<N>...] | missed
    op      := < | <= | > | >=
    value   := number unit         (unit: ns, us, µs, ms, s) for latency metrics
             | integer             for `missed` (a count of missed periods)

Example: ``max < 50us and p99.99 < 20us and missed <= 0``.

An expression that no run can meet (``max > 50us and max < 10us``, ``p99 > 20us and
p99.9 < 10us``: p99 <= p99.9 always; ``max < 0ns``) is refused when parsed, as a usage
error naming the two clauses (`never_met`).

Every clause is checked on every channel of every phase of a result. A result
whose numbers failed validation (rtlab.results.validate) is not checked at all: every
clause fails on it with that reason.

Each check has one of three outcomes (`Outcome.status`): ``met``, ``violated`` or
``undecided``. `min`, `avg`, `mode`, `max` and `missed` are observed facts of the
run and are met or violated. A percentile clause is about the *true* percentile of
the process the run sampled, which the run only estimates: it is decided on the
distribution-free 95 % confidence interval of that percentile
(`rtlab.analysis.stats.percentile_intervals`, widened when the per-window maxima
show clustered tails): met only when the whole interval meets the bound, violated
only when the whole interval violates it, otherwise undecided ("the run is too short
to decide", with roughly how many samples and how long it would take). A gate is
passed only when every check is met: undecided is never reported as met, and maps
to the same exit code as a violation (3) with its own summary line (docs/report.md).
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Any

from rtlab.analysis.configs import beyond_range
from rtlab.analysis.stats import PercentileInterval, channel_intervals, samples_to_bound
from rtlab.errors import UsageError
from rtlab.results.model import RunResult
from rtlab.results.shape import ShapeOf
from rtlab.results.summary import ChannelSummary
from rtlab.results.validate import failed_validation
from rtlab.textfmt import duration, shown

if TYPE_CHECKING:  # pragma: no cover
    from rtlab.results.model import Channel, RunResult

_UNITS = {"ns": 1, "us": 1_000, "µs": 1_000, "μs": 1_000, "ms": 1_000_000, "s": 1_000_000_000}
_OPS: dict[str, Callable[[float, float], bool]] = {
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
}
_CLAUSE_RE = re.compile(
    r"^\s*(?P<metric>[A-Za-z][A-Za-z0-9.]*)\s*(?P<op><=|>=|<|>)\s*"
    r"(?P<num>[0-9]+(?:\.[0-9]+)?)\s*(?P<unit>[A-Za-zµμ]*)\s*$"
)
_PCT_RE = re.compile(r"^p([0-9]{1,2}(?:\.[0-9]+)?|100)$")
_SPLIT_RE = re.compile(r"\s+and\s+", re.IGNORECASE)
GRAMMAR_HINT = ("e.g. \"max < 50us and p99.99 < 20us\"; metrics min, avg, mode, max, pNN[.N], "
                "missed; units ns, us, ms, s; operators < <= > >=; clauses joined by `and`")


@dataclass(frozen=True)
class Clause:
    """One comparison: `metric op bound` (bound in ns, or a count for `missed`)."""

    metric: str  # "min", "avg", "mode", "max", "missed" or "p99.99"
    op: str
    bound: int
    text: str

    @property
    def percentile(self) -> float | None:
        return float(self.metric[1:]) if self.metric.startswith("p") else None

    @property
    def is_count(self) -> bool:
        return self.metric == "missed"

    def holds(self, value: float) -> bool:
        return _OPS[self.op](value, self.bound)


@dataclass(frozen=True)
class Slo:
    clauses: tuple[Clause, ...]
    text: str

    def __str__(self) -> str:
        return " and ".join(c.text for c in self.clauses)


def parse_slo(text: str, option: str | None = None) -> Slo:
    """Parse an SLO expression; raises `UsageError` (exit code 2) with one line on error,
    naming `option` (`--slo`) when given."""
    if option is None:
        return _parse_slo(text)
    try:
        return _parse_slo(text)
    except UsageError as exc:
        raise UsageError(f"{option}: {exc.message}", hint=exc.hint) from None


def _parse_slo(text: str) -> Slo:
    if not isinstance(text, str) or not text.strip():
        raise UsageError("empty SLO expression", hint=GRAMMAR_HINT)
    parts = _SPLIT_RE.split(text.strip())
    clauses = []
    for part in parts:
        clauses.append(_parse_clause(part, text))
    why = never_met(clauses)
    if why is not None:
        raise UsageError(f"SLO {shown(text.strip())} can never be met: {why}",
                         hint="fix the bounds: clauses are joined by `and`, so every one "
                         "must hold at once")
    return Slo(tuple(clauses), text.strip())


def _at_most(a: str, b: str) -> bool:
    """True when metric `a` is <= metric `b` on every channel of every run: a metric and
    itself; min <= avg, pNN, max; avg, pNN <= max; pA <= pB for A <= B. (The mode is a
    bucket's midpoint, which may lie outside [min, max]: it is related to nothing else.)"""
    if a == b:
        return True
    if "mode" in (a, b) or "missed" in (a, b):
        return False
    if a == "min" or b == "max":
        return True
    if a.startswith("p") and b.startswith("p"):
        return float(a[1:]) <= float(b[1:])
    return False


def never_met(clauses: Iterable[Clause]) -> str | None:
    """Why the clauses (all of which must hold) can be met by no run at all, or None.

    Only what is provably contradictory: a lower bound on a metric at or above an upper
    bound on the same or a larger metric (`max > 50us and max < 10us`, `p99 > 20us and
    p99.9 < 10us` since p99 <= p99.9, `min > 5us and max < 5us`), and an upper bound of
    0 that is strict (no latency, count or mode is negative: `max < 0ns`)."""
    items = list(clauses)
    for up in items:
        if up.op == "<" and up.bound <= 0:
            what = "count" if up.is_count else "measured value"
            return f"{up.text}: a {what} is never negative"
    for low in (c for c in items if c.op in (">", ">=")):
        for up in (c for c in items if c.op in ("<", "<=")):
            if not _at_most(low.metric, up.metric):
                continue
            strict = low.op == ">" or up.op == "<"
            if low.bound > up.bound or (low.bound == up.bound and strict):
                order = ("" if low.metric == up.metric else
                         f" ({low.metric} <= {up.metric} in every run)")
                return f"{low.text} and {up.text} cannot both hold{order}"
    return None


def _parse_clause(part: str, whole: str) -> Clause:
    m = _CLAUSE_RE.match(part)
    if not m:
        raise UsageError(f"cannot parse SLO clause {part.strip()!r} in {whole!r}",
                         hint=GRAMMAR_HINT)
    metric = m["metric"].lower()
    if metric == "mean":
        metric = "avg"
    if metric not in ("min", "avg", "mode", "max", "missed"):
        pm = _PCT_RE.match(metric)
        if not pm:
            raise UsageError(f"unknown SLO metric {m['metric']!r} in {whole!r}", hint=GRAMMAR_HINT)
        value = float(pm.group(1))
        if not 0 < value < 100:
            raise UsageError(f"percentile must be between 0 and 100 (exclusive): {m['metric']!r}")
        metric = "p" + pm.group(1)
    unit = m["unit"]
    try:
        number = Decimal(m["num"])
    except InvalidOperation as exc:  # pragma: no cover - the regex admits only numbers
        raise UsageError(f"bad number in SLO clause {part.strip()!r}") from exc
    if metric == "missed":
        if unit or number != number.to_integral_value():
            raise UsageError(f"`missed` is a count: write e.g. 'missed <= 0', not {part.strip()!r}")
        bound = int(number)
    else:
        if not unit:
            raise UsageError(f"SLO bound needs a unit (ns, us, ms, s): {part.strip()!r}",
                             hint=GRAMMAR_HINT)
        scale = _UNITS.get(unit.lower() if unit not in ("µs", "μs") else unit)
        if scale is None:
            raise UsageError(f"unknown unit {unit!r} in SLO clause {part.strip()!r}",
                             hint="units: ns, us, ms, s")
        bound = int(number * scale)
    text = f"{metric} {m['op']} {m['num']}{unit}"
    return Clause(metric, m["op"], bound, text)


@dataclass(frozen=True)
class Outcome:
    """One clause checked on one channel."""

    run_id: str
    phase: str
    channel: str
    clause: Clause
    value: float | None  # ns (or count for `missed`); None = not supported by the data
    passed: bool  # True only when met
    reason: str
    status: str = ""  # "met", "violated", "undecided" or "invalid" (not checked)
    interval: PercentileInterval | None = None  # percentile clauses
    needed_samples: int | None = None  # undecided: roughly how many samples would decide
    needed_ns: float | None = None  # ... and how long that is at this run's sample rate

    def __post_init__(self) -> None:
        if not self.status:
            object.__setattr__(self, "status", "met" if self.passed else "violated")

    def to_dict(self) -> dict[str, Any]:
        iv = self.interval
        return {"run_id": self.run_id, "phase": self.phase, "channel": self.channel,
                "clause": self.clause.text, "status": self.status, "value": self.value,
                "interval": None if iv is None else {
                    "level": iv.level, "low_ns": iv.low_ns, "high_ns": iv.high_ns,
                    "widened_for_clustering": iv.theta is not None,
                    "widened_because": iv.widened},
                "needed_samples": self.needed_samples, "needed_ns": self.needed_ns,
                "reason": self.reason}


@dataclass
class SloReport:
    slo: Slo
    outcomes: list[Outcome] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        """Every check met (undecided and violated checks both fail the gate)."""
        return all(o.passed for o in self.outcomes)

    @property
    def failures(self) -> list[Outcome]:
        """Every check not met: violated, undecided or not checked."""
        return [o for o in self.outcomes if not o.passed]

    @property
    def violations(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.status in ("violated", "invalid")]

    @property
    def undecided(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.status == "undecided"]

    @property
    def verdict(self) -> str:
        """"met", "violated" (at least one check violated or not checkable) or
        "undecided" (none violated, but some the run is too short to decide)."""
        if self.violations:
            return "violated"
        return "undecided" if self.undecided else "met"

    def summary(self) -> str:
        """One line for the terminal."""
        n = len(self.outcomes)
        verdict = self.verdict
        if verdict == "met":
            return f"SLO met: {self.slo} ({n} check(s) passed)"
        if verdict == "violated":
            worst = self.violations[0]
            more = f", {len(self.undecided)} undecided" if self.undecided else ""
            return (f"SLO VIOLATED: {len(self.violations)} of {n} check(s) failed{more}; "
                    f"first: run {worst.run_id} {worst.phase}/{worst.channel}: {worst.reason}")
        first = self.undecided[0]
        return (f"SLO NOT DECIDED (not met): {len(self.undecided)} of {n} check(s) cannot be "
                f"decided from this run, none violated; first: run {first.run_id} "
                f"{first.phase}/{first.channel}: {first.reason}")

    def to_dict(self) -> dict[str, Any]:
        return {"expression": str(self.slo), "verdict": self.verdict, "passed": self.passed,
                "checks": len(self.outcomes), "summary": self.summary(),
                "outcomes": [o.to_dict() for o in self.outcomes]}


def _fmt(clause: Clause, value: float) -> str:
    if clause.is_count:
        return f"{value:.0f}"
    return f"{value / 1000:.3f} us"


def _value(clause: Clause, s: ChannelSummary) -> float | None:
    return {"min": s.min_ns, "max": s.max_ns, "avg": s.mean_ns, "mode": s.mode_ns,
            "missed": s.missed}[clause.metric]


def _ns(v: int | None, none: str) -> str:
    return none if v is None else f"{v / 1000:.3f}"


def _decide(clause: Clause, iv: PercentileInterval) -> str:
    """met / violated / undecided from the interval [low, high] (None = unbounded)."""
    lo, hi, b = iv.low_ns, iv.high_ns, clause.bound
    if clause.op in ("<", "<="):
        holds = hi is not None and (hi < b if clause.op == "<" else hi <= b)
        breaks = lo is not None and (lo >= b if clause.op == "<" else lo > b)
    else:
        holds = lo is not None and (lo > b if clause.op == ">" else lo >= b)
        breaks = hi is not None and (hi <= b if clause.op == ">" else hi < b)
    return "met" if holds else "violated" if breaks else "undecided"


def _needed(clause: Clause, iv: PercentileInterval, ch: Channel) -> int:
    """Roughly how many samples would decide the clause, if the process stays as measured:
    the count above the bound, scaled until it is z = 2 standard deviations from the
    count the percentile implies; at least enough to bound the percentile at all."""
    frac = 1 - float(clause.percentile or 0) / 100
    n = max(iv.samples, 1)
    above = sum(b.count for b in ch.hist.buckets() if b.lo >= clause.bound)
    expected = frac * n
    gap = abs(above - expected)
    # decided when gap * f >= 2 * sqrt(expected * f) for n' = f * n
    need = int(n * max(1.0, 4 * max(expected, 1.0) / gap ** 2) * 1.1) + 1 if gap else 10 * n
    if iv.theta is not None:
        need = int(need / iv.theta)
    return max(need, samples_to_bound(clause.percentile or 50.0, iv.level), n + 1)


def _unbelievable(result: RunResult) -> str | None:
    """Why no clause may be checked on `result` (its numbers failed validation), or None."""
    return failed_validation(result, "the result", "when it was stored (see its notes)")


def _check(run_id: str, phase: str, ch: Channel, clause: Clause, s: ChannelSummary,
           iv: PercentileInterval | None, rate: float | None, above: int | None = None
           ) -> Outcome:
    """One clause on one channel; `above`: the channel's samples beyond a peer tool's
    histogram range are only known to lie above this (ns), None when it has none."""

    if clause.percentile is None:
        value = _value(clause, s)
        if value is None:  # nothing measured: no evidence either way (as for a percentile)
            return Outcome(run_id, phase, ch.name, clause, None, False,
                           f"{clause.text} undecided: {clause.metric} unknown (no samples)",
                           "undecided")
        ok = clause.holds(value)
        verb = "holds" if ok else "violated"
        return Outcome(run_id, phase, ch.name, clause, value, ok,
                       f"{clause.text} {verb}: {clause.metric} = {_fmt(clause, value)}")
    if iv is None:
        return Outcome(run_id, phase, ch.name, clause, None, False,
                       f"{clause.text}: undecided: no samples", "undecided")
    value = s.p(clause.percentile)
    shown = f"{clause.metric} = {_fmt(clause, value)}" if value is not None else (
        f"{iv.samples:,} samples cannot support {clause.metric} (needs at least "
        f"{_support(clause.percentile):,})")
    if above is not None and iv.low_ns is not None and iv.low_ns > above:
        # the interval reaches into samples a peer tool counted beyond its histogram range
        # (placed at the max): their true values are only known to be above the range
        iv = replace(iv, low_ns=above)
        beyond = ("; lowered to the peer tool's histogram range: samples beyond it are only "
                  "known to lie between it and the max")
    else:
        beyond = ""
    ci = (f"{round(iv.level * 100)} % interval [{_ns(iv.low_ns, '-inf')}, "
          f"{_ns(iv.high_ns, 'unbounded')}] us"
          + (f" (widened: {iv.widened})" if iv.widened else "") + beyond)
    status = _decide(clause, iv)
    if status == "met":
        return Outcome(run_id, phase, ch.name, clause, value, True,
                       f"{clause.text} holds: {shown}, {ci}", "met", iv)
    if status == "violated":
        return Outcome(run_id, phase, ch.name, clause, value, False,
                       f"{clause.text} violated: {shown}, {ci}", "violated", iv)
    if beyond:  # more samples of the same tool would not tell: its range would
        return Outcome(run_id, phase, ch.name, clause, value, False,
                       f"{clause.text} undecided: {shown}, {ci}: the interval contains the "
                       "bound; measure with a histogram range above the bound (cyclictest "
                       "-h, oslat -b) to decide", "undecided", iv)
    need = _needed(clause, iv, ch)
    how_long = f" (≈ {duration(need / rate)} at this run's rate)" if rate else ""
    why = ("no sample bounds it from above" if iv.high_ns is None
           else "the interval contains the bound")
    return Outcome(run_id, phase, ch.name, clause, value, False,
                   f"{clause.text} undecided: {shown}, {ci}: {why}; the run is too short to "
                   f"decide: roughly {need:,} samples{how_long} would", "undecided", iv,
                   need, need / rate if rate else None)


def _support(q: float) -> int:
    from fractions import Fraction

    return int(1 / (1 - Fraction(str(q)) / 100))


def evaluate_slo(slo: Slo, result: RunResult | Iterable[RunResult], *, shape_of: ShapeOf
                 ) -> SloReport:
    """Check every clause on every headline channel (of each run's probe's result shape,
    `shape_of`: for udp the round trip, not its parts) of every phase of one or several
    results."""

    results = [result] if isinstance(result, RunResult) else list(result)
    report = SloReport(slo)
    qs = tuple(sorted({c.percentile for c in slo.clauses if c.percentile is not None}))
    for res in results:
        why = _unbelievable(res)
        if why is not None:  # no verdict from numbers that contradict each other
            report.outcomes += [Outcome(res.run_id, "-", "validation", clause, None, False,
                                        f"{clause.text}: not checked: {why}", "invalid")
                                for clause in slo.clauses]
            continue
        for phase, ch in res.headline_channels(shape_of(res.probe)):
            s = ch.summary(qs)
            ivs = channel_intervals(ch, qs) if qs and ch.hist.total else {}
            rate = (ch.samples / phase.elapsed_ns
                    if phase.elapsed_ns and ch.samples else None)
            count, above = beyond_range(res, {ch.name})
            for clause in slo.clauses:
                report.outcomes.append(_check(res.run_id, phase.name, ch, clause, s,
                                              ivs.get(clause.percentile or -1.0), rate,
                                              above if count else None))
    return report
