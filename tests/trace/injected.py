# SPDX-License-Identifier: MIT
"""Harness for the injected-cause tests: trace CPU N while a FIFO sleeper measures it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from rtlab.trace.attribution import attribute_run, is_virtualized
from rtlab.trace.causes import Cause
from rtlab.trace.tracefs import Recorder

HERE = Path(__file__).parent
CPU = 1 if (os.cpu_count() or 1) > 1 else 0
HOUSEKEEPING = [c for c in range(os.cpu_count() or 1) if c != CPU] or [0]


def measure(
    tmp: Path,
    seconds: float = 5.0,
    interval_us: int = 1000,
    prio: int = 98,
    threshold_ns: int = 300_000,
    load: Callable[[], subprocess.Popen[bytes]] | None = None,
    markers: bool = False,
) -> tuple[list[Cause], dict[str, object], Recorder]:
    """Run the sleeper on CPU with tracing; return the causes of samples > threshold."""
    tmp.mkdir(parents=True, exist_ok=True)
    smp, js = tmp / "s.smp", tmp / "s.json"
    with Recorder([CPU], reader_cpus=HOUSEKEEPING) as rec:
        proc = load() if load else None
        try:
            time.sleep(0.3)
            args = [
                sys.executable,
                str(HERE / "sleeper.py"),
                str(CPU),
                str(prio),
                str(interval_us),
                str(seconds),
                str(smp),
                str(js),
            ]
            if markers:
                args += [str(rec.marker_path), str(threshold_ns // 1000)]
            subprocess.run(args, check=True, timeout=seconds + 30)
        finally:
            if proc:
                proc.terminate()
                proc.wait(timeout=10)
        rec.stop()
        cap = rec.capture()
    meta = json.loads(js.read_text())
    src = None if markers else smp
    causes = attribute_run(
        cap,
        src,
        meta["start_monotonic_ns"],
        threshold_ns=threshold_ns,
        channel_cpus=[CPU],
        channel_tids=[meta["tid"]],
        virtualized=is_virtualized(),
    )
    meta["lost"] = rec.lost_events()
    meta["capture"], meta["samples"] = cap, src
    meta["load_pid"] = proc.pid if proc else None
    return causes, meta, rec


def host_stall(c: Cause) -> bool:
    """A spike mostly made of unexplained time (host/hypervisor): not the injected cause."""
    return c.unexplained_ns * 2 > c.latency_ns
