# SPDX-License-Identifier: MIT
"""The statistics of a tune: which statistics decide, at which alpha, in which order
the blocks run, and what a comparison's changes mean for a knob (docs/tune.md,
"How the tune decides").

* **Blocks.** Each experiment compares two configurations, A and B, in short runs
  (blocks) in the order A B B A A B B A ...: a drift that is linear over four blocks
  cancels, and a configuration that needs a reboot (boot knobs) reboots at most every
  second block.
* **Looks.** An experiment is judged after `pairs` blocks per side; a statistic that
  is neither decided nor excluded ("inconclusive") makes it measure on, doubling the
  blocks, up to `MAX_LOOKS` looks, within the budget.
* **Family-wise control.** Every screening test (k knobs x m statistics x looks) is
  made at alpha = FAMILY_ALPHA / (k m looks) (Bonferroni): a knob without effect is
  called "helps" in at most FAMILY_ALPHA of tunes whatever k is (bench/tune_fwer.py
  measures it).
* **Verdicts per statistic** from the calibrated comparison (rtlab.analysis.compare):
  significantly lower is "helps", higher "hurts"; not significant with the interval
  of the ratio inside +-EQUIVALENCE is "no effect"; anything else "inconclusive" (the
  data cannot tell: the ledger shows the change it could not judge).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rtlab.analysis.compare import EQUIVALENCE_MARGIN, Change, compare_pair
from rtlab.analysis.configs import Config, build_configs
from rtlab.errors import UsageError
from rtlab.results.model import RunResult
from rtlab.results.shape import ShapeOf

FAMILY_ALPHA = 0.05  # the share of all-inert tunes that may call some knob "helps"
CONFIRM_ALPHA = 0.01  # the confirmation's tests (one family: its statistics)
EQUIVALENCE = EQUIVALENCE_MARGIN  # "no effect": the ratio's interval inside 1 +- this
MAX_LOOKS = 3
DEFAULT_STATS = ("p99.99", "max")

# statistic as the user names it -> the comparison's change label
STATISTICS: dict[str, str] = {
    "median": "median", "mean": "mean", "p99": "p99", "p99.9": "p99.9",
    "p99.99": "p99.99", "max": "max (median window max)",
}
VERDICTS = ("helps", "hurts", "no effect", "inconclusive")


def parse_stats(text: str | None) -> tuple[str, ...]:
    """`--stats p99.99,max` -> the statistics (UsageError for an unknown one)."""
    if text is None:
        return DEFAULT_STATS
    out: list[str] = []
    for raw in text.split(","):
        name = raw.strip().lower()
        if name not in STATISTICS:
            raise UsageError(f"--stats: unknown statistic {raw.strip()[:60]!r}",
                             hint=f"allowed: {', '.join(STATISTICS)}")
        if name not in out:
            out.append(name)
    if not out:
        raise UsageError("--stats is empty", hint=f"allowed: {', '.join(STATISTICS)}")
    return tuple(out)


def screening_alpha(knobs: int, stats: int, looks: int = MAX_LOOKS) -> float:
    return FAMILY_ALPHA / max(1, knobs * stats * looks)


def sides(start: int, count: int) -> list[str]:
    """Sides of blocks start .. start+count-1 in the order ABBA ABBA ..."""
    return ["ABBA"[i % 4] for i in range(start, start + count)]


@dataclass(frozen=True)
class StatResult:
    """One statistic's change from A to B and its verdict."""

    stat: str
    verdict: str
    a_ns: float | None
    b_ns: float | None
    ratio: float | None
    ci: tuple[float, float] | None
    p_value: float | None
    confidence: float
    needs: float | None  # inconclusive: about this many times the data to decide
    note: str = ""
    why: str = ""  # inconclusive: why the comparison could not judge it

    def to_dict(self) -> dict[str, Any]:
        return {"statistic": self.stat, "verdict": self.verdict, "baseline_ns": self.a_ns,
                "value_ns": self.b_ns, "ratio": self.ratio,
                "ratio_ci": list(self.ci) if self.ci else None, "p_value": self.p_value,
                "confidence": self.confidence, "needs": self.needs, "note": self.note or None,
                "why": self.why or None}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> StatResult:
        ci = d.get("ratio_ci")
        return cls(d["statistic"], d["verdict"], d.get("baseline_ns"), d.get("value_ns"),
                   d.get("ratio"), (float(ci[0]), float(ci[1])) if ci else None,
                   d.get("p_value"), float(d.get("confidence") or 0.0), d.get("needs"),
                   d.get("note") or "", d.get("why") or "")

    def text(self) -> str:
        if self.ratio is None:
            return f"{self.stat}: n/a" + (f" ({self.note})" if self.note else "")
        t = f"{self.stat} {(self.ratio - 1) * 100:+.1f} %"
        if self.ci is not None:
            t += (f" [{(self.ci[0] - 1) * 100:+.1f}, {(self.ci[1] - 1) * 100:+.1f}] "
                  f"at {self.confidence * 100:.4g} %")
        if self.verdict == "inconclusive" and self.why:
            t += f", cannot tell: {self.why}"
        return t


def stat_verdict(ch: Change) -> str:
    """helps / hurts / no effect / inconclusive: the comparison's own verdict (better,
    worse, no change, cannot tell: rtlab.analysis.compare.Change.verdict) in the words
    of a knob (lower latency is better)."""
    return {"better": "helps", "worse": "hurts", "no change": "no effect"}.get(
        ch.verdict, "inconclusive")


def knob_verdict(verdicts: Sequence[str]) -> str:
    """A knob's verdict over its statistics: helps (some help, none hurt), hurts (some
    hurt, none help), trade-off (both), no effect (all), else inconclusive."""
    helps, hurts = "helps" in verdicts, "hurts" in verdicts
    if helps and hurts:
        return "trade-off"
    if helps:
        return "helps"
    if hurts:
        return "hurts"
    if verdicts and all(v == "no effect" for v in verdicts):
        return "no effect"
    return "inconclusive"


def config_of(runs: Sequence[RunResult], label: str, shape_of: ShapeOf) -> Config:
    """One configuration of all these runs (their histograms and windows merged)."""
    (c,) = build_configs(list(runs), "scenario", shape_of=shape_of)
    c.label = label
    return c


def judge(a_runs: Sequence[RunResult], b_runs: Sequence[RunResult], stats: Sequence[str],
          alpha: float, shape_of: ShapeOf) -> dict[str, StatResult]:
    """Each statistic's change from A's runs to B's, tested at alpha."""
    a = config_of(a_runs, "A", shape_of)
    b = config_of(b_runs, "B", shape_of)
    pc = compare_pair(a, b, alpha=alpha)
    by_label = {ch.what: ch for ch in pc.changes}
    out: dict[str, StatResult] = {}
    for s in stats:
        # the maxima's change is labelled "max" when it could not be tested on window
        # maxima (too few of them): its own reason then says why
        ch = by_label.get(STATISTICS[s]) or (by_label.get("max") if s == "max" else None)
        if ch is None:
            out[s] = StatResult(s, "inconclusive", None, None, None, None, None, 1 - alpha,
                                None, "not measured")
            continue
        ci = (ch.ci_lo, ch.ci_hi) if ch.ci_lo is not None and ch.ci_hi is not None else None
        needs = ch.needs if ch.needs is not None and math.isfinite(ch.needs) else None
        out[s] = StatResult(s, stat_verdict(ch), ch.a_ns, ch.b_ns, ch.ratio, ci,
                            ch.p_value, ch.confidence, needs, ch.note, ch.undecided_reason())
    return out
