#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Calibration of `rtlab compare`: false-positive rate, power and interval coverage of
every comparison it reports, on simulated runs whose truth is known
(rtlab/analysis/calibrate.py: independent, AR(1) phi 0.99 and 0.999 on log-latency,
3-s bursts; 1 kHz, 1 s windows, the engine's histograms and per-window histograms).

    .venv/bin/python bench/calibrate_compare.py [--reps-min 200] [--reps-hour 40] \\
        [--jobs 2] [--out bench/out/calibrate_compare.md]

A/A: both configurations from the same process (every "significant" is a false
positive; nominal 1 %), 1 min and 1 h, one and two runs per configuration. A/B: B's
tail +10 % (p99 ... max), median unchanged (power). The table goes into docs/report.md
and bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchlib import write_report

from rtlab.analysis.calibrate import KINDS, Cell, binomial_upper, run_cell, table


def _cell(args: tuple[str, int, int, bool, int, int]) -> Cell:
    kind, seconds, reps, shifted, runs, seed = args
    return run_cell(kind, seconds, reps, shifted=shifted, runs=runs, seed=seed)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps-min", type=int, default=200, help="repetitions of 1-min cells")
    ap.add_argument("--reps-hour", type=int, default=40, help="repetitions of 1-h cells")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", default=str(Path(__file__).parent / "out" /
                                         "calibrate_compare.md"))
    args = ap.parse_args()
    plan = []
    for i, kind in enumerate(KINDS):
        plan += [(kind, 60, args.reps_min, False, 1, 100 + i),
                 (kind, 60, args.reps_min // 2, False, 2, 200 + i),
                 (kind, 3600, args.reps_hour, False, 1, 300 + i),
                 (kind, 3600, max(1, args.reps_hour // 2), False, 2, 500 + i),
                 (kind, 3600, args.reps_hour, True, 1, 400 + i)]
    t0 = time.monotonic()
    with ProcessPoolExecutor(args.jobs) as ex:
        cells = list(ex.map(_cell, plan))
    lines = [table(cells), ""]
    aa = [c for c in cells if not c.shifted]
    k = sum(t.significant for c in aa for t in c.tallies.values())
    n = sum(t.reps for c in aa for t in c.tallies.values())
    lines.append(f"A/A over all cells and statistics: {k}/{n} significant "
                 f"({k / n * 100:.2f} %, 99 % upper bound {binomial_upper(k, n) * 100:.2f} %); "
                 f"nominal 1 %.")
    cov = sum(t.covered for c in cells for t in c.tallies.values())
    shown = sum(t.with_ci for c in cells for t in c.tallies.values())
    low = min(((t.coverage, c.kind, c.seconds, c.runs, s) for c in cells
              for s, t in c.tallies.items() if t.with_ci >= 20), default=None)
    if not shown or low is None:
        low = (math.nan, "-", 0, 0, "-")
    lines.append(f"Shown 99 % intervals covering the truth: {cov}/{shown} "
                 f"({cov / max(shown, 1) * 100:.1f} %); lowest cell with >= 20 intervals: "
                 f"{low[0] * 100:.1f} % ({low[1]}, {low[2]} s, {low[3]} run(s), {low[4]}). "
                 f"{time.monotonic() - t0:.0f} s.")
    return write_report("\n".join(lines), args.out)


if __name__ == "__main__":
    sys.exit(main())
