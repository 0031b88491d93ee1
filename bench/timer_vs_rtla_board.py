#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""rtlab's timer probe vs rtla timerlat hist, interleaved, on an emulated PREEMPT_RT board.

This machine's kernel has no timerlat tracer, so rtla cannot run here. The lab's
x86_64-rt board (Debian 12's 6.1 PREEMPT_RT kernel under qemu TCG, docs/lab.md)
has it and carries Debian's rtla 6.1. This script boots such a board
(tests/lab/boards.py) and runs, in interleaved rounds (rtla first in even rounds,
rtlab first in odd ones), on the same CPU with the same period, priority and
duration:

* rtla: `taskset -c HK rtla timerlat hist -c CPU -d SECS -p PERIOD_US -P f:PRIO
  -n -b BUCKET_NS -E ENTRIES` over SSH (HK: the board's first other CPU, where
  rtlab's engine keeps its reporter thread too). Nanosecond output with 100-ns
  buckets and a range of 100 ms (rtla 6.1's default of 256 buckets of 1 µs
  overflows under emulation), both IRQ and thread columns; stdout is kept as
  rtla wrote it and imported with `rtlab results import --format
  rtla-timerlat-hist --host BOARD --kernel RELEASE --preempt PREEMPT_RT --date
  START`.
* rtlab: `rtlab run --probe timer --cpus CPU --interval PERIOD --priority PRIO
  --duration SECS --target BOARD --no-report --no-progress` (RTLAB_SSH_CONFIG
  points at the board's ssh_config).

Both land in one private store (OUT/store.db); every figure is computed from the
stored runs with rtlab's own analysis code (rtlab.analysis.stats: percentile =
upper edge of the log-linear bucket holding the rank, clamped to the exact
min/max), so both tools' values pass through the same histogram and rule.

What is compared. rtlab's timer probe measures a SCHED_FIFO user thread's
wake-up from clock_nanosleep(TIMER_ABSTIME): clock_gettime after the wake-up
minus the programmed time, read in user space. timerlat measures, in the kernel,
the timer IRQ latency (expiry -> the hrtimer handler runs) and the thread
latency (expiry -> its per-CPU *kernel* thread, woken from that handler, runs).
The thread latency is the closest to rtlab's and is the one the ratios use; the
IRQ latency is shown for context. What remains between the two: rtlab's sample
also holds the return from the system call to user space and a clock read from
user space; timerlat's thread is a kernel thread that never leaves the kernel.

`rtlab compare` merges every channel of a run, so an rtla import with both
columns would mix IRQ and thread latencies in one distribution; with --no-irq
rtla records the thread column only and this script also prints `rtlab compare
--by scenario` of all rtlab runs against all rtla runs.

Under TCG every latency is the emulator's (translated code, emulated timers,
vCPU threads competing with the host): the values say nothing about a real
board. Both tools measure the same kernel at the same time scale, so how well
they agree (sample counts, shape, percentiles, max) compares the two measuring
methods, not the board.

Usage (as root, after `make setup`, from the repository root):
    .venv/bin/python bench/timer_vs_rtla_board.py --rounds 3 --duration 20s
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))

from rtlab.results.histogram import LogLinHistogram  # noqa: E402
from rtlab.results.model import Channel, RunResult  # noqa: E402
from rtlab.results.store import Store  # noqa: E402
from rtlab.results.summary import mean, percentile  # noqa: E402
from tests.lab.boards import Board, BoardError, LabUnavailable  # noqa: E402

PCTS = (50.0, 99.0, 99.9)
STATS = ("samples", "min", "p50", "p99", "p99.9", "max")


# ------------------------------------------------------------------ statistics


def stats_of(ch: Channel) -> dict[str, float | None]:
    """samples, missed, min, p50, p99, p99.9, max, avg of one channel (µs, samples count)."""
    out: dict[str, float | None] = {"samples": float(ch.samples), "missed": float(ch.missed)}
    out["min"] = ch.min_ns / 1000 if ch.min_ns is not None else None
    for p in PCTS:
        v = percentile(ch.hist, p, ch.min_ns, ch.max_ns)
        out[f"p{p:g}"] = v / 1000 if v is not None else None
    out["max"] = ch.max_ns / 1000 if ch.max_ns is not None else None
    m = mean(ch.sum_ns, ch.samples)
    out["avg"] = m / 1000 if m is not None else None
    return out


