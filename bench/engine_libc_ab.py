# SPDX-License-Identifier: MIT
"""Is the musl engine slower than the glibc one? Two builds of rtlab-probe for this
machine, interleaved (A/B, B/A, ...): the `overhead` probe's per-iteration costs (clock
read pair, getppid round trip, timerfd arm+fire, same-CPU futex switch (half round
trip), cross-CPU wake-up; mean and p99 of each) and the `timer` probe's engine CPU time per run (its
measuring loop and reporter). Usage (as root, holding the machine lock):

    flock /run/rtlab-test-machine.lock .venv/bin/python bench/engine_libc_ab.py \
        GLIBC/rtlab-probe MUSL/rtlab-probe [--rounds 6] [--loops 20000] [--timer-s 5]

Build the two with `scripts/cross-build.sh --toolchain gnu --into A x86_64` and
`scripts/cross-build.sh --toolchain zig --into B x86_64`.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics as st
import subprocess

from rtlab.engine.jsonl import StreamCollector

TESTS = ("clock", "syscall", "timer", "switch", "wake")


def overhead(probe: str, cpu: int, loops: int) -> dict[str, tuple[float, float]]:
    """(mean ns, p99 ns) of each overhead test."""
    out = subprocess.run([probe, "overhead", "--cpus", str(cpu), "--loops", str(loops)],
                         capture_output=True, text=True, check=True).stdout
    col = StreamCollector()
    for line in out.splitlines(keepends=True):
        col.feed(line)
    got: dict[str, tuple[float, float]] = {}
    for ch in col.channels():
        name = ch.name.split("@")[0]
        s = ch.summary((99.0,))
        got[name] = (s.mean_ns or 0.0, float(s.p(99.0) or 0))
    return got


def timer_cpu(probe: str, cpu: int, seconds: int) -> float:
    """CPU seconds the engine used for a `timer` run at 1 kHz."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([probe, "timer", "--cpus", str(cpu), "--duration", f"{seconds}s",
                    "--interval", "1ms"], capture_output=True, check=True)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)


def libc_of(probe: str) -> str:
    out = subprocess.run([probe, "--version", "--json"], capture_output=True, text=True,
                         check=True).stdout
    return str(json.loads(out).get("libc", "glibc?"))


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("a", help="the first engine (e.g. glibc)")
    ap.add_argument("b", help="the second engine (e.g. musl)")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--loops", type=int, default=20000, help="iterations of each overhead test")
    ap.add_argument("--timer-s", type=int, default=5, help="seconds of each timer run")
    ap.add_argument("--cpu", type=int, default=os.cpu_count() - 1 if os.cpu_count() else 0)
    a = ap.parse_args()
    engines = {"A": a.a, "B": a.b}
    names = {k: f"{k} ({libc_of(p)}, {os.path.getsize(p):,} B)" for k, p in engines.items()}
    over: dict[str, list[dict[str, tuple[float, float]]]] = {k: [] for k in engines}
    cpu_s: dict[str, list[float]] = {k: [] for k in engines}
    for rnd in range(a.rounds):
        for k in (("A", "B") if rnd % 2 == 0 else ("B", "A")):
            over[k].append(overhead(engines[k], a.cpu, a.loops))
            cpu_s[k].append(timer_cpu(engines[k], a.cpu, a.timer_s))
    print(f"{a.rounds} rounds, interleaved; overhead --loops {a.loops} on CPU {a.cpu}; "
          f"timer {a.timer_s} s at 1 kHz. Medians over the rounds.")
    print(f"{'test':<10}" + "".join(f"{names[k]:>44}" for k in engines) + f"{'B/A mean':>10}")
    for t in TESTS:
        if not all(t in r for k in engines for r in over[k]):
            continue
        means = {k: st.median(r[t][0] for r in over[k]) for k in engines}
        p99 = {k: st.median(r[t][1] for r in over[k]) for k in engines}
        cells = "".join(f"{f'mean {means[k]:9.1f} ns, p99 {p99[k]:8.0f} ns':>44}"
                        for k in engines)
        print(f"{t:<10}{cells}{means['B'] / means['A']:>10.3f}")
    c = {k: st.median(cpu_s[k]) for k in engines}
    print(f"{'timer CPU':<10}" + "".join(f"{f'{c[k]:.3f} s per run':>44}" for k in engines)
          + f"{c['B'] / c['A']:>10.3f}")
    print("per round, timer CPU s: " + "; ".join(
        f"{k}: {', '.join(f'{x:.3f}' for x in cpu_s[k])}" for k in engines))


if __name__ == "__main__":
    main()
