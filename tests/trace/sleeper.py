# SPDX-License-Identifier: MIT
"""A tiny SCHED_FIFO periodic sleeper standing in for `rtlab-probe timer` in tests.

Absolute CLOCK_MONOTONIC deadlines (clock_nanosleep TIMER_ABSTIME); writes a
samples file in the engine's format (at_ns = deadline relative to the start) and
a JSON line {"start_monotonic_ns", "tid", "cpu"}; optionally writes
`rtlab spike ...` markers to a trace_marker file for samples above a threshold.
Usage: sleeper.py CPU PRIO INTERVAL_US DURATION_S SAMPLES JSON [MARKER THRESHOLD_US]
"""

from __future__ import annotations

import ctypes
import gc
import json
import os
import struct
import sys
import time


class Timespec(ctypes.Structure):
    _fields_ = (("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long))


def main() -> int:
    cpu, prio, interval_us, duration_s = (
        int(sys.argv[1]),
        int(sys.argv[2]),
        int(sys.argv[3]),
        float(sys.argv[4]),
    )
    samples_path, json_path = sys.argv[5], sys.argv[6]
    marker = sys.argv[7] if len(sys.argv) > 7 else None
    thr = int(sys.argv[8]) * 1000 if len(sys.argv) > 8 else 0
    libc = ctypes.CDLL(None, use_errno=True)
    os.sched_setaffinity(0, [cpu])
    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(prio))
    libc.mlockall(3)
    gc.disable()
    mfd = os.open(marker, os.O_WRONLY) if marker else -1
    interval = interval_us * 1000
    recs = bytearray()
    ts = Timespec()
    start = time.monotonic_ns()
    deadline = start + interval
    end = start + int(duration_s * 1e9)
    nanosleep = libc.clock_nanosleep
    pts = ctypes.byref(ts)
    while deadline < end:
        ts.tv_sec, ts.tv_nsec = divmod(deadline, 1_000_000_000)
        nanosleep(1, 1, pts, None)
        now = time.monotonic_ns()
        lat = now - deadline
        recs += struct.pack("<IIQQ", 0, 0, deadline - start, lat)
        if mfd >= 0 and lat > thr:
            os.write(
                mfd,
                f"rtlab spike cpu={cpu} lat={lat} deadline={deadline} tid={os.getpid()}\n".encode(),
            )
        deadline += interval
        while deadline < now:  # missed periods: skip to the next future deadline
            deadline += interval
    with open(samples_path, "wb") as f:
        f.write(b"RTLABSMP" + struct.pack("<II", 1, 24) + recs)
    with open(json_path, "w") as f:
        json.dump({"start_monotonic_ns": start, "tid": os.getpid(), "cpu": cpu}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
