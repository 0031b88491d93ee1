# SPDX-License-Identifier: MIT
"""Injected cause: a SCHED_FIFO task that spins SPIN_US every PERIOD_MS on CPU.

Usage: spinner.py CPU PRIO SPIN_US PERIOD_MS DURATION_S
"""

from __future__ import annotations

import os
import sys
import time


def main() -> int:
    cpu, prio, spin_us = (int(a) for a in sys.argv[1:4])
    period_ms, duration_s = float(sys.argv[4]), float(sys.argv[5])
    os.sched_setaffinity(0, [cpu])
    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(prio))
    end = time.monotonic() + duration_s
    while time.monotonic() < end:
        stop = time.monotonic_ns() + spin_us * 1000
        while time.monotonic_ns() < stop:
            pass
        time.sleep(period_ms / 1000)
    return 0


if __name__ == "__main__":
    sys.exit(main())
