#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Scrape speed of the monitor's Prometheus exporter (issue 15: < 50 ms for 64 CPUs).

Builds a `LiveState` of B boards x 64 CPUs whose fine histograms come from a lognormal
latency sample per CPU (a few hundred non-empty log-linear buckets each, as a day of a
busy board gives), serves it with `MetricsServer` on 127.0.0.1 and times N scrapes end
to end over HTTP (request sent to body read), the same collection and text encoding
without HTTP, and the body size (plain and gzip).

Peer: the same series from the client library's own `Histogram` (same bounds and
labels) served by its `start_http_server`, timed the same way: what a scrape costs
without rtlab's view copy and re-binning.

Usage: python3 bench/monitor_scrape.py [--boards 1 8] [--cpus 64] [--scrapes 50]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from prometheus_client import CollectorRegistry, Histogram, generate_latest, start_http_server

from rtlab.monitor.exporter import BOUNDS_NS, make_registry
from rtlab.monitor.http import MetricsServer
from rtlab.monitor.live import LiveState
from rtlab.results.histogram import index_array

SAMPLES_PER_CPU = 200_000


def fine_buckets(rng: np.random.Generator) -> tuple[dict[int, int], int, int, int]:
    """(fine buckets, samples, sum ns, max ns) of one CPU: a lognormal body around
    ~20 µs with a long tail."""
    values = rng.lognormal(mean=np.log(20_000), sigma=0.4, size=SAMPLES_PER_CPU)
    values = np.concatenate([values, rng.pareto(1.5, 200) * 50_000 + 100_000])
    ns = values.astype(np.int64)
    idx, counts = np.unique(index_array(ns), return_counts=True)
    return dict(zip(idx.tolist(), counts.tolist(), strict=True)), len(ns), int(ns.sum()), \
        int(ns.max())


def build_live(boards: int, cpus: int, seed: int = 1) -> tuple[LiveState, float]:
    """The live state, and the mean number of non-empty fine buckets per CPU."""
    rng = np.random.default_rng(seed)
    live = LiveState()
    sizes = []
    now = time.time()
    for b in range(boards):
        board = f"board{b:02d}"
        live.set_board(board, up=True, probe_ok=True, last_seen=now, segments=100)
        for cpu in range(cpus):
            buckets, n, total, mx = fine_buckets(rng)
            sizes.append(len(buckets))
            windows = [(now - i, mx // (1 + i % 7)) for i in range(60)]
            live.update(board, f"cpu{cpu}", cpu, samples=n, missed=0, sum_ns=total,
                        buckets=buckets, windows=windows, min_ns=1_000, max_ns=mx, now=now)
    return live, statistics.fmean(sizes)


def build_peer(boards: int, cpus: int, seed: int = 1) -> CollectorRegistry:
    """The same series as a plain client-library Histogram (a few observations per
    series: a scrape's cost depends on the series, not on how many were observed)."""
    rng = np.random.default_rng(seed)
    registry = CollectorRegistry()
    hist = Histogram("rtlab_latency_seconds", "peer", ["board", "cpu", "probe"],
                     buckets=[b / 1e9 for b in BOUNDS_NS], registry=registry)
    for b in range(boards):
        for cpu in range(cpus):
            child = hist.labels(f"board{b:02d}", str(cpu), "timer")
            for v in rng.lognormal(np.log(20e-6), 0.6, 50):
                child.observe(float(v))
    return registry


def time_scrapes(url: str, n: int, gzip_too: bool = True) -> tuple[list[float], int, int]:
    """Wall times (ms) of n scrapes, the body size and the gzip-encoded body size."""
    times = []
    size = 0
    for _ in range(n):
        t0 = time.perf_counter()
        with urllib.request.urlopen(url, timeout=30) as resp:
            body = resp.read()
        times.append((time.perf_counter() - t0) * 1e3)
        size = len(body)
    zsize = 0
    if gzip_too:
        req = urllib.request.Request(url, headers={"Accept-Encoding": "gzip"})
        with urllib.request.urlopen(req, timeout=30) as resp:
            zsize = len(resp.read())
    return times, size, zsize


def time_encode(registry: CollectorRegistry, n: int) -> list[float]:
    """Wall times (ms) of n collections + text encodings, without HTTP."""
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        generate_latest(registry)
        times.append((time.perf_counter() - t0) * 1e3)
    return times


def row(label: str, series: int, times: list[float], size: int, zsize: int,
        encode: list[float]) -> str:
    return (f"| {label} | {series} | {min(times):.1f} | {statistics.median(times):.1f} | "
            f"{max(times):.1f} | {statistics.median(encode):.1f} | {size / 1024:.0f} KiB | "
            f"{zsize / 1024:.0f} KiB |")


def bench_case(boards: int, cpus: int, scrapes: int) -> list[str]:
    live, fine = build_live(boards, cpus)
    series = boards * cpus
    with MetricsServer(live, "127.0.0.1", 0) as srv:
        time_scrapes(srv.url, 3, gzip_too=False)  # warm up (imports, caches)
        times, size, zsize = time_scrapes(srv.url, scrapes)
    encode = time_encode(make_registry(live.view), scrapes)
    out = [row(f"rtlab, {boards} x {cpus} CPUs ({fine:.0f} fine buckets/CPU)", series,
               times, size, zsize, encode)]
    peer = build_peer(boards, cpus)
    encode = time_encode(peer, scrapes)
    server, _thread = start_http_server(0, addr="127.0.0.1", registry=peer)
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/metrics"
        time_scrapes(url, 3, gzip_too=False)
        times, size, zsize = time_scrapes(url, scrapes)
    finally:
        server.shutdown()
        server.server_close()
    out.append(row(f"peer: client Histogram, {boards} x {cpus}", series, times, size, zsize,
                   encode))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--boards", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--cpus", type=int, default=64)
    ap.add_argument("--scrapes", type=int, default=50)
    args = ap.parse_args()
    lines = ["| case | series | scrape min ms | median ms | max ms | encode only, median ms "
             "| body | gzip body |",
             "|---|---|---|---|---|---|---|---|"]
    for boards in args.boards:
        lines += bench_case(boards, args.cpus, args.scrapes)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
