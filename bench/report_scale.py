#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Scale benchmark of the HTML report (issue 7).

Generates a 24-CPU (`--cpus`), 7-day, 1 kHz timer result in memory: per CPU a
log-linear histogram of 604.8 million samples (a lognormal body, the window maxima
and their rare spikes) and 604,800 one-second window maxima, consistent as a real
run's (the store refuses any other: `make_channel`), then renders the HTML report
and measures:

* the time and memory to build the result (the model itself),
* the render time of `render_html` (plots, statistics, extreme-value fit),
* the memory the render needs on top of the loaded result (RSS high-water mark
  during the render, sampled every 5 ms, minus the RSS before it),
* the user's path end to end: the result is stored in a fresh store (timed),
  then `rtlab report RUN -o FILE` runs as a child process: its wall time and
  peak RSS (load from the store + render, the whole process).

Usage: python3 bench/report_scale.py [--cpus 24] [--days 7] [--out report.html]
Targets: render < 5 s, memory < 500 MB at 24 CPUs; a lab's 128-CPU server
(`--cpus 128`): < 5 s and < 1 GB (bench/RESULTS.md).
"""

from __future__ import annotations

import argparse
import math
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np

from rtlab.probes.registry import shape as probe_shape
from rtlab.results.histogram import LogLinHistogram, bucket_bounds, index_array, index_of
from rtlab.results.model import Channel, Phase, RunResult
from rtlab.results.windows import WindowMaxima

WINDOW_NS = 1_000_000_000


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def make_channel(cpu: int, windows: int, rate: int, rng: np.random.Generator) -> Channel:
    """One CPU whose numbers agree with each other as a real run's do (the store refuses
    any other): every window counts `rate` samples, its maximum among them; the histogram
    holds the window maxima and `rate - 1` body samples per window, all below the
    smallest maximum; min is a value of the lowest bucket, max the largest maximum."""
    # window maxima: a Gumbel around 60 us plus rare spikes (host stalls): ~2 per hour,
    # 0.2 .. 5 ms
    wmax = rng.gumbel(60_000 + 300 * cpu, 4_000, windows)
    spikes = rng.uniform(200_000, 5_000_000, int(windows / 1800))
    wmax[rng.integers(0, windows, len(spikes))] = spikes
    wmax = wmax.astype(np.int64)
    # the body: a lognormal around 12 us in the buckets below the smallest maximum, its
    # rounding remainder in the mode's bucket so that the windows hold every sample
    body = windows * (rate - 1)
    lo_i, hi_i = index_of(2_000), index_of(int(wmax.min())) - 1
    idx = np.arange(lo_i, hi_i + 1)
    bounds = np.array([bucket_bounds(int(i)) for i in idx], dtype=np.float64)
    lo, hi = bounds[:, 0], bounds[:, 0] + bounds[:, 1]
    mu, sigma = math.log(12_000 + 300 * cpu), 0.22

    def cdf(x: np.ndarray) -> np.ndarray:
        return 0.5 * (1 + np.vectorize(math.erf)((np.log(x) - mu) / (sigma * math.sqrt(2))))

    counts = np.floor(body * (cdf(hi) - cdf(lo))).astype(np.int64)
    counts[int(np.argmax(counts))] += body - int(counts.sum())
    by_index = {int(i): int(c) for i, c in zip(idx, counts, strict=True) if c}
    top_i, top_c = np.unique(index_array(wmax), return_counts=True)
    for i, c in zip(top_i, top_c, strict=True):
        by_index[int(i)] = by_index.get(int(i), 0) + int(c)
    hist = LogLinHistogram(7, by_index)
    total = hist.total
    nonzero = idx[counts > 0]
    first = int(nonzero[0]) if len(nonzero) else int(top_i[0])
    mids = lo + (bounds[:, 1] - 1) // 2
    sum_ns = int(np.dot(counts, mids.astype(np.int64))) + int(wmax.sum())
    wins = WindowMaxima(np.arange(windows, dtype=np.int64), wmax,
                        np.full(windows, rate, dtype=np.int64))
    top = int(np.argmax(wmax))
    return Channel(name=f"cpu{cpu}", cpu=cpu, samples=total,
                   min_ns=bucket_bounds(first)[0], max_ns=int(wmax[top]), sum_ns=sum_ns,
                   max_at_ns=top * WINDOW_NS, hist=hist, windows=wins, window_ns=WINDOW_NS)


def make_result(run_id: str, release: str, cpus: int, windows: int, rate: int,
                rng: np.random.Generator) -> RunResult:
    chans = [make_channel(c, windows, rate, rng) for c in range(cpus)]
    return RunResult(
        run_id=run_id, status="completed", probe="timer",
        phases=[Phase("main", chans, windows * WINDOW_NS)], rt_valid=True,
        scenario={"name": "bench", "hash": None},
        provenance={"engine": {"system": {"hostname": "bench", "release": release}},
                    "host": {"hostname": "bench"}})


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cpus", type=int, default=24)
    ap.add_argument("--days", type=float, default=7.0)
    ap.add_argument("--rate", type=int, default=1000, help="samples per second per CPU")
    ap.add_argument("--out", default="report_scale.html")
    ap.add_argument("--no-store", action="store_true",
                    help="skip the end-to-end `rtlab report` from a store")
    ap.add_argument("--compare", action="store_true",
                    help="also store a second such run (another kernel) and time "
                    "`rtlab compare A B` and `rtlab report A B`")
    args = ap.parse_args()

    windows = int(args.days * 86400)
    rng = np.random.default_rng(7)
    base = rss_mb()
    t0 = time.perf_counter()
    result = make_result("bench001", "6.12.0-rt", args.cpus, windows, args.rate, rng)
    build_s = time.perf_counter() - t0
    model_mb = rss_mb() - base
    print(f"result: {args.cpus} CPUs x {windows:,} windows, "
          f"{result.merged(probe_shape(result.probe)).samples:,} samples; "
          f"built in {build_s:.1f} s, "
          f"model RSS {model_mb:.0f} MB")

    # Render in this process; a sampler thread records the RSS high-water mark of the
    # render (forking a child would copy the model's pages on write and distort both).
    from rtlab.report.html import write_run_report

    at_start = rss_mb()
    peak = [at_start]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.005):
            peak[0] = max(peak[0], rss_mb())

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    t = time.perf_counter()
    path = write_run_report([result], args.out)
    dt = time.perf_counter() - t
    done.set()
    sampler.join()
    peak[0] = max(peak[0], rss_mb())
    print(f"render: {dt:.2f} s (target < 5 s, includes importing matplotlib); memory for "
          f"rendering {peak[0] - at_start:.0f} MB above the loaded result (target < 500 MB); "
          f"process peak {peak[0]:.0f} MB; HTML {path.stat().st_size / 1e6:.2f} MB -> {path}")
    if not args.no_store:
        second = None
        if args.compare:
            second = make_result("bench002", "6.18.0-rt", args.cpus, windows, args.rate, rng)
        end_to_end(result, args.out, second)
    return 0


_CHILD = """
import sys
from rtlab.cli import main
rc = main(sys.argv[1:])
with open("/proc/self/status") as f:
    hwm = next(line.split()[1] for line in f if line.startswith("VmHWM:"))
