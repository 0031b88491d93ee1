#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Cost of `rtlab run --trace`: rtlab-probe timer with tracing off vs on.

Interleaved rounds (`--modes off,full,flight`: each mode comes first in turn, so drift
does not favour one) of the timer probe on one CPU, SCHED_FIFO 99, 1 ms interval; the
traced runs record with the engine's own recorder, exactly as the runner has it record
(`--trace-dir`: all default events, the reader thread on a housekeeping CPU), in full
or in flight mode (`--trace-mode flight`, the monitor's: only the windows around the
samples above the trigger are written, capped in bytes per second). Per run:

* the measured CPU's latency: p50/p99/p99.9/max, and the on/off ratio of the medians
  over rounds (on a noisy VM the run-to-run spread is the thing to compare against);
* CPU time per second of measurement, from the kernel's per-thread accounting
  (/proc/PID/task/TID/schedstat, polled every 50 ms): the measuring thread (on the
  measured CPU: it pays for the tracepoints it hits), the recorder's reader thread (on
  the housekeeping CPU), and the whole process (its rusage);
* the capture: bytes written per second (meta.json `bytes`, or the flight recorder's
  `bytes_written`, over the recorded time), pages per second, events lost, and in
  flight mode the windows kept and dropped by the cap.

Usage (as root, after scripts/setup.sh):
    .venv/bin/python bench/trace_overhead.py --rounds 3 --duration 10 --cpu 1 \
        --modes off,full,flight
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from benchlib import channel_percentile  # noqa: E402

from rtlab.engine.locate import find_probe  # noqa: E402
from rtlab.runner.tracing import CAPTURE_LIMIT_MB, lost_count  # noqa: E402

PCTS = (50.0, 99.0, 99.9)
POLL_S = 0.05


def _runtime_ns(pid: int) -> dict[int, int]:
    """CPU time (ns, on the CPU) of every thread of `pid` now."""
    out: dict[int, int] = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                out[int(tid)] = int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return out


