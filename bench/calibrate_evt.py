#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Calibration of the extreme-value estimate (issue 13, items 2 and 4).

Simulates runs of window maxima (1-s windows) from families whose truth is known
(rtlab.analysis.evt_calibration: Gumbel, heavy GEV, bounded GEV, lognormal maxima,
a rare second mechanism, dependent windows), computes the extreme-value estimate
exactly as the report does and prints, per family and run length:

* coverage of the interval of the typical (median) worst case within 24 h, and how
  often the interval lies entirely below the truth (the unsafe miss); the same for the
  quoted model's percentiles alone (without the tail model's upper end, as before it);
* the median ratio of the interval's upper end to the truth (the price of the tail
  model) and how often the tail model sets the upper end;
* coverage of the interval of P(24-h maximum > 2 x the run's observed maximum), and
  its unsafe misses;
* the median ratio estimate / truth of both, and of the upper end of P's interval;
* how often the report says the model is not to be trusted (any failed check) and
  which checks fired; how often it states a bounded tail.

Fixed seeds: the same command prints the same table.

Usage: python3 bench/calibrate_evt.py [--reps 400] [--long-reps 150] [--markdown]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rtlab.analysis.evt import BOOT_LEVEL, LEVEL
from rtlab.analysis.evt_calibration import FAMILIES, Cell, run_cell

SIZES = (60, 900, 3600, 28_800, 86_400)
LONG = 28_800


def _dur(n: int) -> str:
    return f"{n // 3600} h" if n >= 3600 else f"{n // 60} min"


def _row(c: Cell) -> str:
    fired = ", ".join(f"{k} {c.pct(v):.1f}" for k, v in sorted(c.fired.items())) or "-"
    return (f"| {c.family} | {_dur(c.n)} | {c.reps} | {c.pct(c.worst_in):.1f} | "
            f"{c.pct(c.worst_low):.1f} | {c.pct(c.model_worst_in):.1f} | "
            f"{c.median_ratio():.3f} | {c.median_ratio('upper'):.3f} | "
            f"{c.median_ratio('model upper'):.3f} | {c.pct(c.tail_upper):.0f} | "
            f"{c.pct(c.p_in):.1f} | {c.pct(c.p_low):.1f} | {c.pct(c.model_p_in):.1f} | "
            f"{c.median_ratio('p'):.3g} | {c.median_ratio('p upper'):.3g} | "
            f"{100 - c.pct(c.trusted):.1f} | {fired} | {c.pct(c.bounded):.1f} |")


HEADER = ("| family | run | runs | worst-case coverage % | unsafe misses % | "
          "model alone: coverage % | estimate/truth | upper end/truth | model alone: "
          "upper end/truth | upper end from the tail model % | P coverage % | "
          "unsafe misses % | model alone: P coverage % | P estimate/truth | "
          "P upper end/truth | "
          "\"do not trust\" % | checks fired (% of runs) | bounded tail stated % |\n"
          "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=400, help="runs per cell up to 1 h")
    ap.add_argument("--long-reps", type=int, default=150, help="runs per cell of 8 and 24 h")
    ap.add_argument("--families", default=",".join(FAMILIES))
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)),
                    help="run lengths in 1-s windows")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    fams = args.families.split(",")
    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"stated level {LEVEL:.0%}, bootstrap percentiles {BOOT_LEVEL:.0%} (upper end: the "
          "higher of the quoted model's and the tail model's); truth: median of the 24-h "
          "maximum, P(24-h maximum > 2 x observed maximum)\n")
    print(HEADER)
    t0 = time.monotonic()
    for fi, fam in enumerate(fams):
        for si, n in enumerate(sizes):
            reps = args.long_reps if n >= LONG else args.reps
            cell = run_cell(fam, n, reps, args.seed + 1000 * fi + 17 * si)
            print(_row(cell), flush=True)
    print(f"\n{time.monotonic() - t0:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
