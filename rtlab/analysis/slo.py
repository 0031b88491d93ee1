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

Every clause is checked on every channel of every phase of a result. A result
whose numbers failed validation (rtlab.results.validate) is not checked at all: every
clause fails on it with that reason. A
percentile the run has too few samples to support (see
`rtlab.analysis.stats.supported`) cannot be shown to meet its bound, so the
clause fails with that reason: a gate never passes on missing evidence.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING

from rtlab.analysis.stats import ChannelSummary, percentile, supported
from rtlab.errors import UsageError

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


def parse_slo(text: str) -> Slo:
    """Parse an SLO expression; raises `UsageError` (exit code 2) with one line on error."""
    if not isinstance(text, str) or not text.strip():
        raise UsageError("empty SLO expression", hint=GRAMMAR_HINT)
    parts = _SPLIT_RE.split(text.strip())
    clauses = []
    for part in parts:
        clauses.append(_parse_clause(part, text))
    return Slo(tuple(clauses), text.strip())


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
    passed: bool
    reason: str


@dataclass
class SloReport:
    slo: Slo
    outcomes: list[Outcome] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(o.passed for o in self.outcomes)

    @property
    def failures(self) -> list[Outcome]:
        return [o for o in self.outcomes if not o.passed]

    def summary(self) -> str:
        """One line for the terminal."""
        n = len(self.outcomes)
        if self.passed:
            return f"SLO met: {self.slo} ({n} check(s) passed)"
        worst = self.failures[0]
        return (f"SLO VIOLATED: {len(self.failures)} of {n} check(s) failed; first: run "
                f"{worst.run_id} {worst.phase}/{worst.channel}: {worst.reason}")


def _fmt(clause: Clause, value: float) -> str:
    if clause.is_count:
        return f"{value:.0f}"
    return f"{value / 1000:.3f} us"


def _value(clause: Clause, s: ChannelSummary, ch: Channel) -> tuple[float | None, str]:
    if clause.metric == "min":
        return s.min_ns, ""
    if clause.metric == "max":
        return s.max_ns, ""
    if clause.metric == "avg":
        return s.mean_ns, ""
    if clause.metric == "mode":
        return s.mode_ns, ""
    if clause.metric == "missed":
        return s.missed, ""
    q = clause.percentile
    assert q is not None
    n = ch.hist.total
    if not supported(q, n):
        need = "more"
        try:
            from fractions import Fraction
            need_n = int(1 / (1 - Fraction(str(q)) / 100))
            need = f"at least {need_n:,}"
        except (ZeroDivisionError, ValueError):  # pragma: no cover
            pass
        return None, f"{n:,} samples cannot support {clause.metric} (needs {need})"
    return percentile(ch.hist, q, ch.min_ns, ch.max_ns), ""


def _unbelievable(result: RunResult) -> str | None:
    """Why no clause may be checked on `result` (its numbers failed validation), or None.
    Checked here too, not only when stored: a store written before validation existed
    may hold such a result."""
    from rtlab.results.validate import first_problem

    why = first_problem(result)
    if why is not None:
        return f"the result failed validation ({why})"
    if result.status == "invalid":
        return "the result failed validation when it was stored (see its notes)"
    return None


def evaluate_slo(slo: Slo, result: RunResult | Iterable[RunResult]) -> SloReport:
    """Check every clause on every headline channel (model.HEADLINE_CHANNELS: for udp the
    round trip, not its parts) of every phase of one or several results."""
    from rtlab.results.model import RunResult

    results = [result] if isinstance(result, RunResult) else list(result)
    report = SloReport(slo)
    qs = tuple(sorted({c.percentile for c in slo.clauses if c.percentile is not None}))
    for res in results:
        why = _unbelievable(res)
        if why is not None:  # no verdict from numbers that contradict each other
            report.outcomes += [Outcome(res.run_id, "-", "validation", clause, None, False,
                                        f"{clause.text}: not checked: {why}")
                                for clause in slo.clauses]
            continue
        for phase, ch in res.headline_channels():
            s = ch.summary(qs)
            for clause in slo.clauses:
                value, why = _value(clause, s, ch)
                if value is None:
                    reason = why or f"{clause.metric} unknown (no samples)"
                    report.outcomes.append(Outcome(res.run_id, phase.name, ch.name, clause,
                                                   None, False, f"{clause.text}: {reason}"))
                    continue
                ok = clause.holds(value)
                verb = "holds" if ok else "violated"
                reason = f"{clause.text} {verb}: {clause.metric} = {_fmt(clause, value)}"
                report.outcomes.append(Outcome(res.run_id, phase.name, ch.name, clause,
                                               value, ok, reason))
    return report
