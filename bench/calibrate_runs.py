#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Calibration of `rtlab compare` with several runs per configuration: k runs of a length
against one run k times as long (k = 1, 2, 4, 8), on simulated runs whose truth is known
(rtlab/analysis/calibrate.py), the case of `rtlab tune`'s interleaved blocks.

    .venv/bin/python bench/calibrate_runs.py [--reps 400] [--seconds 10,60] \\
        [--kinds independent,ar1-0.99,run-effect] [--runs-test-level 0.01] [--jobs 2] \\
        [--out bench/out/calibrate_runs.md]

Per kind, run length s and k: A/A (every "significant" is a false positive; nominal
1 %) and A/B with B's tail +10 % (power), each with k runs of s seconds per configuration
and with one run of k x s seconds. The promise checked: k runs have at least the power of
one run of the same total length, within simulation error, at the same false-positive
rate and interval coverage. `run-effect` (each run shifted by a random 2 %) shows what the
F test that lets the run-to-run variance in costs and buys; `--runs-test-level 1` gives
the rule before (the larger of the two variances, always). The table goes into
docs/report.md and bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchlib import write_report

from rtlab.analysis import compare_stats
from rtlab.analysis.calibrate import TAIL_STATS, Cell, Tally, binomial_upper, run_cell

KS = (1, 2, 4, 8)
SHOWN = ("median", "p99", "p99.9", "p99.99", "max (median window max)")


def _cell(args: tuple[str, int, int, bool, int, int, float]) -> Cell:
    kind, seconds, reps, shifted, runs, seed, level = args
    compare_stats.RUNS_TEST_LEVEL = level
    return run_cell(kind, seconds, reps, shifted=shifted, runs=runs, seed=seed)


def _dur(s: int) -> str:
    return f"{s // 3600} h" if s >= 3600 and s % 3600 == 0 else (
        f"{s // 60} min" if s >= 60 and s % 60 == 0 else f"{s} s")


def _pct(k: int, n: int) -> str:
    return f"{k / n * 100:.0f}" if n else "–"


def _tally(cells: dict[tuple[str, int, int, int, bool], Cell], kind: str, s: int, k: int,
           runs: int, shifted: bool, stat: str) -> Tally:
    """k runs of s seconds (runs == k), or one run of k x s seconds (runs == 1)."""
    return cells[(kind, s, k, runs, shifted)].tallies[stat]


def _cov(a: Tally, b: Tally) -> str:
    n = a.with_ci + b.with_ci
    return "–" if not n else f"{(a.covered + b.covered) / n * 100:.1f} %"


def table(cells: dict[tuple[str, int, int, int, bool], Cell], kinds: list[str],
          lengths: list[int]) -> str:
    """Per kind, run length, k and statistic: power of k runs | of one k-times longer run;
    A/A false positives (k runs | longer); coverage of the shown 99 % intervals (k runs,
    A/A and A/B together | longer)."""
    out = ["| data | run | k | statistic | power: k runs | power: 1 run of k× | A/A: k runs "
           "| A/A: 1 run of k× | 99 % CI coverage: k runs | 1 run of k× |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for kind in kinds:
        for s in lengths:
            for k in KS:
                for stat in SHOWN:
                    pk, pl, ak, al = (_tally(cells, kind, s, k, runs, shifted, stat)
                                      for shifted in (True, False) for runs in (k, 1))
                    out.append(
                        f"| {kind} | {_dur(s)} | {k} | {stat} "
                        f"| {_pct(pk.significant, pk.reps)} % | {_pct(pl.significant, pl.reps)} % "
                        f"| {ak.significant}/{ak.reps} | {al.significant}/{al.reps} "
                        f"| {_cov(ak, pk)} | {_cov(al, pl)} |")
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=400, help="repetitions per cell")
    ap.add_argument("--seconds", default="10,60", help="run lengths (s), comma separated")
    ap.add_argument("--kinds", default="independent,ar1-0.99")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--seed", type=int, default=900)
    ap.add_argument("--runs-test-level", type=float, default=compare_stats.RUNS_TEST_LEVEL,
                    help="level of the F test that lets the run-to-run variance replace "
                    "the batches' (1: whenever larger, the rule before issue 27)")
    ap.add_argument("--out", default=str(Path(__file__).parent / "out" / "calibrate_runs.md"))
    args = ap.parse_args()
    kinds = args.kinds.split(",")
    lengths = [int(v) for v in args.seconds.split(",")]
    keys, plan = [], []
    seed = args.seed
    for kind in kinds:
        for s in lengths:
            for k in KS:
                for shifted in (False, True):
                    # k runs of s seconds, and (k > 1) one run of k x s seconds
                    for runs, secs in ((k, s),) + (((1, k * s),) if k > 1 else ()):
                        seed += 1
                        keys.append((kind, s, k, runs, shifted))
                        plan.append((kind, secs, args.reps, shifted, runs, seed,
                                     args.runs_test_level))
    t0 = time.monotonic()
    with ProcessPoolExecutor(args.jobs) as ex:
        cells = dict(zip(keys, ex.map(_cell, plan), strict=True))
    lines = [table(cells, kinds, lengths), ""]
    aa = [c for c in cells.values() if not c.shifted]
    k = sum(c.tallies[s].significant for c in aa for s in (*TAIL_STATS, "median"))
    n = sum(c.tallies[s].reps for c in aa for s in (*TAIL_STATS, "median"))
    cov = sum(t.covered for c in cells.values() for t in c.tallies.values())
    shown = sum(t.with_ci for c in cells.values() for t in c.tallies.values())
    lines.append(
        f"A/A over all cells (median, p99, p99.9, p99.99, median window max): {k}/{n} "
        f"significant ({k / max(n, 1) * 100:.2f} %, 99 % upper bound "
        f"{binomial_upper(k, n) * 100:.2f} %); nominal 1 %. Shown 99 % intervals covering the "
        f"truth: {cov}/{shown} ({cov / max(shown, 1) * 100:.1f} %). {args.reps} repetitions "
        f"per cell; run-to-run F test at {args.runs_test_level:g}; "
        f"{time.monotonic() - t0:.0f} s.")
    return write_report("\n".join(lines), args.out)


if __name__ == "__main__":
    sys.exit(main())
