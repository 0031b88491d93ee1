#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Side-by-side: `rtlab-probe overhead` vs `perf bench` (Debian's linux-perf).

The lmbench-style peers of the overhead probe: `perf bench syscall basic`
(getppid in a loop: cost of one system call) and `perf bench sched pipe -T`
(two threads ping-ponging over pipes: one round trip = two context switches
plus pipe I/O). Both run pinned to the same CPU as the probe, interleaved in
rounds; perf's `--format=simple` machine output is read (never its text).
perf reports a mean per operation; rtlab reports distributions, of which the
median and p99 are shown. For the context switch rtlab's `switch` channel is
half a futex round trip, so perf's pipe round trip is halved for comparison.

Usage (as root, after `make setup`):
    .venv/bin/python bench/overhead_vs_perf.py --rounds 3 --cpu 1
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

from benchlib import channel_percentile, default_probe, lacks


def run_rtlab(probe: str, cpu: int, loops: int) -> dict[str, float]:
    r = subprocess.run([probe, "overhead", "--cpus", str(cpu), "--loops", str(loops)],
                       capture_output=True, text=True, check=True, timeout=300)
    res = [json.loads(x) for x in r.stdout.splitlines() if x][-1]
    out: dict[str, float] = {}
    for ch in res["channels"]:
        test = ch["name"].split("@")[0]
        for p in (50.0, 99.0):
            v = channel_percentile(ch, p)
            out[f"{test}.p{p:g}"] = float("nan") if v is None else v
    return out


def perf_simple(cpu: int, *args: str) -> float:
    """`perf bench --format=simple ...`: the time per operation it prints, in ns."""
    r = subprocess.run(["taskset", "-c", str(cpu), "perf", "bench", "--format=simple", *args],
                       capture_output=True, text=True, check=True, timeout=300)
    lines = [ln for ln in r.stdout.splitlines() if ln.strip() and not ln.startswith("#")]
    total_s = float(lines[-1].split()[0])  # simple format: total seconds
    loops = int(args[args.index("-l") + 1])
    return total_s * 1e9 / loops


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--cpu", type=int, default=1)
    ap.add_argument("--loops", type=int, default=20000, help="rtlab iterations per test")
    ap.add_argument("--probe", default=default_probe())
    a = ap.parse_args()
    if lacks(root="run as root (real SCHED_FIFO)",
             tools={"perf": "needs perf (apt-get install linux-perf)"}):
        return 4
    rows: dict[str, list[float]] = {}
    for r in range(a.rounds):
        order = ("rtlab", "perf") if r % 2 == 0 else ("perf", "rtlab")
        for tool in order:
            if tool == "rtlab":
                for k, v in run_rtlab(a.probe, a.cpu, a.loops).items():
                    rows.setdefault(f"rtlab {k}", []).append(v)
            else:
                rows.setdefault("perf syscall", []).append(
                    perf_simple(a.cpu, "syscall", "basic", "-l", "2000000"))
                rows.setdefault("perf pipe/2", []).append(
                    perf_simple(a.cpu, "sched", "pipe", "-T", "-l", "200000") / 2)
        print(f"round {r} done", flush=True)
    med = {k: statistics.median(v) for k, v in rows.items()}
    print("\n| cost (ns, median over rounds) | rtlab p50 | rtlab p99 | perf (mean) | "
          "rtlab p50 / perf |")
    print("|---|---|---|---|---|")
    for test, peer in (("syscall", "perf syscall"), ("switch", "perf pipe/2")):
        p50, p99, pv = med[f"rtlab {test}.p50"], med[f"rtlab {test}.p99"], med[peer]
        print(f"| {test} | {p50:.0f} | {p99:.0f} | {pv:.0f} | {p50 / pv:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