def ks_distance(a: LogLinHistogram, b: LogLinHistogram) -> float:
    """Largest gap between the two empirical CDFs, evaluated at every bucket's upper edge
    (both histograms have the same log-linear layout, so this is exact for the buckets)."""
    if not a.total or not b.total:
        return float("nan")
    ca = {bk.hi: bk.count for bk in a.buckets()}
    cb = {bk.hi: bk.count for bk in b.buckets()}
    sa = sb = 0
    worst = 0.0
    for edge in sorted(set(ca) | set(cb)):
        sa += ca.get(edge, 0)
        sb += cb.get(edge, 0)
        worst = max(worst, abs(sa / a.total - sb / b.total))
    return worst


def fmt(v: float | None, digits: int = 1) -> str:
    if v is None:
        return "n/a"
    if digits == 0:
        return f"{v:,.0f}"
    return f"{v:,.{digits}f}"


def ratio(a: float | None, b: float | None) -> str:
    if a is None or b is None or b == 0:
        return "n/a"
    return f"{a / b:.2f}"


# ------------------------------------------------------------------ running the tools


@dataclass
class Round:
    index: int
    order: tuple[str, str]
    rtlab_id: str = ""
    rtla_id: str = ""
    rtlab_wall_s: float = 0.0
    rtla_wall_s: float = 0.0
    rtla_file: str = ""
    channels: dict[str, Channel] = field(default_factory=dict)  # rtlab, thread, irq


