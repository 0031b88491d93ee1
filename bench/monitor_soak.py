#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Soak of `rtlab monitor`: resident memory over time and windows lost (issue 15, item 5).

    .venv/bin/python bench/monitor_soak.py [--duration 1h] [--cpus all] [--interval 1ms] \\
        [--segment 10m] [--listen 127.0.0.1:9478 --scrape 15] [--out bench/out/monitor_soak.md]

Starts the monitor (this machine, the timer probe on every CPU at 1 kHz) in a temporary
state directory and store, samples its resident memory (VmRSS of the monitor process,
engines excluded) every 10 s, optionally scrapes its metrics, and when it has stopped
counts, in the stored runs, the engine windows each CPU should have (one per second of
every segment) against those it has: a window is lost when it is missing from the run
or the engine says `windows_lost`. Memory growth is given two ways: from the first
sample after warm-up (the first segment stored) to the last sample, and, the figure to
judge a trend by, as the change of the median RSS of each segment's samples from the
second segment to the last (a store pass swings the RSS by several MiB up and back).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import itertools

from benchlib import write_report

from rtlab.results.store import Store
from rtlab.scenario.units import parse_duration


def rss_kb(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration", default="1h")
    ap.add_argument("--cpus", default="all")
    ap.add_argument("--interval", default="1ms")
    ap.add_argument("--segment", default="10m")
    ap.add_argument("--listen", default=None, help="serve metrics (and scrape them)")
    ap.add_argument("--scrape", type=float, default=15.0, help="scrape period, s")
    ap.add_argument("--out", default=str(Path(__file__).parent / "out" / "monitor_soak.md"))
    args = ap.parse_args()
    dur_s = parse_duration(args.duration) / 1e9
    seg_s = parse_duration(args.segment) / 1e9
    tmp = Path(tempfile.mkdtemp(prefix="rtlab-soak-"))
    state, store = tmp / "state", tmp / "store.db"
    cmd = [sys.executable, "-m", "rtlab", "monitor", "--state-dir", str(state), "--store",
           str(store), "--interval", args.interval, "--segment", args.segment,
           "--duration", args.duration, "--quiet"]
    if args.cpus != "all":
        cmd += ["--cpus", args.cpus]
    if args.listen:
        cmd += ["--listen", args.listen]
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent.parent))
    proc = subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, text=True)
    t0 = time.monotonic()
    samples: list[tuple[float, int]] = []
    scrapes = scrape_fail = 0
    next_scrape = t0 + args.scrape
    url = None
    if args.listen:
        host, port = args.listen.rsplit(":", 1)
        url = f"http://{host}:{port}/metrics"
    while proc.poll() is None:
        time.sleep(1.0)
        now = time.monotonic()
        if int(now - t0) % 10 == 0:
            kb = rss_kb(proc.pid)
            if kb is not None:
                samples.append((now - t0, kb))
        if url and now >= next_scrape:
            next_scrape = now + args.scrape
            try:
                with urllib.request.urlopen(url, timeout=5) as r:
                    r.read()
                scrapes += 1
            except OSError:
                scrape_fail += 1
    err = proc.stderr.read() if proc.stderr else ""
    code = proc.returncode
    warm = seg_s + 60  # after the first segment was stored (its imports loaded)
    after = [kb for t, kb in samples if t >= warm]
    growth = (after[-1] - after[0]) if len(after) >= 2 else None
    # the median of each segment's samples: a store pass (its raw file parsed) swings the
    # RSS by several MiB up and back, so two single samples say little about a trend
    medians = [statistics.median(kb) for k in range(int(dur_s // seg_s) + 1)
               if (kb := [v for t, v in samples if k * seg_s <= t < (k + 1) * seg_s])]
    trend = medians[-1] - medians[1] if len(medians) >= 3 else None

    s = Store.open(str(store), create=False)
    expected = found = lost = holes = stalled = 0
    periods = accounted = 0
    runs = s.list(None)
    for row in runs:
        res = s.get(row.id)
        eng = res.provenance.get("engine") or {}
        cfg = eng.get("config") or {}
        win_ns = int(cfg.get("window_ns") or 1_000_000_000)
        interval = int(cfg.get("interval_ns") or 1_000_000)
        for ph in res.phases:
            for ch in ph.channels:
                n = int(ph.elapsed_ns or 0) // win_ns
                idx = sorted({int(i) for i in ch.windows.index})
                maxima = dict(zip((int(i) for i in ch.windows.index),
                                  (int(m) for m in ch.windows.max_ns), strict=True))
                expected += n
                found += len([i for i in idx if i < n])
                lost += int(ch.windows_lost or 0)
                # a window without a sample inside the run: the thread did not run then;
                # the stall shows as the next sample's latency (and its missed periods)
                for a, b in itertools.pairwise(idx):
                    if b - a > 1:
                        holes += b - a - 1
                        if maxima[b] >= (b - a - 1) * win_ns:
                            stalled += b - a - 1
                periods += int(ph.elapsed_ns or 0) // interval
                accounted += int(ch.samples) + int(ch.missed)
    s.close()
    every_5_min = list({int(t // 300): (t, kb) for t, kb in reversed(samples)}.values())[::-1]
    lines = [
        f"`{' '.join(['rtlab', *cmd[3:]])}` for {args.duration}: exit {code}",
        "",
        "| resident memory (VmRSS, monitor process) | value |",
        "|---|---|",
        f"| first sample ({samples[0][0]:.0f} s) | {samples[0][1] / 1024:.1f} MiB |"
        if samples else "| first sample | - |",
        f"| after warm-up ({warm:.0f} s) | {after[0] / 1024:.2f} MiB |" if after else
        "| after warm-up | - |",
        f"| end | {after[-1] / 1024:.2f} MiB |" if after else "| end | - |",
        f"| growth after warm-up | {growth / 1024:.3f} MiB ({growth} kB) |"
        if growth is not None else "| growth | - |",
        f"| max | {max(kb for _, kb in samples) / 1024:.2f} MiB |" if samples else "",
        f"| median of each segment's samples | "
        f"{', '.join(f'{m / 1024:.2f}' for m in medians)} MiB |",
        f"| growth of that median, second segment to last | {trend / 1024:+.3f} MiB |"
        if trend is not None else "| growth of the median | - |",
        "",
        "Resident memory every 5 minutes (MiB): " + ", ".join(
            f"{t / 60:.0f} min {kb / 1024:.2f}" for t, kb in every_5_min),
        "",
        f"Runs stored: {len(runs)}; engine windows expected {expected}, found {found}, "
        f"windows_lost {lost}; windows without a sample inside a run {holes}, of them "
        f"covered by a stall that the next sample's latency shows {stalled}; periods "
        f"{periods}, samples + missed {accounted}; scrapes {scrapes} ok, {scrape_fail} "
        "failed. "
        f"{dur_s:.0f} s planned, {time.monotonic() - t0:.0f} s taken.",
    ]
    if code not in (0,):
        lines.append(f"monitor stderr: {err.strip()[-500:]}")
    return write_report("\n".join(lines), args.out)


if __name__ == "__main__":
    sys.exit(main())
