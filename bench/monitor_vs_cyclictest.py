#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""How much CPU `rtlab monitor` takes from the CPU it measures, against cyclictest at the
same interval and priority (issue 15, item 5).

    .venv/bin/python bench/monitor_vs_cyclictest.py [--cpu 1] [--interval 1ms] \\
        [--duration 20] [--rounds 5] [--out bench/out/monitor_vs_cyclictest.md]

Rounds interleave three cases in a rotating order: nothing (the idle baseline of that
CPU), `rtlab monitor --cpus C` (with its exporter listening) and `cyclictest -t1 -a C`.
For each, the measured CPU's busy time comes from /proc/stat (user, nice, system, irq,
softirq, steal) over the steady part of the run (after a settling second, before the
end), so start-up work (imports, engine copy) is left out; the figure is busy time
per second of run minus the same round's idle baseline: what the tool took from the
CPU it measures. The tools' own CPU time (all their threads, wherever they ran) is
shown beside it.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchlib import write_report

from rtlab.scenario.units import parse_duration

SETTLE_S = 2.0


def cpu_busy_ticks(cpu: int) -> int:
    for line in Path("/proc/stat").read_text().splitlines():
        f = line.split()
        if f[0] == f"cpu{cpu}":
            user, nice, system, _idle, _iowait, irq, softirq, steal = map(int, f[1:9])
            return user + nice + system + irq + softirq + steal
    raise SystemExit(f"no cpu{cpu} in /proc/stat")


def tree(pid: int) -> list[int]:
    """A process and its live descendants (children of any of its threads)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for task in Path(f"/proc/{p}/task").iterdir():
                todo += [int(x) for x in (task / "children").read_text().split()]
        except OSError:
            continue
    return out


def tree_cpu_s(pid: int) -> float:
    """CPU time (user + system) of a process and its live descendants, all threads."""
    total = 0
    for p in tree(pid):
        try:
            f = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(f[11]) + int(f[12])
    return total / os.sysconf("SC_CLK_TCK")


def measuring(pid: int) -> bool:
    """The tool's measuring process runs (the monitor's engine, or cyclictest)."""
    for p in tree(pid):
        try:
            if Path(f"/proc/{p}/comm").read_text().strip() in ("rtlab-probe", "cyclictest"):
                return True
        except OSError:
            continue
    return False


def measure(cmd: list[str] | None, cpu: int, duration_s: float) -> tuple[float, float]:
    """(busy s per s of the CPU, the tool's CPU s per s) over the steady part."""
    proc = None
    if cmd is not None:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)
    t_end = time.monotonic() + 60
    while proc is not None and not measuring(proc.pid) and time.monotonic() < t_end:
        time.sleep(0.1)
    time.sleep(SETTLE_S)
    tck = os.sysconf("SC_CLK_TCK")
    b0, c0, t0 = cpu_busy_ticks(cpu), tree_cpu_s(proc.pid) if proc else 0.0, time.monotonic()
    time.sleep(duration_s)
    b1, c1, t1 = cpu_busy_ticks(cpu), tree_cpu_s(proc.pid) if proc else 0.0, time.monotonic()
    if proc is not None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    span = t1 - t0
    return (b1 - b0) / tck / span, (c1 - c0) / span


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cpu", type=int, default=1)
    ap.add_argument("--interval", default="1ms")
    ap.add_argument("--priority", type=int, default=80)
    ap.add_argument("--duration", type=float, default=20.0, help="steady seconds per case")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", default=str(Path(__file__).parent / "out" /
                                         "monitor_vs_cyclictest.md"))
    args = ap.parse_args()
    if shutil.which("cyclictest") is None:
        raise SystemExit("cyclictest not found (Debian package rt-tests)")
    us = parse_duration(args.interval) // 1000
    tmp = Path(tempfile.mkdtemp(prefix="rtlab-steal-"))
    run_s = int(args.duration + SETTLE_S + 65)  # ended by SIGINT after the measurement
    cases = {
        "idle": None,
        "rtlab monitor": [sys.executable, "-m", "rtlab", "monitor", "--cpus", str(args.cpu),
                          "--interval", args.interval, "--priority", str(args.priority),
                          "--segment", "1h", "--listen", "127.0.0.1:0", "--quiet",
                          "--state-dir", str(tmp / "state"), "--store", str(tmp / "s.db"),
                          "--duration", f"{run_s}s"],
        "cyclictest": ["cyclictest", "-q", "-m", "-t1", "-a", str(args.cpu), "-i", str(us),
                       "-p", str(args.priority), "-D", f"{run_s}s"],
    }
    busy: dict[str, list[float]] = {k: [] for k in cases}
    own: dict[str, list[float]] = {k: [] for k in cases}
    names = list(cases)
    for r in range(args.rounds):
        order = names[r % 3:] + names[:r % 3]
        for name in order:
            b, c = measure(cases[name], args.cpu, args.duration)
            busy[name].append(b)
            own[name].append(c)
    base = busy["idle"]
    rows = [f"| case | CPU{args.cpu} busy, % (median, range) | minus idle, % per round "
            "(median) | the tool's own CPU, % of one CPU |", "|---|---|---|---|"]
    stolen = {}
    for name in names:
        d = [b - i for b, i in zip(busy[name], base, strict=True)]
        stolen[name] = statistics.median(d)
        rows.append(f"| {name} | {statistics.median(busy[name]) * 100:.2f} "
                    f"({min(busy[name]) * 100:.2f}–{max(busy[name]) * 100:.2f}) "
                    f"| {stolen[name] * 100:+.2f} | "
                    f"{statistics.median(own[name]) * 100:.2f} |")
    ratio = (stolen["rtlab monitor"] / stolen["cyclictest"]
             if stolen["cyclictest"] > 0 else float("nan"))
    rows += ["", f"rtlab monitor / cyclictest, CPU taken from CPU{args.cpu}: ×{ratio:.2f} "
             f"({args.rounds} rounds of {args.duration:g} s, interval {args.interval}, "
             f"SCHED_FIFO {args.priority}; load average {os.getloadavg()[0]:.1f})."]
    return write_report("\n".join(rows), args.out)


if __name__ == "__main__":
    sys.exit(main())
