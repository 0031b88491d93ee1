# SPDX-License-Identifier: MIT
"""Two builds of rtlab-probe side by side, interleaved (A/B, B/A, ...): the timer
probe's latency percentiles and the engine's CPU time per run, to see what a change to
the engine costs. Usage:

    .venv/bin/python bench/engine_ab.py OLD/rtlab-probe NEW/rtlab-probe \
        [--rounds 4] [--duration 10] [--cpu 1]

Build the old engine from an earlier commit, e.g. `git worktree add /tmp/old REV &&
meson setup /tmp/old/b -Dpython=false -Dstatic=disabled && ninja -C /tmp/old/b`.
"""

from __future__ import annotations

import argparse
import resource
import statistics as st
import subprocess

from rtlab.engine.jsonl import StreamCollector


def one_run(probe: str, cpu: int, seconds: int) -> tuple[float, float, float, float]:
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run([probe, "timer", "--cpus", str(cpu), "--duration", f"{seconds}s",
                          "--interval", "1ms"], capture_output=True, text=True,
                         check=True).stdout
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    col = StreamCollector()
    for line in out.splitlines(keepends=True):
        col.feed(line)
    s = col.channels()[0].summary((50.0, 99.0, 99.9))
    cpu_s = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return (s.p(50.0) or 0) / 1e3, (s.p(99.0) or 0) / 1e3, (s.p(99.9) or 0) / 1e3, cpu_s


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--duration", type=int, default=10, help="seconds per run")
    ap.add_argument("--cpu", type=int, default=1)
    a = ap.parse_args()
    engines = {"old": a.old, "new": a.new}
    rows: dict[str, list[tuple[float, float, float, float]]] = {k: [] for k in engines}
    for rnd in range(a.rounds):
        for name in (("old", "new") if rnd % 2 == 0 else ("new", "old")):
            rows[name].append(one_run(engines[name], a.cpu, a.duration))
    for name, r in rows.items():
        print(f"{name}: p50 {st.median(x[0] for x in r):.2f} µs, p99 "
              f"{st.median(x[1] for x in r):.2f} µs, p99.9 {st.median(x[2] for x in r):.2f} µs,"
              f" engine CPU {st.median(x[3] for x in r):.3f} s per {a.duration} s run "
              f"(medians of {len(r)} rounds; per round p50 "
              f"{', '.join(f'{x[0]:.1f}' for x in r)})")
    ratio = st.median(x[3] for x in rows["new"]) / st.median(x[3] for x in rows["old"])
    print(f"new/old engine CPU time: {ratio:.2f}")


if __name__ == "__main__":
    main()
