#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A lab's year in one store (issue 28): monitor segments of many boards, then the
commands a lab engineer runs on one board, timed.

Starts a throw-away PostgreSQL server (as the tests do: tests/support/pg_server.py,
Unix socket only, removed at the end), or uses a fresh SQLite file (`--backend
sqlite`), and fills it with `--boards` boards x `--days` days of `rtlab monitor`
segments (`--segment`, default 1 h, each a stored timer run of `--cpus` CPUs with its
1-s window maxima). The first segment of every board goes through `Store.add` (the
store's own validation, summary columns and serial form); the others are that board's
segment with its own run id and start time: the same JSON, patched, compressed as
`Store.add` does, inserted in batches into the store's own `runs` and `run_digests`
tables with the row `Store.add` computed (the same numbers give the same columns).
Every stored run is a consistent result that `rtlab results show` reads.

Then, each as a new process, `--repeat` times:
* `rtlab history --host H --day D` of one board (target < 1 s);
* `rtlab history --host H --day D --days 7 --plot F` of one board's week (target < 5 s);
* `rtlab report` of one board's week of segments (every segment a run section: slow);
* `rtlab results list` (the newest 20 of all).

Usage: python3 bench/lab_year_pg.py [--boards 50] [--days 365] [--cpus 2]
       [--segment 1h] [--backend postgresql|sqlite] [--repeat 5] [--keep DIR]
       [--lock /run/rtlab-test-machine.lock]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import zlib
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np
from report_scale import WINDOW_NS, make_channel

from rtlab.probes.registry import shape as probe_shape
from rtlab.results.model import Phase, RunResult, load_result
from rtlab.results.store import Store
from rtlab.results.store.runs import row_values

ROOT = Path(__file__).resolve().parent.parent
START = datetime(2026, 1, 1, tzinfo=UTC)
_ID = "f0f0f0f0"  # placeholders of the template segment, patched per segment
_WALL = "2000-01-01T00:00:00.000000+00:00"
_REAL = 946_684_800_000_000_000  # _WALL in ns


def segment(host: str, cpus: int, seconds: int, rng: np.random.Generator) -> RunResult:
    chans = [make_channel(c, seconds, 1000, rng) for c in range(cpus)]
    return RunResult(
        run_id=_ID, status="completed", probe="timer",
        phases=[Phase("main", chans, seconds * WINDOW_NS)], rt_valid=True,
        scenario={"name": "monitor", "hash": None},
        provenance={"engine": {"system": {"hostname": host, "release": "6.12.0-rt5",
                                          "preempt": "PREEMPT_RT"},
                               "start_realtime_ns": _REAL},
                    "host": {"hostname": host, "start_wall": _WALL},
                    "monitor": {"board": host, "segment_s": seconds}})


def patched(text: str, board: int, k: int, seg_s: int) -> tuple[str, datetime, str]:
    """Segment k of a board: its template text with its run id and start time."""
    t = START + timedelta(seconds=k * seg_s)
    run_id = f"{board:02x}{k:06x}"
    return run_id, t, (text.replace(_ID, run_id)
                       .replace(_WALL, t.isoformat(timespec="microseconds"))
                       .replace(str(_REAL), str(int(t.timestamp()) * 1_000_000_000)))


def fill(loc: str, boards: int, days: float, cpus: int, seg_s: int, batch: int = 500) -> None:
    """Store every board's segments (see the module doc)."""
    per_board = int(days * 86400 // seg_s)
    store = Store.open(loc)
    runs, digests = store._tables["runs"], store._tables["run_digests"]
    t_all = time.perf_counter()
    try:
        for b in range(boards):
            host = f"board{b:02d}"
            rng = np.random.default_rng(b)
            first = segment(host, cpus, seg_s, rng)
            row = row_values(first, probe_shape("timer"))
            text = json.dumps(first.to_dict(packed=True), separators=(",", ":"))
            assert all(text.count(p) == 1 for p in (_ID, _WALL, str(_REAL))), \
                "template not patchable"
            # the first through the store's API: validation, schema, summary columns
            store.add(load_result(json.loads(patched(text, b, 0, seg_s)[2])), probe_shape)
            rows: list[dict] = []
            pending: list[dict] = []
            with store._engine.begin() as conn:
                for k in range(1, per_board):
                    run_id, t, body = patched(text, b, k, seg_s)
                    raw = body.encode()
                    rows.append(row | {"id": run_id, "created": t,
                                       "result_z": zlib.compress(raw, 6)})
                    pending.append({"id": run_id, "sha256": hashlib.sha256(raw).hexdigest()})
                    if len(rows) >= batch:
                        conn.execute(runs.insert(), rows)
                        conn.execute(digests.insert(), pending)
                        rows, pending = [], []
                if rows:
                    conn.execute(runs.insert(), rows)
                    conn.execute(digests.insert(), pending)
            done = (b + 1) * per_board
            el = time.perf_counter() - t_all
            print(f"  {host}: {per_board} segments; {done:,} stored in {el:.0f} s",
                  flush=True)
    finally:
        store.close()


def timed(argv: list[str], repeat: int) -> tuple[list[float], str]:
    """Wall times of `rtlab ARGV` as new processes; the CPU time (user + system) of
    each is printed too: on a loaded machine it is the steadier figure."""
    import resource

    times, cpu, out = [], [], ""
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "rtlab", *argv], capture_output=True,
                              text=True, check=False, cwd=ROOT)
        times.append(time.perf_counter() - t)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        if proc.returncode != 0:
            raise SystemExit(f"`rtlab {' '.join(argv)}` failed ({proc.returncode}): "
                             f"{proc.stderr.strip()[-500:]}")
        out = proc.stdout
    print(f"  CPU time (user + system) median {statistics.median(cpu):.2f} s, "
          f"{min(cpu):.2f}-{max(cpu):.2f} s; load average {os.getloadavg()[0]:.1f}",
          flush=True)
    return times, out


