#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""rtlab-probe timer vs cyclictest, side by side, interleaved (A/B, B/A, ...).

Both run on the same CPUs with the same interval, priority, policy and memory
locking, one thread per CPU, and neither touches /dev/cpu_dma_latency
(cyclictest --laptop; rtlab does not hold it unless asked), because holding it
at 0 changes this kind of VM's idle state and so the latency being measured.

Per round and tool it records the latency distribution (p50/p99/p99.9 per CPU,
from each tool's own histogram: cyclictest's 1-µs buckets, truncated to whole
µs by cyclictest; rtlab's log-linear ns buckets), the CPU time the process used
(utime+stime from wait4, all threads) per sample, and its peak resident memory
(VmHWM polled from /proc while it runs).

Usage (as root, after `make setup`):
    .venv/bin/python bench/timer_vs_cyclictest.py --rounds 3 --duration 20
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from benchlib import channel_percentile, default_probe

HERE = Path(__file__).resolve().parent

PCTS = (50.0, 99.0, 99.9)


@dataclass
class Measured:
    tool: str
    samples: int = 0
    cpu_s: float = 0.0
    hwm_kb: int = 0
    per_cpu: dict[int, dict[float, float | None]] = field(default_factory=dict)
    maxima: dict[int, float] = field(default_factory=dict)

    @property
    def cpu_us_per_sample(self) -> float:
        return 1e6 * self.cpu_s / self.samples if self.samples else float("nan")


def run_monitored(argv: list[str], stdout_path: Path) -> tuple[int, int]:
    """Run argv to completion; return (peak VmHWM kB, exit status).

    CPU time is taken by the caller from RUSAGE_CHILDREN before/after: the
    child is reaped by poll(), so its utime+stime (all threads) is added there.
    """
    with open(stdout_path, "wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.DEVNULL)
        hwm = 0
        status_path = f"/proc/{proc.pid}/status"
        while proc.poll() is None:
            try:
                with open(status_path) as f:
                    for line in f:
                        if line.startswith("VmHWM:"):
                            hwm = max(hwm, int(line.split()[1]))
            except OSError:
                pass
            time.sleep(0.2)
    return hwm, proc.returncode


def cumulative_child_cpu() -> float:
    import resource

    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def run_rtlab(probe: str, cpus: str, args: argparse.Namespace, out_dir: Path, tag: str) -> Measured:
    out = out_dir / f"rtlab-{tag}.jsonl"
    argv = [probe, "timer", "--cpus", cpus, "--interval", f"{args.interval}us",
            "--priority", str(args.priority), "--duration", f"{args.duration}s"]
    before = cumulative_child_cpu()
    hwm, rc = run_monitored(argv, out)
    cpu = cumulative_child_cpu() - before
    if rc != 0:
        raise SystemExit(f"rtlab-probe exited {rc}")
    result = [json.loads(line) for line in out.read_text().splitlines() if line.strip()][-1]
    m = Measured("rtlab", cpu_s=cpu, hwm_kb=hwm)
    for ch in result["channels"]:
        m.samples += ch["samples"]
        m.per_cpu[ch["cpu"]] = {
            p: (v / 1000 if (v := channel_percentile(ch, p)) else None) for p in PCTS
        }
        m.maxima[ch["cpu"]] = ch["max_ns"] / 1000
    return m


def us_percentile(hist: dict[int, int], overflow: int, p: float) -> float | None:
    n = sum(hist.values()) + overflow
    if n * (1 - p / 100) < 1:
        return None
    rank = -(-p * n // 100)
    seen = 0
    for us in sorted(hist):
        seen += hist[us]
        if seen >= rank:
            return float(us)
    return float("inf")  # in cyclictest's overflow bucket


def run_cyclictest(cpus: str, args: argparse.Namespace, out_dir: Path, tag: str) -> Measured:
    js = out_dir / f"cyclictest-{tag}.json"
    argv = ["cyclictest", "-m", "-p", str(args.priority), "-i", str(args.interval),
            "-h", "20000", "-q", "-D", f"{args.duration}", "--laptop", "-a", cpus,
            "-t", str(len(expand(cpus))), f"--json={js}"]
    before = cumulative_child_cpu()
    hwm, rc = run_monitored(argv, out_dir / f"cyclictest-{tag}.txt")
    cpu = cumulative_child_cpu() - before
    if rc != 0:
        raise SystemExit(f"cyclictest exited {rc}")
    data = json.loads(js.read_text())
    m = Measured("cyclictest", cpu_s=cpu, hwm_kb=hwm)
    for th in data["thread"].values():
        hist = {int(k): int(v) for k, v in th["histogram"].items()}
        overflow = int(th["cycles"]) - sum(hist.values())
        m.samples += int(th["cycles"])
        m.per_cpu[int(th["cpu"])] = {p: us_percentile(hist, overflow, p) for p in PCTS}
        m.maxima[int(th["cpu"])] = float(th["max"])
    return m


def expand(cpus: str) -> list[int]:
    out: list[int] = []
    for part in cpus.split(","):
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return out


def fmt(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.1f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=int, default=20, help="seconds per run")
    ap.add_argument("--interval", type=int, default=1000, help="µs")
    ap.add_argument("--priority", type=int, default=99)
    ap.add_argument("--cpus", default=None, help="CPU list (default: all online)")
    ap.add_argument("--probe", default=None, help="rtlab-probe binary")
    ap.add_argument("--out", default=str(HERE / "out"))
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("run as root (real SCHED_FIFO)", file=sys.stderr)
        return 4
    probe = args.probe or default_probe()
    if not Path(probe).exists() or not shutil.which("cyclictest"):
        print("needs rtlab-probe (make setup) and cyclictest (apt-get install rt-tests)",
              file=sys.stderr)
        return 4
    cpus = args.cpus or f"0-{os.cpu_count() - 1}"
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    runs: list[Measured] = []
    for r in range(args.rounds):
        order = ("rtlab", "cyclictest") if r % 2 == 0 else ("cyclictest", "rtlab")
        for tool in order:
            tag = f"r{r}"
            m = (run_rtlab(probe, cpus, args, out_dir, tag) if tool == "rtlab"
                 else run_cyclictest(cpus, args, out_dir, tag))
            runs.append(m)
            cols = "  ".join(
                f"cpu{c}: p50 {fmt(v[50.0])} p99 {fmt(v[99.0])} p99.9 {fmt(v[99.9])}"
                for c, v in sorted(m.per_cpu.items()))
            print(f"round {r} {tool:10s} samples {m.samples:7d} "
                  f"cpu/sample {m.cpu_us_per_sample:5.1f} µs  VmHWM {m.hwm_kb} kB  {cols}",
                  flush=True)

    print("\n| tool | rounds | p50 µs (median over runs, per CPU) | p99 µs | p99.9 µs | "
          "CPU µs/sample | VmHWM kB |")
    print("|---|---|---|---|---|---|---|")
    summary: dict[str, dict[str, float]] = {}
    for tool in ("rtlab", "cyclictest"):
        ms = [m for m in runs if m.tool == tool]
        row = {}
        cells = []
        for p in PCTS:
            per_cpu = []
            for c in sorted(ms[0].per_cpu):
                vals = [m.per_cpu[c][p] for m in ms if m.per_cpu[c][p] is not None]
                per_cpu.append(statistics.median(vals) if vals else None)
            cells.append(" / ".join(fmt(v) for v in per_cpu))
            known = [v for v in per_cpu if v is not None]
            row[f"p{p:g}"] = statistics.median(known) if known else float("nan")
        row["cpu"] = statistics.median(m.cpu_us_per_sample for m in ms)
        row["hwm"] = statistics.median(m.hwm_kb for m in ms)
        summary[tool] = row
        print(f"| {tool} | {len(ms)} | {cells[0]} | {cells[1]} | {cells[2]} | "
              f"{row['cpu']:.1f} | {row['hwm']:.0f} |")
    a, b = summary["rtlab"], summary["cyclictest"]
    print("\nratios rtlab/cyclictest: "
          f"p50 {a['p50'] / b['p50']:.2f}, p99 {a['p99'] / b['p99']:.2f}, "
          f"CPU per sample {a['cpu'] / b['cpu']:.2f}, VmHWM {a['hwm'] / b['hwm']:.2f}")
    print("note: cyclictest truncates each sample to whole µs; rtlab reports the upper edge of "
          "a <0.8 %-wide bucket, so rtlab reads about 0.5-1 µs higher for the same wake-ups.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
