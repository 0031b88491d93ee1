#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Side-by-side: `rtlab-probe noise` vs `oslat` (rt-tests) on the same CPU.

Runs are interleaved (noise, oslat, noise, oslat, ...) so slow drifts of the
machine hit both tools alike. Both are read from their machine formats only:
rtlab-probe's JSON Lines and oslat's --json file (never human text).

Compared per run: max gap, gaps >= 10 us and >= 20 us per second, loops per
second. Ratios are rtlab / oslat of the medians over the rounds.

    sudo bench/noise_vs_oslat.py --probe build/engine/rtlab-probe --cpu 1 \
        --duration 10 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchlib import default_probe

from rtlab.probes.noise import summarize

LEVELS = (10_000, 20_000)


def run_rtlab(probe: str, cpu: int, seconds: int) -> dict[str, float]:
    out = subprocess.run(
        [probe, "noise", "--cpus", str(cpu), "--duration", f"{seconds}s",
         "--max-gaps", "0"],
        capture_output=True, text=True, check=True, timeout=seconds + 30)
    recs = [json.loads(line) for line in out.stdout.splitlines() if line]
    (ch,) = summarize(recs, levels=LEVELS)
    return {
        "max_us": (ch.max_gap_ns or 0) / 1000,
        "ge10_per_s": ch.per_second(10_000),
        "ge20_per_s": ch.per_second(20_000),
        "loops_per_s": ch.loops_per_s,
    }


def run_oslat(oslat: str, cpu: int, seconds: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "oslat.json"
        subprocess.run(
            [oslat, "-c", str(cpu), "-D", str(seconds), "-b", "1024", "-q",
             f"--json={path}"],
            capture_output=True, text=True, check=True, timeout=seconds + 60)
        data: dict[str, Any] = json.loads(path.read_text())
    (t,) = data["thread"].values()
    hist = {int(k): int(v) for k, v in t["histogram"].items()}
    dur = float(t["duration"])
    loops = sum(hist.values())  # one latency sample per loop
    return {
        "max_us": float(t["max"]),
        "ge10_per_s": sum(c for us, c in hist.items() if us >= 10) / dur,
        "ge20_per_s": sum(c for us, c in hist.items() if us >= 20) / dur,
        "loops_per_s": loops / dur,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--probe", default=default_probe())
    ap.add_argument("--oslat", default=shutil.which("oslat") or "oslat")
    ap.add_argument("--cpu", type=int, default=1)
    ap.add_argument("--duration", type=int, default=10, help="seconds per run")
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()

    res: dict[str, list[dict[str, float]]] = {"rtlab": [], "oslat": []}
    for i in range(a.rounds):
        res["rtlab"].append(run_rtlab(a.probe, a.cpu, a.duration))
        res["oslat"].append(run_oslat(a.oslat, a.cpu, a.duration))
        for tool in ("rtlab", "oslat"):
            r = res[tool][-1]
            print(f"round {i + 1} {tool:6s} max {r['max_us']:9.1f} us  "
                  f">=10us {r['ge10_per_s']:7.1f}/s  >=20us {r['ge20_per_s']:7.1f}/s  "
                  f"loops {r['loops_per_s'] / 1e6:6.1f} M/s")
    print(f"\nmedians over {a.rounds} rounds of {a.duration} s on CPU {a.cpu}:")
    print(f"{'metric':14s} {'rtlab':>12s} {'oslat':>12s} {'rtlab/oslat':>12s}")
    for key in ("max_us", "ge10_per_s", "ge20_per_s", "loops_per_s"):
        mr = statistics.median(r[key] for r in res["rtlab"])
        mo = statistics.median(r[key] for r in res["oslat"])
        ratio = mr / mo if mo else float("nan")
        print(f"{key:14s} {mr:12.1f} {mo:12.1f} {ratio:12.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
