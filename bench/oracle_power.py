#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""How much power any valid test could have: the oracle test of each statistic of
`rtlab compare`, next to rtlab's own, on simulated 1-h runs with a +10 % tail shift
(rtlab/analysis/calibrate.py: independent, AR(1) phi 0.99 and 0.999, 3-s bursts).

    .venv/bin/python bench/oracle_power.py [--reps 100] [--seconds 3600] \\
        [--out bench/out/oracle_power.md]

Per repetition three runs: A, B (the same process) and B' = B with its tail shifted
(every sample above the process's p90 x1.1). (A, B) is an A/A pair, (A, B') an A/B pair,
both compared with `rtlab compare` (the A/B pair reuses B's samples; each pair alone
has the right distribution). For every statistic D = log(estimate of B / estimate of
A). The *oracle* knows the null distribution of D (from the A/A pairs) and rejects
when |D - m| > c, c its 99.5 % point: the best level-1 % test built on that estimate.
With ~100 A/A pairs the 99.5 % point is taken as 2.576 sd (normal; the check column
says how many A/A pairs fall outside it), and its power is Phi(|shift|/sd - 2.576)
(shift: mean D of A/B minus A/A), with a 90 % range from the uncertainty of sd
(chi-square). "with >= 5 %": the oracle also held to rtlab's rule that a change under
5 % is not called. `se/sd`: rtlab's standard error of D (root mean square over the
A/A pairs) over the true sd of D; > 1 means rtlab's intervals are wider than needed.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchlib import write_report

from rtlab.analysis.calibrate import (
    KINDS,
    STATS,
    run_from_samples,
    simulate,
    simulated_shape,
    tail_shift,
    true_ratio,
)
from rtlab.analysis.compare import _estimate, compare_pair
from rtlab.analysis.compare_stats import Estimate, mean_estimate, window_max_estimate
from rtlab.analysis.configs import Config, build_configs

Z995 = 2.5758293035489004


def phi(x: float) -> float:
    return 0.5 * math.erfc(-x / math.sqrt(2))


def chi2_ppf(p: float, df: int) -> float:
    """Wilson-Hilferty approximation of the chi-square quantile."""
    z = math.sqrt(2) * _erfinv(2 * p - 1)
    a = 2 / (9 * df)
    return df * (1 - a + z * math.sqrt(a)) ** 3


def _erfinv(y: float) -> float:
    lo, hi = -6.0, 6.0
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        if math.erf(mid) < y:
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)


def estimates(config: Config) -> dict[str, Estimate]:
    """rtlab's estimate (value, se of its log) of every statistic of a configuration."""
    return {"median": _estimate(config, 50.0),
            "mean": mean_estimate(config.units, config.value("avg")),
            "p99": _estimate(config, 99.0), "p99.9": _estimate(config, 99.9),
            "p99.99": _estimate(config, 99.99),
            "max (median window max)": window_max_estimate(config.units)}


def run_kind(kind: str, seconds: int, reps: int, seed: int) -> dict[str, dict[str, list]]:
    rng = np.random.default_rng(seed)
    rec: dict[str, dict[str, list]] = {s: {k: [] for k in ("d_aa", "d_ab", "se_aa", "sig_aa",
                                                          "sig_ab")} for s in STATS}
    for rep in range(reps):
        xa = simulate(kind, seconds, rng)
        xb = simulate(kind, seconds, rng)
        runs = [run_from_samples(f"A{rep}", xa, "A"), run_from_samples(f"B{rep}", xb, "B"),
                run_from_samples(f"S{rep}", tail_shift(xb), "S")]
        a, b, s = build_configs(runs, "kernel", shape_of=simulated_shape)
        ea, eb = estimates(a), estimates(b)
        for pair, other in (("aa", b), ("ab", s)):
            for ch in compare_pair(a, other).changes:
                if ch.what not in rec:
                    continue
                r = rec[ch.what]
                r[f"d_{pair}"].append(math.log(ch.b_ns / ch.a_ns))
                r[f"sig_{pair}"].append(bool(ch.significant))
        for stat in STATS:
            sa, sb = ea[stat].se_log, eb[stat].se_log
            rec[stat]["se_aa"].append(math.hypot(sa, sb) if sa and sb else math.nan)
    return rec