print(f"VmHWM {hwm}", file=sys.stderr)
sys.exit(rc)
"""


def timed_child(argv: list[str], what: str) -> None:
    """Run rtlab with ARGV in a new process; print its wall time and peak RSS.

    The peak is the child's own VmHWM after exec (getrusage of children would count the
    parent's pages the forked child saw before exec)."""
    t = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", _CHILD, *argv], check=True,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    dt = time.perf_counter() - t
    hwm = [int(line.split()[1]) for line in proc.stderr.splitlines()
           if line.startswith("VmHWM ")]
    shown = f"peak RSS {hwm[-1] / 1024:.0f} MB" if hwm else "peak RSS unknown"
    print(f"{what}: {dt:.2f} s, {shown}")


def end_to_end(result: RunResult, out: str, second: RunResult | None) -> None:
    from rtlab.results.store import Store

    with tempfile.TemporaryDirectory() as tmp:
        db = str(Path(tmp) / "scale.db")
        t = time.perf_counter()
        store = Store.open(db)
        store.add(result, probe_shape)
        if second is not None:
            store.add(second, probe_shape)
        store.close()
        add_s = time.perf_counter() - t
        size = Path(db).stat().st_size / 1e6
        print(f"store: added in {add_s:.1f} s, store file {size:.0f} MB")
        timed_child(["report", result.run_id, "--store", db, "-o", out],
                    f"`rtlab report {result.run_id}` (new process: start, load from the store, "
                    "render; target < 5 s, < 500 MB)")
        if second is not None:
            ids = [result.run_id, second.run_id]
            timed_child(["compare", *ids, "--store", db], f"`rtlab compare {' '.join(ids)}`")
            timed_child(["report", *ids, "--store", db, "-o", out],
                        f"`rtlab report {' '.join(ids)}`")


if __name__ == "__main__":
    raise SystemExit(main())