class Bench:
    def __init__(self, args: argparse.Namespace, board: Board, out: Path) -> None:
        self.args = args
        self.board = board
        self.out = out
        self.store_path = out / "store.db"
        self.release = board.ssh("uname", "-r", check=True).stdout.strip()
        self.hostname = board.ssh("hostname", check=True).stdout.strip() or board.alias
        online = board.ssh("cat", "/sys/devices/system/cpu/online", check=True).stdout.strip()
        self.housekeeping = next(c for c in range(board.cpus) if c != args.cpu)
        self.facts = {
            "board": board.describe(),
            "release": self.release,
            "uname_v": board.ssh("uname", "-v").stdout.strip(),
            "online": online,
            "clocksource": board.sh("cat /sys/devices/system/clocksource/clocksource0/"
                                    "current_clocksource").stdout.strip(),
            "realtime": board.sh("cat /sys/kernel/realtime").stdout.strip(),
            "rtla": (board.sh("rtla --help 2>&1 | grep -i version").stdout.strip()
                     or "unknown"),
        }

    # -- environment of the rtlab CLI
    def env(self) -> dict[str, str]:
        return {**os.environ, "RTLAB_SSH_CONFIG": str(self.board.ssh_config),
                "PYTHONPATH": str(REPO), "XDG_DATA_HOME": str(self.out / "xdg"),
                "COLUMNS": "200"}

    def rtlab(self, *argv: str, timeout: float) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "rtlab", *argv, "--store",
                               str(self.store_path)], capture_output=True, text=True,
                              env=self.env(), timeout=timeout, check=False)

    def stored_ids(self) -> set[str]:
        if not self.store_path.exists():
            return set()
        s = Store.open(str(self.store_path))
        try:
            return {r.id for r in s.list(None)}
        finally:
            s.close()

    def load(self, run_id: str) -> RunResult:
        s = Store.open(str(self.store_path))
        try:
            return s.get(run_id)
        finally:
            s.close()

    def timeout(self) -> float:
        return 10 * self.args.duration + 600  # TCG on a loaded VM: generous

    def rtla_argv(self) -> list[str]:
        a = self.args
        argv = ["taskset", "-c", str(self.housekeeping), "rtla", "timerlat", "hist",
                "-c", str(a.cpu), "-d", str(a.duration), "-p", str(a.period_us),
                "-P", f"f:{a.priority}", "-n", "-b", str(a.bucket_ns), "-E", str(a.entries)]
        if a.no_irq:
            argv.append("--no-irq")
        return argv

    def run_rtla(self, rnd: Round) -> None:
        start = datetime.now(UTC)
        t0 = time.monotonic()
        r = self.board.ssh(*self.rtla_argv(), timeout=self.timeout())
        rnd.rtla_wall_s = time.monotonic() - t0
        path = self.out / f"rtla-r{rnd.index}.txt"
        path.write_text(r.stdout)
        (self.out / f"rtla-r{rnd.index}.stderr").write_text(r.stderr)
        if r.returncode != 0 or "count:" not in r.stdout:
            raise SystemExit(f"rtla exited {r.returncode} on the board: {r.stderr.strip()}"
                             f" (output in {path})")
        before = self.stored_ids()
        imp = self.rtlab("results", "import", "--format", "rtla-timerlat-hist", "--host",
                         self.hostname, "--kernel", self.release, "--preempt", "PREEMPT_RT",
                         "--date", start.isoformat(timespec="seconds"), str(path),
                         timeout=300)
        if imp.returncode != 0:
            raise SystemExit(f"rtlab results import exited {imp.returncode}: "
                             f"{imp.stderr.strip()}")
        (new,) = self.stored_ids() - before
        rnd.rtla_id, rnd.rtla_file = new, path.name
        res = self.load(new)
        by_name = {ch.name: ch for _, ch in res.channels()}
        rnd.channels["thread"] = by_name[f"thread@cpu{self.args.cpu}"]
        if not self.args.no_irq:
            rnd.channels["irq"] = by_name[f"irq@cpu{self.args.cpu}"]

    def run_rtlab(self, rnd: Round) -> None:
        a = self.args
        before = self.stored_ids()
        t0 = time.monotonic()
        p = self.rtlab("run", "--probe", "timer", "--cpus", str(a.cpu), "--interval",
                       f"{a.period_us}us", "--priority", str(a.priority), "--duration",
                       f"{a.duration}s", "--target", self.board.alias, "--no-report",
                       "--no-progress", timeout=self.timeout())
        rnd.rtlab_wall_s = time.monotonic() - t0
        (self.out / f"rtlab-r{rnd.index}.txt").write_text(p.stdout + p.stderr)
        if p.returncode != 0:
            raise SystemExit(f"rtlab run exited {p.returncode}: {p.stderr.strip()[-2000:]}")
        (new,) = self.stored_ids() - before
        rnd.rtlab_id = new
        res = self.load(new)
        (ch,) = [c for _, c in res.channels() if c.cpu == a.cpu]
        rnd.channels["rtlab"] = ch


# ------------------------------------------------------------------ output


def table(rows: list[tuple[str, str, Channel]], expected: int) -> list[str]:
    lines = [f"| round | tool (value) | samples (of ~{expected:,}) | missed | min µs | p50 µs "
             "| p99 µs | p99.9 µs | max µs |",
             "|---|---|---|---|---|---|---|---|---|"]
    for rnd, tool, ch in rows:
        s = stats_of(ch)
        missed = fmt(s["missed"], 0) if tool.startswith("rtlab") else "—"
        lines.append(f"| {rnd} | {tool} | {fmt(s['samples'], 0)} | {missed} | "
                     f"{fmt(s['min'])} | {fmt(s['p50'])} | {fmt(s['p99'])} | "
                     f"{fmt(s['p99.9'])} | {fmt(s['max'])} |")
    return lines


