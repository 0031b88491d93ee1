#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Scrape speed of the monitor's Prometheus exporter (issue 15: < 50 ms for 64 CPUs).

Builds a `LiveState` of B boards x 64 CPUs whose fine histograms come from a lognormal
latency sample per CPU (a few hundred non-empty log-linear buckets each, as a day of a
busy board gives), serves it with `MetricsServer` on 127.0.0.1 and times N scrapes end
to end over HTTP (request sent to body read): plain text without compression, and as
Prometheus 2.x asks (its Accept header, and gzip: rtlab answers it with the text format,
which Prometheus accepts beside OpenMetrics; the peer, the client library's own server,
answers OpenMetrics). Also the same
collection and text encoding without HTTP, and the body size (plain and gzip).

Two states: unchanged between scrapes (a board that is down), and every CPU updated
before each scrape with a snapshot of 1,000 samples (a watched board: its engine
reports every second, Prometheus scrapes every 15 s or so), which the exporter's cache
of re-binned histograms cannot serve. The updates are not timed.

Peer: the same series from the client library's own `Histogram` (same bounds and
labels) served by its `start_http_server`, timed the same way: what a scrape costs
without rtlab's view copy and re-binning.

--parts times the pieces of one scrape of 1 board instead, without HTTP: the live
view's copy, rtlab's metric families (updated or unchanged), the client library's
encoders (text; OpenMetrics as Prometheus 2.x and 3.x ask for it) and gzip.

