#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Spike attribution time on a busy CPU: the replay from 1 ms before each deadline
(with decoded pages reused between windows) against the replay of each whole window.

Records one capture: rtlab-probe timer on --cpu (FIFO 99, 1 ms, --samples) while a
stress-ng timerfd storm (2000 timers expiring together 100 times a second) runs on the
same CPU, recorded by the engine itself as the runner has it record (`--trace-dir`, reader
on another CPU; kernel symbols named from this machine's kallsyms). Then attributes
all spikes above --threshold in three ways, interleaved over --rounds (order rotated
each round), each on a freshly loaded capture:

  lead      what rtlab does: replay from D - 1 ms, pages reused
  full      replay of every whole window (D - 20 ms .. W + 2 ms), pages reused
  previous  the code before this change: whole windows, every page decoded per window

and checks that `lead` and `full` give the same verdicts (every spike's components, in
the same order); records whose notes alone differ (the count of context switches inferred
from event pids, which depends on where a replay starts) are counted. There is no peer tool
to compare with: rtla's timerlat auto-analysis needs the timerlat tracer (absent here)
and analyses only the one worst sample.

Usage (as root, after scripts/setup.sh):
    .venv/bin/python bench/attribution_speed.py --duration 2 --rounds 3 --cpu 1
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from rtlab.engine.locate import find_probe  # noqa: E402
from rtlab.runner.tracing import CAPTURE_LIMIT_MB  # noqa: E402
from rtlab.trace.attribution import attribute_run, is_virtualized  # noqa: E402
from rtlab.trace.capture import TraceCapture  # noqa: E402
from rtlab.trace.ringbuf import Event  # noqa: E402
from rtlab.trace.symbols import LocalSymbols  # noqa: E402
from rtlab.trace.tracefs import TraceFS  # noqa: E402


class _NoReuse(TraceCapture):
    """The window of the previous code: every page of a window decoded again."""

    def window(self, cpu: int, t0: int, t1: int) -> list[Event]:
        self._recent.clear()
        return super().window(cpu, t0, t1)


def record(out: Path, cpu: int, duration_s: float) -> dict[str, Any]:
    probe = str(find_probe())
    reader = next((c for c in sorted(os.sched_getaffinity(0)) if c != cpu), None)
    storm = subprocess.Popen(["taskset", "-c", str(cpu), "stress-ng", "--quiet", "--timerfd",
                              "1", "--timerfd-fds", "2000", "--timerfd-freq", "100",
                              "--timeout", "600"])
    try:
        time.sleep(0.5)
        cmd = [probe, "timer", "--cpus", str(cpu), "--policy", "fifo", "--priority", "99",
               "--interval", "1ms", "--duration", f"{duration_s}s", "--samples",
               str(out / "samples"), "--trace-dir", str(out / "capture"),
               "--trace-limit-mb", str(CAPTURE_LIMIT_MB)]
        if reader is not None:
            cmd += ["--trace-reader-cpu", str(reader)]
        run = subprocess.run(cmd, capture_output=True, text=True, check=False)
    finally:
        storm.terminate()
        storm.wait(timeout=10)
    header = next((json.loads(ln) for ln in run.stdout.splitlines()
                   if '"type":"header"' in ln.replace(" ", "")), None)
    if run.returncode != 0 or header is None:
        raise SystemExit(f"rtlab-probe failed: {run.stderr.strip()}")
    cap = TraceCapture.load(out / "capture")
    cap.symbols = LocalSymbols()  # as the runner keeps them: the names the capture uses
    cap.save(out / "capture", pages=False)
    threads = header["effective"]["threads"]
    return {"start": header["start_monotonic_ns"], "cpus": [t["cpu"] for t in threads],
            "tids": [t["tid"] for t in threads], "events": len(cap.events(cpu))}


def attribute(kind: str, out: Path, info: dict[str, Any], threshold_ns: int
              ) -> tuple[float, list[dict[str, object]]]:
    cap = (_NoReuse if kind == "previous" else TraceCapture).load(out / "capture")
    t0 = time.perf_counter()
    causes = attribute_run(cap, out / "samples", info["start"], threshold_ns=threshold_ns,
                           channel_cpus=info["cpus"], channel_tids=info["tids"],
                           at_is_deadline=False, virtualized=is_virtualized(),
                           lead_ns=None if kind != "lead" else 1_000_000)
    return time.perf_counter() - t0, [c.to_dict() for c in causes]


def _verdicts(recs: list[dict[str, object]]) -> list[object]:
    return [(r["cpu"], r["latency_ns"], r["components"]) for r in recs]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=float, default=2.0, help="seconds recorded")
    ap.add_argument("--cpu", type=int, default=1)
    ap.add_argument("--threshold-us", type=int, default=100)
    args = ap.parse_args()
    TraceFS.find_or_mount()
    with tempfile.TemporaryDirectory(prefix="rtlab-attr-bench-") as tmp:
        out = Path(tmp)
        info = record(out, args.cpu, args.duration)
        print(f"recorded {args.duration:g} s on CPU {args.cpu}: {info['events']} trace events")
        times: dict[str, list[float]] = {"lead": [], "full": [], "previous": []}
        kinds = list(times)
        ref: list[dict[str, object]] | None = None
        notes_only = 0
        for r in range(args.rounds):
            order = kinds[r % 3:] + kinds[:r % 3]
            for kind in order:
                dt, recs = attribute(kind, out, info, args.threshold_us * 1000)
                times[kind].append(dt)
                if kind != "previous":
                    if ref is not None and _verdicts(recs) != _verdicts(ref):
                        raise SystemExit(f"round {r + 1}: {kind} gave other verdicts")
                    if ref is not None:
                        notes_only = max(notes_only, sum(a != b for a, b in zip(recs, ref,
                                                                                strict=True)))
                    ref = recs
                print(f"round {r + 1} {kind:<9}{dt:8.2f} s  {len(recs)} spikes", flush=True)
        lead = statistics.median(times["lead"])
        for kind in kinds:
            m = statistics.median(times[kind])
            print(f"median {kind:<9}{m:8.2f} s  ({m / lead:5.2f}x lead)")
        print("lead and full gave the same verdicts in every round; records that differ in "
              f"their notes only: {notes_only} of {len(ref or [])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