def show(what: str, times: list[float], target: float | None) -> None:
    med = statistics.median(times)
    goal = f" (target < {target:g} s: {'met' if med < target else 'MISSED'})" if target else ""
    print(f"{what}: median {med:.2f} s, {min(times):.2f}-{max(times):.2f} s over "
          f"{len(times)}{goal}", flush=True)


def _has_host_index(loc: str) -> bool:
    from sqlalchemy import inspect

    from rtlab.results.store.schema import RUNS_BY_HOST

    store = Store.open(loc, create=False)
    try:
        with store._engine.connect() as conn:
            return RUNS_BY_HOST in {ix["name"] for ix in inspect(conn).get_indexes("runs")}
    finally:
        store.close()


def measure(loc: str, boards: int, days: float, seg_s: int, repeat: int,
            report_repeat: int) -> None:
    host = f"board{boards // 2:02d}"
    day = START + timedelta(days=max(0.0, days - 1) // 2)
    store = Store.open(loc, create=False)
    try:
        week0 = day - timedelta(days=3)
        ids = [r.id for r in store.select(hosts=[host], probes=["timer"], since=week0)
               if r.created < week0 + timedelta(days=7)]
    finally:
        store.close()
    print(f"measured on {host}: day {day.date()}, week from {week0.date()} "
          f"({len(ids)} segments)", flush=True)
    history = ["history", "--host", host, "--day", day.date().isoformat(), "--store", loc]
    if not _has_host_index(loc):  # a store filled by an rtlab before the index
        t, out = timed(history, repeat)
        assert host in out
        show(f"`rtlab history --host {host} --day {day.date()}`, store without the host "
             "index", t, 1.0)
        store = Store.open(loc)  # the next write adds it: a segment of another board
        try:
            b = (boards // 2 + 1) % boards
            last = store.select(hosts=[f"board{b:02d}"], probes=["timer"])[-1]
            res = store.get(last.id)  # its next segment: the same numbers an hour later
            res.run_id = f"{b:02x}ffffff"
            res.provenance["host"]["start_wall"] = (
                last.created + timedelta(seconds=seg_s)).isoformat(timespec="microseconds")
            res.provenance["engine"]["start_realtime_ns"] += seg_s * 1_000_000_000
            store.add(res, probe_shape)
        finally:
            store.close()
        assert _has_host_index(loc)
    t, out = timed(history, repeat)
    assert host in out
    show(f"`rtlab history --host {host} --day {day.date()}`", t, 1.0)
    t, _ = timed(["results", "list", "--store", loc], repeat)
    show("`rtlab results list` (newest 20 of all)", t, None)
    with tempfile.TemporaryDirectory() as tmp:
        plot = str(Path(tmp) / "week.png")
        week = ["history", "--host", host, "--day", week0.date().isoformat(), "--days", "7",
                "--plot", plot, "--store", loc]
        t, out = timed(week, repeat)
        assert host in out and Path(plot).stat().st_size > 10_000
    show(f"`rtlab history --host {host} --day {week0.date()} --days 7 --plot week.png` "
         "(the board's week)", t, 5.0)
    with tempfile.TemporaryDirectory() as tmp:
        html = str(Path(tmp) / "week.html")
        t, _ = timed(["report", *ids, "--by", "host", "--store", loc, "-o", html],
                     report_repeat)
        size = Path(html).stat().st_size / 1e6
    show(f"`rtlab report` of {host}'s week ({len(ids)} segments, --by host; "
         f"HTML {size:.1f} MB)", t, 5.0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--boards", type=int, default=50)
    ap.add_argument("--days", type=float, default=365.0)
    ap.add_argument("--cpus", type=int, default=2, help="CPUs measured per board")
    ap.add_argument("--segment", default="1h", help="segment length (monitor --segment)")
    ap.add_argument("--backend", choices=("postgresql", "sqlite"), default="postgresql")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--keep", metavar="DIR",
                    help="sqlite: keep the store in DIR (filled once, measured again)")
    ap.add_argument("--lock", metavar="FILE",
                    help="take this flock (a shared machine's bench lock) for the "
                    "measurements, after the fill")
    ap.add_argument("--report-repeat", type=int, default=1,
                    help="times the week report is measured (it is slow: default 1)")
    ap.add_argument("--store", metavar="LOC",
                    help="measure this store (filled before by this bench) instead")
    ap.add_argument("--start-file", metavar="FILE",
                    help="after the fill, wait until FILE exists before measuring")
    args = ap.parse_args()
    from rtlab.scenario.units import parse_duration

    seg_s = int(parse_duration(args.segment) / 1e9) if not args.segment.isdigit() \
        else int(args.segment)
    server = None
    tmp = tempfile.TemporaryDirectory()
    try:
        if args.store:
            loc = args.store
        elif args.backend == "postgresql":
            from tests.support.pg_server import PgServer

            server = PgServer.start()
            dbname = server.create_database("rtlab_year")
            loc = server.url(dbname)
        else:
            base = Path(args.keep) if args.keep else Path(tmp.name)
            base.mkdir(parents=True, exist_ok=True)
            loc = str(base / "year.db")
        if not args.store and (not Path(loc).exists() or args.backend == "postgresql"):
            t = time.perf_counter()
            fill(loc, args.boards, args.days, args.cpus, seg_s)
            print(f"filled: {args.boards} boards x {args.days:g} days of {seg_s} s segments "
                  f"({args.cpus} CPUs) in {time.perf_counter() - t:.0f} s", flush=True)
        if server is not None and not args.store:
            import psycopg

            with psycopg.connect(host=str(server.socket_dir), user=server.user,
                                 dbname=dbname, autocommit=True) as conn:
                size = conn.execute("SELECT pg_database_size(current_database())").fetchone()
                conn.execute("ANALYZE")
            print(f"database size {size[0] / 1e9:.2f} GB", flush=True)
        elif "://" not in loc:
            print(f"store file {Path(loc).stat().st_size / 1e9:.2f} GB", flush=True)
        while args.start_file and not Path(args.start_file).exists():
            time.sleep(2)  # filled; measure once told to (the fill takes long)
        if args.lock:  # the machine's bench lock for the measurements only, not the fill
            import fcntl

            lock = open(args.lock, "a")  # noqa: SIM115 (held until the process ends)
            t = time.perf_counter()
            fcntl.flock(lock, fcntl.LOCK_EX)
            print(f"took {args.lock} after {time.perf_counter() - t:.0f} s", flush=True)
        measure(loc, args.boards, args.days, seg_s, args.repeat, args.report_repeat)
    finally:
        if server is not None:
            server.stop()
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
