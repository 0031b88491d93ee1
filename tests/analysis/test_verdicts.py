# SPDX-License-Identifier: MIT
"""The verdict words of a comparison (issue 27): "no change" only when the ratio's interval
lies within the equivalence margin, "cannot tell" otherwise (with the change it could not
judge, why and what would decide it), and SLO gates that keep "not decided" apart from
"met" and "violated"."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from rtlab.analysis.compare import (
    EQUIVALENCE_MARGIN,
    Change,
    PairComparison,
    compare_configs,
    tails_and_max,
    undecided_text,
)
from rtlab.analysis.configs import build_configs
from rtlab.analysis.slo import evaluate_slo, parse_slo
from rtlab.cli import main
from rtlab.probes.registry import shape as probe_shape
from rtlab.report.junit import junit_xml
from rtlab.results.importers import import_file
from rtlab.results.model import Channel
from rtlab.results.store import Store
from tests.support.synth import synthetic_result

DATA = Path(__file__).parent.parent / "support" / "data"
M = EQUIVALENCE_MARGIN


def _ch(ratio: float, ci: tuple[float, float] | None, *, significant: bool = False,
        needs: float | None = None, what: str = "p99") -> Change:
    return Change(what, 10_000.0, 10_000.0 * ratio, 0.5 if ci else None, significant,
                  direction=1 if ratio > 1 else -1 if ratio < 1 else 0,
                  ci_lo=ci[0] if ci else None, ci_hi=ci[1] if ci else None, needs=needs)


@pytest.mark.parametrize("change, verdict", [
    (_ch(1.02, (1 - M / 2, 1 + M / 2)), "no change"),
    (_ch(1.0, (1 - M, 1 + M)), "no change"),  # the margin itself is excluded at the edge
    (_ch(1.0, (1 - M - 0.01, 1 + M / 2)), "cannot tell"),  # reaches beyond the margin below
    (_ch(1.05, (0.98, 1 + M + 0.01)), "cannot tell"),  # ... above
    (_ch(1.30, None), "cannot tell"),  # no interval: a +30 % change is not "no change"
    (_ch(1.30, (1.2, 1.4), significant=True), "worse"),
    (_ch(0.70, (0.6, 0.8), significant=True), "better"),
    (Change("max", None, None, None, False, "not comparable"), "n/a"),
])
def test_verdict_words(change: Change, verdict: str) -> None:
    assert change.verdict == verdict
    assert change.decided == (verdict in ("worse", "better", "no change"))
    d = change.to_dict()
    assert d["verdict"] == verdict and d["decided"] == change.decided
    assert d["inconclusive"] == (verdict == "cannot tell") and d["equivalence_margin"] == M
    assert d["significant"] == (verdict in ("worse", "better"))  # kept as it was
    assert d["regression"] == (verdict == "worse")
    if verdict != "n/a":
        assert f"({verdict}" in change.describe()
        assert d["text"] == change.describe()
    assert (d["cannot_tell_because"] is None) == (verdict != "cannot tell"
                                                   and verdict != "n/a")


def test_cannot_tell_carries_the_change_why_and_what_would_decide() -> None:
    wide = _ch(1.093, (0.725, 1.647), needs=40.0, what="p99.9")
    assert wide.brief() == "p99.9 +9.3 %"
    assert wide.undecided_reason() == f"interval not within ±{M * 100:.0f} %"
    assert "not within ±10 %" in wide.describe() and "measure ~40× longer" in wide.describe()
    bare = _ch(1.30, None)
    assert bare.undecided_reason() == "no interval"
    text = undecided_text([wide, bare])
    assert text == ("p99.9 +9.3 % (interval not within ±10 %; to decide: ~40× longer runs, "
                    "or 40 runs per configuration), p99 +30.0 % (no interval)")
    # "no change" does not ask for more data, even where 90 % power needs more
    same = _ch(1.0, (0.95, 1.05), needs=2.0)
    assert same.verdict == "no change" and "inconclusive" not in same.describe()


def _pair(*changes: Change) -> PairComparison:
    a = build_configs([synthetic_result("eeee0001", windows=12)], shape_of=probe_shape)[0]
    return PairComparison(a, a, list(changes))


def test_pair_verdict_and_summary() -> None:
    same, bare = _ch(1.0, (0.97, 1.03)), _ch(1.3, None, what="p99.9")
    worse = _ch(1.3, (1.2, 1.4), significant=True, what="p99.99")
    better = _ch(0.8, (0.7, 0.9), significant=True, what="max")
    assert _pair(same).verdict() == "no change"
    assert _pair(same, better).verdict() == "better"
    assert _pair(same, better, bare).verdict() == "cannot tell"  # never "better"
    assert _pair(same, better, bare, worse).verdict() == "worse"
    n_a = Change("max", None, None, None, False, "not comparable")
    assert _pair(same, n_a).verdict() == "cannot tell"
    assert _pair(same, n_a).verdict(lambda what: what == "p99") == "no change"
    pc = _pair(same, bare, worse, better)
    assert pc.summary() == ("worse: p99.99 +30.0 %; better: max -20.0 %; cannot tell: "
                            "p99.9 +30.0 % (no interval); no change: p99")
    d = pc.to_dict()
    assert d["verdict"] == "worse" and d["undecided"] == ["p99.9"]
    assert d["regressions"] == ["p99.99"] and d["summary"] == pc.summary()
    assert [tails_and_max(w) for w in ("median", "mean", "p99", "p99.99", "max",
                                       "max (median window max)")] == [
        False, False, True, True, True, True]


def test_long_equal_windowed_runs_are_no_change_and_short_ones_cannot_tell() -> None:
    long = [synthetic_result(f"ffff000{i}", seed=i, windows=600, window_hist=True)
            for i in (1, 2)]
    pc = compare_configs(build_configs(long, shape_of=probe_shape))[0]
    assert {c.verdict for c in pc.changes} == {"no change"} and pc.verdict() == "no change"
    short = [synthetic_result(f"ffff001{i}", seed=i, windows=30, window_hist=True)
             for i in (1, 2)]
    pc = compare_configs(build_configs(short, shape_of=probe_shape))[0]
    far = next(c for c in pc.changes if c.what == "p99.99")
    assert far.verdict == "cannot tell" and far.undecided_reason()
    assert pc.verdict() == "cannot tell" and far.brief() in pc.summary()


def test_imported_single_runs_cannot_tell_in_compare(
        store_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    s = Store.open(str(store_path))
    s.add(import_file(DATA / "cyclictest.json", "cyclictest-json", "cccc0001"), probe_shape)
    s.add(import_file(DATA / "jitterdebugger_results.json", "jitterdebugger", "cccc0002"),
          probe_shape)
    s.close()
    assert main(["compare", "cccc0001", "cccc0002"]) == 0
    out = capsys.readouterr().out
    (line,) = [ln for ln in out.splitlines() if ln.startswith("  verdict: ")]
    assert "cannot tell: " in line and "single runs without windows" in line
    assert "(cannot tell: no interval, single runs without windows)" in out
    assert main(["compare", "cccc0001", "cccc0002", "--json"]) == 0
    pair = json.loads(capsys.readouterr().out)["comparisons"][0]
    assert pair["verdict"] == "cannot tell" and pair["summary"] in line
    undecided = [c for c in pair["changes"] if not c["decided"]]
    assert [c["statistic"] for c in undecided] == pair["undecided"]
    assert all(c["cannot_tell_because"] for c in undecided)
    assert any(c["verdict"] == "cannot tell" and c["change_percent"] is not None
               for c in undecided)


def test_slo_on_nothing_measured_is_not_decided() -> None:
    r = synthetic_result("gggg0001", windows=10)
    empty = Channel.merged("cpu0", [])
    empty.name, empty.cpu = "cpu0", 0
    r.phases[0].channels[0] = empty
    rep = evaluate_slo(parse_slo("max < 1s"), r, shape_of=probe_shape)
    by = {o.channel: o for o in rep.outcomes}
    assert by["cpu0"].status == "undecided" and "no samples" in by["cpu0"].reason
    assert by["cpu1"].status == "met"
    assert rep.verdict == "undecided" and not rep.passed
    assert rep.summary().startswith("SLO NOT DECIDED (not met)")


def test_slo_beyond_a_peer_range_is_not_decided_and_junit_says_so() -> None:
    """cyclictest_nsecs.json: every sample beyond the -h range (placed at the max). The
    true p99 lies somewhere between the range and the max: a bound in between cannot be
    decided, one below the range is violated, one above the max met."""
    r = import_file(DATA / "cyclictest_nsecs.json", "cyclictest-json", "cccc0003")
    ch = r.phases[0].channels[0]
    above = r.provenance["imported"]["beyond_range"][ch.name]["above_ns"]
    assert above < ch.max_ns
    between = f"p99 < {(above + ch.max_ns) // 2}ns"
    r.phases[0].channels[1:] = []  # the first thread only

    def gate(expr: str) -> str:
        rep = evaluate_slo(parse_slo(expr), r, shape_of=probe_shape)
        assert len(rep.outcomes) == 1
        return rep.outcomes[0].status

    assert gate(between) == "undecided" and gate(f"p99 < {above // 2}ns") == "violated"
    assert gate(f"p99 < {ch.max_ns + 1}ns") == "met"
    rep = evaluate_slo(parse_slo(between), r, shape_of=probe_shape)
    assert rep.verdict == "undecided" and "histogram range" in rep.outcomes[0].reason
    root = ET.fromstring(junit_xml([r], parse_slo(between), rep))
    (fail,) = root.findall(".//failure")
    assert fail.get("type") == "slo-undecided"
    assert fail.get("message", "").startswith(f"{between} undecided")
    violated = parse_slo(f"p99 < {above // 2}ns")
    root = ET.fromstring(junit_xml([r], violated))
    assert {f.get("type") for f in root.findall(".//failure")} == {"slo"}