def ratio_table(pairs: list[tuple[str, Channel, Channel]]) -> list[str]:
    lines = ["| round | " + " | ".join(STATS) + " | KS distance |",
             "|---|" + "---|" * (len(STATS) + 1)]
    for label, a, b in pairs:
        sa, sb = stats_of(a), stats_of(b)
        cells = [ratio(sa[k], sb[k]) for k in STATS]
        lines.append(f"| {label} | " + " | ".join(cells)
                     + f" | {ks_distance(a.hist, b.hist):.3f} |")
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(
        description="rtlab's timer probe vs rtla timerlat hist, interleaved, on an emulated "
        "PREEMPT_RT lab board (x86_64-rt under qemu TCG). Latencies under emulation are the "
        "emulator's; the comparison is of the two measuring methods.",
        epilog="Run as root after `make setup`, from the repository root. Output: a "
        "Markdown summary on stdout; rtla's raw outputs, rtlab's output, the store and "
        "summary.json in --out.")
    ap.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    ap.add_argument("--duration", default="20s",
                    help="seconds per run of each tool, e.g. 20 or 20s (default 20s)")
    ap.add_argument("--cpu", type=int, default=1, help="measured CPU of the board (default 1)")
    ap.add_argument("--period-us", type=int, default=1000,
                    help="timer period in µs for both tools (default 1000)")
    ap.add_argument("--priority", type=int, default=95,
                    help="SCHED_FIFO priority of both tools' measuring threads (default 95, "
                    "timerlat's own default)")
    ap.add_argument("--bucket-ns", type=int, default=100,
                    help="rtla histogram bucket size in ns (-n -b; default 100)")
    ap.add_argument("--entries", type=int, default=1_000_000,
                    help="rtla histogram entries (-E; default 1000000: 100 ms with 100-ns "
                    "buckets)")
    ap.add_argument("--no-irq", action="store_true",
                    help="rtla records its thread latency only (then `rtlab compare` is "
                    "like-for-like and is printed too)")
    ap.add_argument("--board-cpus", type=int, default=2, help="vCPUs of the board (default 2)")
    ap.add_argument("--out", default=str(HERE / "out" / "timer_vs_rtla_board"),
                    help="output directory (a fresh store is made in it)")
    args = ap.parse_args()
    m = re.fullmatch(r"(\d+)s?", args.duration.strip())
    if not m or int(m.group(1)) < 1:
        ap.error(f"--duration {args.duration!r}: give whole seconds, e.g. 20s")
    args.duration = int(m.group(1))
    if not 0 <= args.cpu < args.board_cpus or args.board_cpus < 2:
        ap.error("--cpu must be a CPU of the board, and the board needs a second CPU "
                 "for both tools' housekeeping work")
    if os.geteuid() != 0:
        print("note: not root; the board is driven as its root over SSH, that is enough",
              file=sys.stderr)

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for stale in ("store.db", "summary.json"):
        (out / stale).unlink(missing_ok=True)
    try:
        board = Board.boot("rtla-bench", "x86_64-rt", cpus=args.board_cpus)
    except LabUnavailable as exc:
        print(f"the lab board cannot be built or booted here: {exc}", file=sys.stderr)
        return 4
    except BoardError as exc:
        print(f"the board did not boot: {exc}", file=sys.stderr)
        return 1
    try:
        probe = board.sh("grep -qw timerlat /sys/kernel/tracing/available_tracers && "
                         "rtla timerlat hist --help >/dev/null 2>&1 && echo ok")
        if probe.stdout.strip() != "ok":
            print("the board has no timerlat tracer or no rtla", file=sys.stderr)
            return 4
        bench = Bench(args, board, out)
        print(f"# {bench.facts['board']}", flush=True)
        for k, v in bench.facts.items():
            if k != "board":
                print(f"#   {k}: {v}")
        print(f"# rtla: {' '.join(bench.rtla_argv())}")
        print(f"# rtlab: rtlab run --probe timer --cpus {args.cpu} --interval "
              f"{args.period_us}us --priority {args.priority} --duration {args.duration}s "
              f"--target {board.alias} --no-report --no-progress", flush=True)
        rounds: list[Round] = []
        for r in range(args.rounds):
            rnd = Round(r, ("rtla", "rtlab") if r % 2 == 0 else ("rtlab", "rtla"))
            for tool in rnd.order:
                (bench.run_rtla if tool == "rtla" else bench.run_rtlab)(rnd)
            rounds.append(rnd)
            s_l, s_t = stats_of(rnd.channels["rtlab"]), stats_of(rnd.channels["thread"])
            print(f"round {r} ({' then '.join(rnd.order)}): rtlab {rnd.rtlab_id} "
                  f"samples {fmt(s_l['samples'], 0)} p50 {fmt(s_l['p50'])} p99 "
                  f"{fmt(s_l['p99'])} max {fmt(s_l['max'])} | rtla {rnd.rtla_id} thread "
                  f"samples {fmt(s_t['samples'], 0)} p50 {fmt(s_t['p50'])} p99 "
                  f"{fmt(s_t['p99'])} max {fmt(s_t['max'])} "
                  f"(wall {rnd.rtlab_wall_s:.1f} s / {rnd.rtla_wall_s:.1f} s)", flush=True)
        compare_out = None
        if args.no_irq:
            cmp = bench.rtlab("compare", "--by", "scenario",
                              *[x.rtlab_id for x in rounds], *[x.rtla_id for x in rounds],
                              timeout=300)
            compare_out = cmp.stdout + cmp.stderr
            (out / "compare.txt").write_text(compare_out)
            if cmp.returncode != 0:
                print(f"rtlab compare exited {cmp.returncode}", file=sys.stderr)
    finally:
        board.stop()

    expected = args.duration * 1_000_000 // args.period_us
    rows: list[tuple[str, str, Channel]] = []
    for x in rounds:
        rows.append((str(x.index), f"rtlab timer ({x.rtlab_id})", x.channels["rtlab"]))
        rows.append((str(x.index), f"rtla thread ({x.rtla_id})", x.channels["thread"]))
        if "irq" in x.channels:
            rows.append((str(x.index), "rtla IRQ (context)", x.channels["irq"]))
    pooled = {k: Channel.merged(k, [x.channels[k] for x in rounds])
              for k in rounds[0].channels}
    rows.append(("all", "rtlab timer", pooled["rtlab"]))
    rows.append(("all", "rtla thread", pooled["thread"]))
    if "irq" in pooled:
        rows.append(("all", "rtla IRQ (context)", pooled["irq"]))
    print()
    print("\n".join(table(rows, expected)))
    print("\nratio rtlab / rtla thread latency (KS distance: largest gap between the two "
          "CDFs, 0 = same distribution):\n")
    pairs = [(str(x.index), x.channels["rtlab"], x.channels["thread"]) for x in rounds]
    pairs.append(("all", pooled["rtlab"], pooled["thread"]))
    print("\n".join(ratio_table(pairs)))
    # run-to-run variation of each tool alone, for scale: KS distance between rounds
    spread: dict[str, list[float]] = {}
    for k in ("rtlab", "thread"):
        spread[k] = [ks_distance(rounds[i].channels[k].hist, rounds[j].channels[k].hist)
                     for i in range(len(rounds)) for j in range(i + 1, len(rounds))]
    if len(rounds) > 1:
        print("\nKS distance between rounds of the same tool (run-to-run variation): "
              + "; ".join(f"{'rtlab' if k == 'rtlab' else 'rtla thread'} "
                          + ", ".join(f"{d:.3f}" for d in v) for k, v in spread.items()))
    if compare_out is not None:
        print("\n`rtlab compare --by scenario` (rtlab runs vs rtla thread-only imports):\n")
        print(compare_out)
    summary: dict[str, Any] = {
        "facts": bench.facts, "args": {k: v for k, v in vars(args).items()},
        "rtla_argv": bench.rtla_argv(),
        "rounds": [{"index": x.index, "order": list(x.order), "rtlab_id": x.rtlab_id,
                    "rtla_id": x.rtla_id, "rtla_file": x.rtla_file,
                    "wall_s": {"rtlab": x.rtlab_wall_s, "rtla": x.rtla_wall_s},
                    "stats": {k: stats_of(c) for k, c in x.channels.items()},
                    "ks_rtlab_vs_thread": ks_distance(x.channels["rtlab"].hist,
                                                      x.channels["thread"].hist)}
                   for x in rounds],
        "pooled": {k: stats_of(c) for k, c in pooled.items()},
        "ks_between_rounds": spread,
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(f"\nstore, raw outputs and summary.json in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