def oracle_row(kind: str, stat: str, r: dict[str, list]) -> dict[str, object]:
    d_aa, d_ab = np.asarray(r["d_aa"]), np.asarray(r["d_ab"])
    n = len(d_aa)
    m, sd = float(d_aa.mean()), float(d_aa.std(ddof=1))
    shift = float(d_ab.mean()) - m
    se = np.asarray(r["se_aa"])
    se = se[np.isfinite(se)]
    # sd's 90 % range (chi-square, n - 1 df) -> the power's range
    sd_lo = sd * math.sqrt((n - 1) / chi2_ppf(0.95, n - 1))
    sd_hi = sd * math.sqrt((n - 1) / chi2_ppf(0.05, n - 1))

    def power(s: float, floor: float = 0.0) -> float:
        if s <= 0:
            return 1.0 if abs(shift) > floor else 0.0
        c = max(Z995 * s, floor)
        return phi((abs(shift) - c) / s) + phi((-abs(shift) - c) / s)

    f5 = math.log(1.05)
    c = Z995 * sd
    return {
        "kind": kind, "stat": stat, "n": n, "sd": sd, "shift": shift,
        "truth": true_ratio(stat, True, kind),
        "aa_out": int((np.abs(d_aa - m) > c).sum()),
        "ab_out": int((np.abs(d_ab - m) > c).sum()),
        "power": power(sd), "power_lo": power(sd_hi), "power_hi": power(sd_lo),
        "power5": power(sd, f5),
        "se_ratio": float(math.sqrt(np.mean(se ** 2)) / sd) if len(se) and sd > 0 else math.nan,
        "rtlab_ab": sum(r["sig_ab"]), "rtlab_aa": sum(r["sig_aa"]),
    }


def table(rows: list[dict[str, object]]) -> str:
    out = ["| data | statistic | true ratio | sd of D (A/A) | shift (A/B) | oracle power "
           "(90 % range) | oracle with ≥ 5 % | A/A outside (check) | rtlab power | rtlab A/A "
           "| rtlab se/sd |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        n = r["n"]
        truth = r["truth"]
        out.append(
            f"| {r['kind']} | {r['stat']} | {'?' if truth is None else f'{truth:g}'} "
            f"| {r['sd'] * 100:.2f} % | {r['shift'] * 100:+.1f} % "
            f"| {r['power'] * 100:.0f} % ({r['power_lo'] * 100:.0f}–{r['power_hi'] * 100:.0f}) "
            f"| {r['power5'] * 100:.0f} % | {r['aa_out']}/{n} "
            f"| {r['rtlab_ab']}/{n} ({r['rtlab_ab'] / n * 100:.0f} %) | {r['rtlab_aa']}/{n} "
            f"| {r['se_ratio']:.2f} |")
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=100, help="repetitions per kind")
    ap.add_argument("--seconds", type=int, default=3600)
    ap.add_argument("--kinds", default=",".join(KINDS))
    ap.add_argument("--seed", type=int, default=700)
    ap.add_argument("--out", default=str(Path(__file__).parent / "out" / "oracle_power.md"))
    args = ap.parse_args()
    t0 = time.monotonic()
    rows = []
    for i, kind in enumerate(args.kinds.split(",")):
        rec = run_kind(kind, args.seconds, args.reps, args.seed + i)
        rows += [oracle_row(kind, stat, rec[stat]) for stat in STATS]
        print(f"{kind}: {time.monotonic() - t0:.0f} s", file=sys.stderr, flush=True)
    text = (table(rows) + f"\n\n{args.reps} repetitions per kind, {args.seconds} s runs; "
            f"{time.monotonic() - t0:.0f} s.")
    return write_report(text, args.out)


if __name__ == "__main__":
    sys.exit(main())