Usage: python3 bench/monitor_scrape.py [--boards 1 8] [--cpus 64] [--scrapes 50] [--parts]
"""

from __future__ import annotations

import argparse
import gzip
import statistics
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from prometheus_client import CollectorRegistry, Histogram, generate_latest, start_http_server
from prometheus_client.core import Metric
from prometheus_client.exposition import choose_encoder

from rtlab.monitor.exporter import BOUNDS_NS, make_registry
from rtlab.monitor.http import MetricsServer
from rtlab.monitor.live import LiveState
from rtlab.results.histogram import index_array

SAMPLES_PER_CPU = 200_000
SNAPSHOT_SAMPLES = 1_000  # one engine snapshot of one CPU at 1 kHz
# what Prometheus 2.x sends at every scrape
PROMETHEUS_HEADERS = {
    "Accept": "application/openmetrics-text;version=1.0.0,application/openmetrics-text;"
              "version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1",
    "Accept-Encoding": "gzip"}
# Prometheus 3.x's Accept (default scrape protocols): the client library answers it
# with OpenMetrics too, escaping=allow-utf-8
PROMETHEUS_3_ACCEPT = (
    "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;"
    "encoding=delimited;q=0.6,application/openmetrics-text;version=1.0.0;"
    "escaping=allow-utf-8;q=0.5,application/openmetrics-text;version=0.0.1;q=0.4,"
    "text/plain;version=1.0.0;escaping=allow-utf-8;q=0.3,text/plain;version=0.0.4;q=0.2,"
    "*/*;q=0.1")


def fine_buckets(rng: np.random.Generator, n: int = SAMPLES_PER_CPU,
                 tail: int = 200) -> tuple[dict[int, int], int, int, int]:
    """(fine buckets, samples, sum ns, max ns) of one CPU: a lognormal body around
    ~20 µs with a long tail."""
    values = rng.lognormal(mean=np.log(20_000), sigma=0.4, size=n)
    values = np.concatenate([values, rng.pareto(1.5, tail) * 50_000 + 100_000])
    ns = values.astype(np.int64)
    idx, counts = np.unique(index_array(ns), return_counts=True)
    return dict(zip(idx.tolist(), counts.tolist(), strict=True)), len(ns), int(ns.sum()), \
        int(ns.max())


def build_live(boards: int, cpus: int,
               seed: int = 1) -> tuple[LiveState, float, Callable[[], None]]:
    """The live state, the mean number of non-empty fine buckets per CPU, and a function
    that adds one snapshot to every CPU as the watchers would."""
    rng = np.random.default_rng(seed)
    snap_rng = np.random.default_rng(seed + 1)
    live = LiveState()
    sizes = []
    snapshots = []
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
            snapshots.append((board, cpu, fine_buckets(snap_rng, SNAPSHOT_SAMPLES, 1)))

    def snapshot() -> None:
        t = time.time()
        for board, cpu, (buckets, n, total, mx) in snapshots:
            live.update(board, f"cpu{cpu}", cpu, samples=n, missed=0, sum_ns=total,
                        buckets=buckets, windows=[(t, mx)], min_ns=None, max_ns=mx, now=t)

    return live, statistics.fmean(sizes), snapshot


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


def nothing() -> None:
    pass


def time_scrapes(url: str, n: int, headers: dict[str, str] | None = None,
                 between: Callable[[], None] = nothing) -> tuple[list[float], int]:
    """Wall times (ms) of n scrapes (`between` runs before each, untimed) and the size
    of the last body as sent."""
    times = []
    size = 0
    req = urllib.request.Request(url, headers=headers or {})
    for _ in range(n):
        between()
        t0 = time.perf_counter()
        with urllib.request.urlopen(req, timeout=30) as resp:
            body = resp.read()
        times.append((time.perf_counter() - t0) * 1e3)
        size = len(body)
    return times, size


def time_encode(registry: CollectorRegistry, n: int,
                between: Callable[[], None] = nothing) -> list[float]:
    """Wall times (ms) of n collections + text encodings, without HTTP."""
    times = []
    for _ in range(n):
        between()
        t0 = time.perf_counter()
        generate_latest(registry)
        times.append((time.perf_counter() - t0) * 1e3)
    return times


def measure(url: str, scrapes: int, between: Callable[[], None] = nothing
            ) -> tuple[list[float], list[float], int, int]:
    """Plain scrapes, scrapes as Prometheus asks, plain and gzip body sizes."""
    time_scrapes(url, 3)  # warm up (imports, caches)
    times, size = time_scrapes(url, scrapes, between=between)
    prom, _ = time_scrapes(url, scrapes, PROMETHEUS_HEADERS, between)
    _, zsize = time_scrapes(url, 1, {"Accept-Encoding": "gzip"})
    return times, prom, size, zsize


def row(label: str, series: int, times: list[float], prom: list[float], size: int,
        zsize: int, encode: list[float]) -> str:
    return (f"| {label} | {series} | {min(times):.1f} | {statistics.median(times):.1f} | "
            f"{max(times):.1f} | {min(prom):.1f} / {statistics.median(prom):.1f} | "
            f"{statistics.median(encode):.1f} | {size / 1024:.0f} KiB | "
            f"{zsize / 1024:.0f} KiB |")


def bench_case(boards: int, cpus: int, scrapes: int) -> list[str]:
    live, fine, snapshot = build_live(boards, cpus)
    series = boards * cpus
    out = []
    for state, between in (("unchanged", nothing), ("every CPU updated", snapshot)):
        with MetricsServer(live, "127.0.0.1", 0) as srv:
            times, prom, size, zsize = measure(srv.url, scrapes, between)
        encode = time_encode(make_registry(live.view), scrapes, between)
        out.append(row(f"rtlab, {boards} x {cpus} CPUs ({fine:.0f} fine buckets/CPU), "
                       f"{state}", series, times, prom, size, zsize, encode))
    peer = build_peer(boards, cpus)
    encode = time_encode(peer, scrapes)
    server, _thread = start_http_server(0, addr="127.0.0.1", registry=peer)
    try:
        times, prom, size, zsize = measure(
            f"http://127.0.0.1:{server.server_address[1]}/metrics", scrapes)
    finally:
        server.shutdown()
        server.server_close()
    out.append(row(f"peer: client Histogram, {boards} x {cpus}", series, times, prom, size,
                   zsize, encode))
    return out


def parts(cpus: int, n: int) -> list[str]:
    """Min and median (ms) of each piece of one scrape of 1 board x `cpus` CPUs."""
    from rtlab.monitor.exporter import RebinCache, families

    live, fine, snapshot = build_live(1, cpus)
    cache, fresh = RebinCache(), RebinCache()
    fams = families(live.view(), cache=cache)

    class Fixed:  # the same families at every encoding
        def collect(self) -> list[Metric]:
            return fams

    body = generate_latest(Fixed())
    text, om2, om3 = (choose_encoder(a)[0] for a in (
        "", PROMETHEUS_HEADERS["Accept"], PROMETHEUS_3_ACCEPT))

    view = live.view()

    def update() -> None:  # untimed: a snapshot into every CPU, then the view
        nonlocal view
        snapshot()
        view = live.view()

    # (piece, what runs untimed before it, the piece)
    pieces: list[tuple[str, Callable[[], None], Callable[[], object]]] = [
        ("copy of the live state (`LiveState.view`)", nothing, live.view),
        ("metric families, every CPU updated", update,
         lambda: families(view, cache=fresh)),
        ("metric families, unchanged", nothing, lambda: families(view, cache=cache)),
        ("text encoding (`generate_latest`)", nothing, lambda: text(Fixed())),
        ("OpenMetrics encoding, as Prometheus 2.x asks", nothing, lambda: om2(Fixed())),
        ("OpenMetrics encoding, as Prometheus 3.x asks", nothing, lambda: om3(Fixed())),
        ("gzip level 9 (the client library's)", nothing, lambda: gzip.compress(body, 9)),
        ("gzip level 1 (rtlab's)", nothing, lambda: gzip.compress(body, 1)),
    ]
    lines = [f"1 board x {cpus} CPUs ({fine:.0f} fine buckets/CPU), {n} times each:",
             "| piece | min ms | median ms |", "|---|---|---|"]
    for name, before, fn in pieces:
        times = []
        for _ in range(n):
            before()
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
        lines.append(f"| {name} | {min(times):.1f} | {statistics.median(times):.1f} |")
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--boards", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--cpus", type=int, default=64)
    ap.add_argument("--scrapes", type=int, default=50)
    ap.add_argument("--parts", action="store_true", help="time the pieces of a scrape")
    args = ap.parse_args()
    if args.parts:
        print("\n".join(parts(args.cpus, args.scrapes)))
        return 0
    lines = ["| case | series | scrape min ms | median ms | max ms | as Prometheus 2.x asks "
             "(gzip; rtlab: text, peer: OpenMetrics): min / median ms | encode only, median "
             "ms | body | gzip body |",
             "|---|---|---|---|---|---|---|---|---|"]
    for boards in args.boards:
        lines += bench_case(boards, args.cpus, args.scrapes)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
