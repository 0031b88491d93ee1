#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Latency cost of `rtlab run --trace`: rtlab-probe timer with tracing off vs on.

Interleaved rounds (off, on, off, on, ...; the order flips every round so drift
does not favour one side) of the timer probe on one CPU, SCHED_FIFO 99, 1 ms
interval, with the same Recorder the runner uses (all default events, reader on
a housekeeping CPU) around the "on" runs. Reports p50/p99/p99.9/max of each run
and the on/off ratio of the medians over rounds, plus trace pages/s and lost
events. On a noisy VM the run-to-run spread is the thing to compare against.

Usage (as root, after scripts/setup.sh):
    .venv/bin/python bench/trace_overhead.py --rounds 3 --duration 10 --cpu 1
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from benchlib import channel_percentile  # noqa: E402

from rtlab.engine.locate import find_probe  # noqa: E402
from rtlab.runner.tracing import CAPTURE_LIMIT_MB  # noqa: E402
from rtlab.trace.tracefs import Recorder  # noqa: E402

PCTS = (50.0, 99.0, 99.9)


def run_probe(probe: str, cpu: int, duration_s: float) -> dict[str, float]:
    out = subprocess.run([probe, "timer", "--cpus", str(cpu), "--interval", "1ms",
                          "--duration", f"{duration_s}s"], capture_output=True, text=True,
                         check=False)
    result = next((json.loads(ln) for ln in reversed(out.stdout.splitlines())
                   if ln.startswith("{") and '"type":"result"' in ln.replace(" ", "")), None)
    if result is None:
        raise SystemExit(f"rtlab-probe failed: {out.stderr.strip()}")
    ch = result["channels"][0]
    vals = {p: channel_percentile(ch, p) for p in PCTS}
    row = {f"p{p:g}": float("nan") if v is None else v / 1e3 for p, v in vals.items()}
    row["max"] = ch["max_ns"] / 1e3
    row["samples"] = ch["samples"]
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=float, default=10.0, help="seconds per run")
    ap.add_argument("--cpu", type=int, default=1)
    ap.add_argument("--buffer-kb", type=int, default=4096)
    args = ap.parse_args()
    probe = str(find_probe())
    online = sorted(os.sched_getaffinity(0))
    reader = [c for c in online if c != args.cpu][:1] or None
    rows: dict[str, list[dict[str, float]]] = {"off": [], "on": []}
    print(f"timer probe, CPU {args.cpu}, FIFO 99, 1 ms, {args.duration:g} s per run, "
          f"reader CPU {reader}")
    print(f"{'run':<10}{'p50 µs':>10}{'p99 µs':>10}{'p99.9 µs':>10}{'max µs':>10}  trace")
    for r in range(args.rounds):
        for mode in (("off", "on") if r % 2 == 0 else ("on", "off")):
            extra = ""
            if mode == "on":
                with Recorder([args.cpu], reader_cpus=reader, buffer_kb=args.buffer_kb,
                              memory_limit_mb=CAPTURE_LIMIT_MB) as rec:
                    t0 = time.monotonic()
                    row = run_probe(probe, args.cpu, args.duration)
                    rec.stop()
                    pages = sum(len(p) for p in rec.capture().pages.values())
                    lost = sum(rec.lost_events().values())
                    extra = f"{pages / (time.monotonic() - t0):.0f} pages/s, {lost} lost"
            else:
                row = run_probe(probe, args.cpu, args.duration)
            rows[mode].append(row)
            print(f"{mode + ' #' + str(r + 1):<10}{row['p50']:>10.1f}{row['p99']:>10.1f}"
                  f"{row['p99.9']:>10.1f}{row['max']:>10.0f}  {extra}", flush=True)
    print("median over rounds, on/off ratio:")
    for key in ("p50", "p99", "p99.9", "max"):
        off = statistics.median(x[key] for x in rows["off"])
        on = statistics.median(x[key] for x in rows["on"])
        print(f"  {key:<6} off {off:8.1f} µs  on {on:8.1f} µs  ratio {on / off:5.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