def run_probe(probe: str, cpu: int, duration_s: float, trace_dir: Path | None,
              reader_cpu: int | None, buffer_kb: int, mode: str = "full",
              flight: list[str] | None = None) -> dict[str, Any]:
    """One run of the timer probe; its latency percentiles and CPU costs."""
    cmd = [probe, "timer", "--cpus", str(cpu), "--policy", "fifo", "--priority", "99",
           "--interval", "1ms", "--duration", f"{duration_s:g}s"]
    if trace_dir is not None:
        cmd += ["--trace-dir", str(trace_dir), "--trace-buffer-kb", str(buffer_kb),
                "--trace-limit-mb", str(CAPTURE_LIMIT_MB)]
        if reader_cpu is not None:
            cmd += ["--trace-reader-cpu", str(reader_cpu)]
        if mode == "flight":
            cmd += ["--trace-mode", "flight", *(flight or [])]
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, text=True)
        last: dict[int, int] = {}
        while True:
            now = _runtime_ns(proc.pid)
            last.update(now)  # a thread that has ended keeps its last value
            pid, status, rusage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            time.sleep(POLL_S)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        lines = [json.loads(ln) for ln in out if ln.startswith("{")]
        err.seek(0)
        stderr = err.read()
    header = next((r for r in lines if r.get("type") == "header"), None)
    result = next((r for r in lines if r.get("type") == "result"), None)
    if proc.returncode != 0 or header is None or result is None:
        raise SystemExit(f"rtlab-probe failed (exit {proc.returncode}): {stderr.strip()}")
    elapsed_s = result["elapsed_ns"] / 1e9
    ch = result["channels"][0]
    vals = {p: channel_percentile(ch, p) for p in PCTS}
    row: dict[str, Any] = {f"p{p:g}": float("nan") if v is None else v / 1e3
                           for p, v in vals.items()}
    row["max"] = ch["max_ns"] / 1e3
    row["samples"] = ch["samples"]
    measuring = {int(t["tid"]) for t in header["effective"]["threads"]}
    others = sorted(t for t in last if t != proc.pid and t not in measuring)
    # the engine starts the measuring threads, then the trace reader, then the reporter
    reader = others[0] if trace_dir is not None and others else None
    row["measured_ms_s"] = sum(last.get(t, 0) for t in measuring) / 1e6 / elapsed_s
    row["reader_ms_s"] = last.get(reader, 0) / 1e6 / elapsed_s if reader else None
    row["process_ms_s"] = (rusage.ru_utime + rusage.ru_stime) * 1e3 / elapsed_s
    if trace_dir is not None:
        meta = json.loads((trace_dir / "meta.json").read_text())
        m = meta["meta"]
        rec_s = max((m["stopped_ns"] - m["started_ns"]) / 1e9, 1e-9)
        fl = m.get("flight") or {}
        row["bytes_s"] = (fl["bytes_written"] if fl else m["bytes"]) / rec_s
        row["pages_s"] = ((fl["pages_written"] if fl else sum(int(v) for v in
                                                               m["pages"].values())) / rec_s)
        row["windows"] = (f"{fl.get('windows_kept', 0)} kept, "
                          f"{fl.get('windows_dropped_rate', 0)} over the cap, "
                          f"{fl.get('triggers', 0)} triggers" if fl else "")
        row["lost"] = sum(lost_count(v) for v in meta["lost"].values())
        row["dropped"] = sum(int(v) for v in (m.get("dropped_pages") or {}).values())
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=float, default=10.0, help="seconds per run")
    ap.add_argument("--cpu", type=int, default=1)
    ap.add_argument("--buffer-kb", type=int, default=4096)
    ap.add_argument("--modes", default="off,full",
                    help="comma list of off, full, flight (interleaved, order rotated)")
    ap.add_argument("--flight", default="--trace-trigger 100us --trace-rate 256k",
                    help="the flight recorder's options")
    args = ap.parse_args()
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if not modes or any(m not in ("off", "full", "flight") for m in modes):
        print("--modes: a comma list of off, full, flight", file=sys.stderr)
        return 2
    if os.geteuid() != 0:
        print("needs root (SCHED_FIFO, tracefs)", file=sys.stderr)
        return 4
    probe = str(find_probe())
    online = sorted(os.sched_getaffinity(0))
    reader = next((c for c in online if c != args.cpu), None)
    rows: dict[str, list[dict[str, Any]]] = {m: [] for m in modes}
    print(f"timer probe, CPU {args.cpu}, FIFO 99, 1 ms, {args.duration:g} s per run, "
          f"engine recorder, reader CPU {reader}; flight: {args.flight}")
    print(f"{'run':<10}{'p50 µs':>8}{'p99 µs':>8}{'p99.9':>8}{'max µs':>8}"
          f"{'meas ms/s':>10}{'reader':>8}{'proc':>8}  capture")
    with tempfile.TemporaryDirectory(prefix="rtlab-trace-cost-") as tmp:
        for r in range(args.rounds):
            k = r % len(modes)
            for mode in modes[k:] + modes[:k]:  # each mode first in turn
                tdir = Path(tmp) / f"{mode}{r}" if mode != "off" else None
                row = run_probe(probe, args.cpu, args.duration, tdir, reader, args.buffer_kb,
                                mode, args.flight.split())
                rows[mode].append(row)
                extra = ""
                if mode != "off":
                    extra = (f"{row['bytes_s'] / 1024:.0f} KiB/s, {row['pages_s']:.0f} pages/s, "
                             f"{row['lost']} lost, {row['dropped']} not written"
                             + (f"; {row['windows']}" if row.get("windows") else ""))
                rd = "-" if row["reader_ms_s"] is None else f"{row['reader_ms_s']:.2f}"
                print(f"{mode + ' #' + str(r + 1):<10}{row['p50']:>8.1f}{row['p99']:>8.1f}"
                      f"{row['p99.9']:>8.1f}{row['max']:>8.0f}{row['measured_ms_s']:>10.2f}"
                      f"{rd:>8}{row['process_ms_s']:>8.2f}  {extra}", flush=True)
    base = modes[0]
    print(f"median over rounds ({' | '.join(modes)}; ratios to {base}):")
    for key in ("p50", "p99", "p99.9", "max", "measured_ms_s", "process_ms_s"):
        med = {m: statistics.median(x[key] for x in rows[m]) for m in modes}
        ratios = " | ".join(f"{med[m] / med[base]:5.2f}" for m in modes[1:]) if med[base] else ""
        print(f"  {key:<14} " + " | ".join(f"{med[m]:10.2f}" for m in modes) + f"   {ratios}")
    for key in ("reader_ms_s", "bytes_s", "pages_s"):
        for m in modes:
            if m != "off":
                print(f"  {key:<14} {m:<6} {statistics.median(x[key] for x in rows[m]):12.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
