#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""How much CPU `rtlab monitor` takes from the CPU it measures, against cyclictest at the
same interval and priority (issue 15, item 5).

    .venv/bin/python bench/monitor_vs_cyclictest.py [--cpu 1] [--interval 1ms] \\
        [--duration 20] [--rounds 5] [--out bench/out/monitor_vs_cyclictest.md]

(as root: both tools need SCHED_FIFO).

Rounds interleave five cases in a rotating order: nothing (the idle baseline of that
CPU), `rtlab monitor --cpus C` (with its exporter listening), `cyclictest -t1 -a C
--laptop`, `rtlab monitor --cpus C --dma-latency 0` and plain `cyclictest -t1 -a C`.
Plain cyclictest holds /dev/cpu_dma_latency at 0 for the whole run, so the CPU polls
instead of halting when idle, which makes each wake-up cheaper (in a VM much cheaper)
and costs power; the monitor, built to run for days, does not unless given
--dma-latency, and cyclictest with --laptop does not either. So the like-for-like pairs
are monitor / cyclictest --laptop and monitor --dma-latency 0 / cyclictest.

Over the steady part of each run (after a settling time, before the end; start-up
work such as imports and the engine's copy is left out):

- on-CPU: the exact time (/proc/PID/task/TID/schedstat) of the tool's threads that
  ran on the measured CPU: what it took from that CPU;
- busy: the CPU's busy time from /proc/stat (user, nice, system, irq, softirq, steal;
  tick-sampled) minus the same round's idle baseline;
- the tool's own CPU time (all its processes and threads, wherever they ran).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
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


def on_cpu_ns(pid: int, cpu: int) -> int:
    """Time on CPU (ns, exact) of the threads of a process tree that may run only on
    `cpu` (the measuring threads pinned there)."""
    total = 0
    for p in tree(pid):
        try:
            tasks = list(Path(f"/proc/{p}/task").iterdir())
        except OSError:
            continue
        for t in tasks:
            try:
                if os.sched_getaffinity(int(t.name)) != {cpu}:
                    continue
                total += int((t / "schedstat").read_text().split()[0])
            except OSError:
                continue
    return total


def measuring(pid: int) -> bool:
    """The tool's measuring process runs (the monitor's engine, or cyclictest)."""
    for p in tree(pid):
        try:
            if Path(f"/proc/{p}/comm").read_text().strip() in ("rtlab-probe", "cyclictest"):
                return True
        except OSError:
            continue
    return False


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def ended_early(proc: subprocess.Popen[bytes], err: Path) -> SystemExit:
    return SystemExit(f"{proc.args[0]} ... ended early (exit {proc.returncode}): "
                      f"{err.read_text().strip()[-400:]}")


def measure(cmd: list[str] | None, cpu: int, duration_s: float,
            err: Path) -> tuple[float, float, float]:
    """(busy s per s of the CPU, on-CPU s per s of the tool's threads pinned there, the
    tool's CPU s per s) over the steady part."""
    proc = None
    if cmd is not None:
        with err.open("wb") as ef:
            proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=ef,
                                    start_new_session=True)
    t_end = time.monotonic() + 60
    while proc is not None and not measuring(proc.pid) and time.monotonic() < t_end:
        if proc.poll() is not None:
            raise ended_early(proc, err)
        time.sleep(0.1)
    time.sleep(SETTLE_S)
    tck = os.sysconf("SC_CLK_TCK")
    pid = proc.pid if proc else None
    b0, t0 = cpu_busy_ticks(cpu), time.monotonic()
    c0, o0 = (tree_cpu_s(pid), on_cpu_ns(pid, cpu)) if pid else (0.0, 0)
    time.sleep(duration_s)
    b1, t1 = cpu_busy_ticks(cpu), time.monotonic()
    c1, o1 = (tree_cpu_s(pid), on_cpu_ns(pid, cpu)) if pid else (0.0, 0)
    if proc is not None and proc.poll() is not None:
        raise ended_early(proc, err)  # the figures would be of a tool that was not running
    if proc is not None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    span = t1 - t0
    return (b1 - b0) / tck / span, (o1 - o0) / 1e9 / span, (c1 - c0) / span


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
    monitor = [sys.executable, "-m", "rtlab", "monitor", "--cpus", str(args.cpu),
               "--interval", args.interval, "--priority", str(args.priority),
               "--segment", "1h", "--listen", f"127.0.0.1:{free_port()}", "--quiet",
               "--state-dir", str(tmp / "state"), "--store", str(tmp / "s.db"),
               "--duration", f"{run_s}s"]
    cases = {
        "idle": None,
        "rtlab monitor": monitor,
        "rtlab monitor --dma-latency 0": [*monitor, "--dma-latency", "0"],
        "cyclictest --laptop": ["cyclictest", "-q", "-m", "--laptop", "-t1", "-a",
                                str(args.cpu), "-i", str(us), "-p", str(args.priority),
                                "-D", f"{run_s}s"],
        "cyclictest": ["cyclictest", "-q", "-m", "-t1", "-a", str(args.cpu), "-i", str(us),
                       "-p", str(args.priority), "-D", f"{run_s}s"],
    }
    busy: dict[str, list[float]] = {k: [] for k in cases}
    oncpu: dict[str, list[float]] = {k: [] for k in cases}
    own: dict[str, list[float]] = {k: [] for k in cases}
    names = list(cases)
    for r in range(args.rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        for name in order:
            b, o, c = measure(cases[name], args.cpu, args.duration, tmp / "stderr")
            busy[name].append(b)
            oncpu[name].append(o)
            own[name].append(c)
    base = busy["idle"]
    rows = [f"| case | on CPU{args.cpu}, % (median, range) | CPU{args.cpu} busy minus idle, "
            "% (median per round) | the tool's own CPU, % of one CPU |", "|---|---|---|---|"]
    on, stolen = {}, {}
    for name in names[1:]:
        on[name] = statistics.median(oncpu[name])
        stolen[name] = statistics.median([b - i for b, i in zip(busy[name], base,
                                                                strict=True)])
        rows.append(f"| {name} | {on[name] * 100:.2f} ({min(oncpu[name]) * 100:.2f}–"
                    f"{max(oncpu[name]) * 100:.2f}) | {stolen[name] * 100:+.2f} | "
                    f"{statistics.median(own[name]) * 100:.2f} |")
    rows.append("")
    for mon, ref in (("rtlab monitor", "cyclictest --laptop"),
                     ("rtlab monitor --dma-latency 0", "cyclictest")):
        rs = [m / c for m, c in zip(oncpu[mon], oncpu[ref], strict=True) if c > 0]
        rows.append(f"{mon} / {ref}, time on CPU{args.cpu}: ×{statistics.median(rs):.2f} "
                    f"(median of the rounds' ratios, range {min(rs):.2f}–{max(rs):.2f}).")
    rows.append(f"{args.rounds} rounds of {args.duration:g} s steady per case, interval "
                f"{args.interval}, SCHED_FIFO {args.priority}; load average "
                f"{os.getloadavg()[0]:.1f} at the end.")
    return write_report("\n".join(rows), args.out)


if __name__ == "__main__":
    sys.exit(main())
