#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Resident memory of the monitor's store writer over many stored segments, with and
without `release_free_memory` after each store pass (issue 15, item 5).

    .venv/bin/python bench/monitor_store_memory.py [--segments 60] [--seconds 600] \\
        [--raw SEGMENT.jsonl] [--rounds 2] [--out bench/out/monitor_store_memory.md]

Makes one real segment (the engine's timer probe on CPUs 0 and 1 at 1 kHz for
`--seconds`, without real-time priority: its records are what matters, not its
latencies; or takes `--raw`), then, in fresh processes taking turns (A, B, A, B, ...),
stores it `--segments` times as the monitor's writer does (one long-lived writer
thread, hence one allocator arena; the store opened, the segment read and stored, the
store closed), the main thread allocating a little meanwhile as the watchers do, and
reads VmRSS after each pass. The growth counts from the fifth pass (the store's modules
loaded) to the last; the table also shows the RSS at every tenth pass.
"""

from __future__ import annotations

import argparse
import queue
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchlib import default_probe, write_report

CASES = {"without release (before 0655a5d)": "plain",
         "with release_free_memory (gc + malloc_trim)": "release"}


def rss_kb() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def child(mode: str, raw: Path, n: int, db: Path) -> None:
    """One case in this process: print the RSS (kB) after each of `n` store passes."""
    from rtlab.monitor.checkpoint import Segment
    from rtlab.monitor.memory import release_free_memory
    from rtlab.monitor.segments import store_segment
    from rtlab.results.store import Store

    def store_pass(i: int) -> None:
        seg = Segment("b", f"{i:08x}", f"segments/b/{i:08x}.jsonl", 0.0, status="ended")
        store = Store.open(str(db))
        try:
            store_segment(store, raw, seg, "bench", None)
        finally:
            store.close()
        if mode == "release":
            release_free_memory()

    todo: queue.Queue[int | None] = queue.Queue()
    done: queue.Queue[int] = queue.Queue()

    def writer() -> None:
        while (i := todo.get()) is not None:
            store_pass(i)
            done.put(i)

    t = threading.Thread(target=writer)
    t.start()
    out = []
    for i in range(n):
        todo.put(i)
        done.get()
        junk = [{"n": j} for j in range(20000)]  # the watchers' allocations meanwhile
        del junk
        out.append(rss_kb())
    todo.put(None)
    t.join()
    print(" ".join(map(str, out)))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--segments", type=int, default=60)
    ap.add_argument("--seconds", type=int, default=600, help="length of the segment")
    ap.add_argument("--raw", help="a segment's raw file to use instead of making one")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", default=str(Path(__file__).parent / "out" /
                                         "monitor_store_memory.md"))
    ap.add_argument("--child", nargs=4, metavar=("MODE", "RAW", "N", "DB"),
                    help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        mode, raw, n, db = args.child
        child(mode, Path(raw), int(n), Path(db))
        return 0
    tmp = Path(tempfile.mkdtemp(prefix="rtlab-storemem-"))
    raw = Path(args.raw) if args.raw else tmp / "segment.jsonl"
    if not args.raw:
        with open(raw, "w") as f:
            subprocess.run([default_probe(), "timer", "--cpus", "0,1", "--interval", "1ms",
                            "--duration", f"{args.seconds}s", "--allow-non-rt",
                            "--no-mlock"], stdout=f, stderr=subprocess.DEVNULL, check=True)
    rows: dict[str, list[tuple[int, int, int, list[int]]]] = {k: [] for k in CASES}
    for r in range(args.rounds):
        for label, mode in CASES.items():
            db = tmp / f"{mode}{r}" / "rtlab.db"
            p = subprocess.run([sys.executable, __file__, "--child", mode, str(raw),
                                str(args.segments), str(db)],
                               capture_output=True, text=True, check=True)
            kb = [int(x) for x in p.stdout.split()]
            rows[label].append((kb[4], kb[-1], kb[-1] - kb[4], kb[9::10]))
    lines = [f"{args.segments} store passes of one segment "
             f"({raw.stat().st_size / 1e6:.1f} MB of raw output) per process, "
             f"{args.rounds} rounds taking turns", "",
             "| case | round | RSS after 5 passes | after the last | growth | RSS every 10 "
             "passes, MiB |",
             "|---|---|---|---|---|---|"]
    for label, vals in rows.items():
        for r, (a, b, g, tens) in enumerate(vals, 1):
            lines.append(f"| {label} | {r} | {a / 1024:.1f} MiB | {b / 1024:.1f} MiB | "
                         f"{g:+d} kB | {' '.join(f'{x / 1024:.1f}' for x in tens)} |")
    return write_report("\n".join(lines), args.out)


if __name__ == "__main__":
    sys.exit(main())
