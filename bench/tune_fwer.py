# SPDX-License-Identifier: MIT
"""How often does `rtlab tune` call a knob without effect "helps"?  And what does a
tune cost against measuring one knob at a time with the same confidence?

Simulated tunes (rtlab.tune.simulate.SimBench: blocks of simulated latency whose tail
each knob scales by a factor known by construction), run through the tune's own
designed experiment (rtlab.tune.search.Tuner):

* **family-wise error**: every knob inert (factor 1.0), k knobs, two statistics; the
  share of tunes in which any knob comes out "helps" (the goal: at most
  rtlab.tune.design.FAMILY_ALPHA = 5 %, whatever k), with a 95 % upper bound;
* **power and cost**: one knob with a tail effect (e.g. 0.8x) among inert ones; the
  share of tunes that call it "helps", and the blocks the tune measured against the
  blocks a one-knob-at-a-time procedure needs (each knob: one baseline run and one knob
  run, back to back, not interleaved, doubling their length until the comparison at the
  same alpha decides or the same number of looks is spent).

    nice -n 19 .venv/bin/python bench/tune_fwer.py --tunes 200 --knobs 1,4,10
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rtlab.analysis.calibrate import run_from_samples, simulate, simulated_shape
from rtlab.tune import state as tstate
from rtlab.tune.design import MAX_LOOKS, judge, knob_verdict, screening_alpha
from rtlab.tune.knobs import CATALOGUE
from rtlab.tune.search import Tuner
from rtlab.tune.simulate import SimBench

STATS = ("p99", "max")
RUNTIME = [k.name for k in CATALOGUE if k.kind == "runtime"]


def upper95(k: int, n: int) -> float:
    """One-sided 95 % upper bound of a binomial share (Wilson)."""
    if n == 0:
        return math.nan
    z = 1.645
    p = k / n
    c = p + z * z / (2 * n)
    r = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return (c + r) / (1 + z * z / n)


def one_tune(knobs: list[str], effects: dict[str, float], seed: int, kind: str,
             seconds: int, pairs: int) -> dict:
    state = tstate.new(tune_id=f"sim-{seed}", target=None, scenario="sim", stats=STATS,
                       budget_s=1e12, block_s=seconds, block_cost_s=seconds, pairs=pairs,
                       confirm_pairs=2 * pairs, candidates=knobs, skipped={}, proposed={},
                       not_tested=[], user=[1], system=[0], slo=None, store=None,
                       reboot=None, command_line=[])
    bench = SimBench(effects, seconds=seconds, kind=kind, seed=seed, drift=0.002)
    return Tuner(state, bench).run()


def one_at_a_time(knobs: list[str], effects: dict[str, float], seed: int, kind: str,
                  seconds: int, pairs: int) -> tuple[int, dict[str, str]]:
    """Blocks (of `seconds`) the naive procedure measures, and its verdicts."""
    import numpy as np

    alpha = screening_alpha(len(knobs), len(STATS))
    blocks = 0
    verdicts = {}
    rng_seed = 10_000 + seed
    for i, k in enumerate(knobs):
        length = pairs * seconds  # one run per side, as long as the tune's first look
        for _look in range(MAX_LOOKS):
            rng = np.random.default_rng([rng_seed, i, _look])
            a = simulate(kind, length, rng)
            b = simulate(kind, length, rng).astype(float)
            med = float(np.median(b))
            b = np.where(b > med, b * effects.get(k, 1.0), b).astype(np.int64)
            blocks += 2 * length // seconds
            ra = run_from_samples(f"a{i}", a, "a")
            rb = run_from_samples(f"b{i}", b, "b")
            res = judge([ra], [rb], STATS, alpha, simulated_shape)
            v = knob_verdict([r.verdict for r in res.values()])
            verdicts[k] = v
            if all(r.verdict != "inconclusive" for r in res.values()):
                break
            length *= 2
    return blocks, verdicts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tunes", type=int, default=200)
    ap.add_argument("--knobs", default="1,4,10")
    ap.add_argument("--kinds", default="independent,ar1-0.9,bursts")
    ap.add_argument("--seconds", type=int, default=10, help="simulated block length")
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--effect", type=float, default=0.8,
                    help="the one active knob's tail factor in the power/cost part")
    ap.add_argument("--power-tunes", type=int, default=50)
    args = ap.parse_args()
    print(f"# rtlab tune: family-wise error and cost (simulated, {args.seconds} s blocks, "
          f"{args.pairs} pairs at the first look, statistics {', '.join(STATS)})\n")
    print("| data | knobs | tunes | tunes calling an inert knob helps | 95 % upper bound |"
          " blocks per tune |")
    print("|---|---|---|---|---|---|")
    t0 = time.time()
    for kind in args.kinds.split(","):
        for k in (int(x) for x in args.knobs.split(",")):
            knobs = RUNTIME[:k]
            bad = 0
            blocks = 0
            for seed in range(args.tunes):
                s = one_tune(knobs, {}, seed, kind, args.seconds, args.pairs)
                if any(e["verdict"] == "helps" for e in s["experiments"]
                       if e["purpose"] == "screen"):
                    bad += 1
                blocks += sum(len(e["blocks"]) for e in s["experiments"])
            print(f"| {kind} | {k} | {args.tunes} | {bad} ({100 * bad / args.tunes:.1f} %) | "
                  f"{100 * upper95(bad, args.tunes):.1f} % | {blocks / args.tunes:.1f} |",
                  flush=True)
    print(f"\n## power and cost: one knob at {args.effect}x on the tail among inert ones\n")
    print("| data | knobs | tunes | tune calls it helps | one-at-a-time calls it helps |"
          " tune blocks (screening) | one-at-a-time blocks | ratio |")
    print("|---|---|---|---|---|---|---|---|")
    for kind in args.kinds.split(","):
        for k in (int(x) for x in args.knobs.split(",")):
            knobs = RUNTIME[:k]
            effects = {knobs[0]: args.effect}
            hits = naive_hits = 0
            tb = nb = 0
            for seed in range(args.power_tunes):
                s = one_tune(knobs, effects, 50_000 + seed, kind, args.seconds, args.pairs)
                scr = [e for e in s["experiments"] if e["purpose"] == "screen"]
                hits += any(e["knob"] == knobs[0] and e["verdict"] == "helps" for e in scr)
                tb += sum(len(e["blocks"]) for e in scr)
                blocks, verdicts = one_at_a_time(knobs, effects, seed, kind, args.seconds,
                                                 args.pairs)
                nb += blocks
                naive_hits += verdicts[knobs[0]] == "helps"
            n = args.power_tunes
            print(f"| {kind} | {k} | {n} | {100 * hits / n:.0f} % | {100 * naive_hits / n:.0f} % "
                  f"| {tb / n:.1f} | {nb / n:.1f} | {tb / max(nb, 1):.2f} |", flush=True)
    print(f"\n({time.time() - t0:.0f} s)")


if __name__ == "__main__":
    main()
