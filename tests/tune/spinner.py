# SPDX-License-Identifier: MIT
"""A known cause for the tune's tests: a thread named NAME on CPU, at POLICY/PRIORITY,
busy ON_MS every PERIOD_MS (a burst that delays an equal-priority FIFO thread on that
CPU by up to ON_MS). Exits when its parent does (stdin closes) or after LIFE_S."""

from __future__ import annotations

import ctypes
import os
import select
import sys
import time

PR_SET_NAME = 15


def main() -> None:
    name, cpu, policy, prio, on_ms, period_ms, life_s = sys.argv[1:8]
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_NAME, name.encode()[:15], 0, 0, 0)
    os.sched_setaffinity(0, {int(cpu)})
    pol = {"fifo": os.SCHED_FIFO, "other": os.SCHED_OTHER}[policy]
    os.sched_setscheduler(0, pol, os.sched_param(int(prio)))
    on, period = float(on_ms) / 1000, float(period_ms) / 1000
    end = time.monotonic() + float(life_s)
    print("ready", flush=True)
    while time.monotonic() < end:
        t0 = time.monotonic()
        while time.monotonic() - t0 < on:
            pass
        r, _, _ = select.select([sys.stdin], [], [], max(0.0, period - on))
        if r and not sys.stdin.read(1):
            return


if __name__ == "__main__":
    main()
