# SPDX-License-Identifier: MIT
"""Harness for the injected-cause tests: the engine measures CPU N with its timer probe and
records that CPU's tracepoints itself (`--trace-dir`, the one recorder `rtlab run --trace`
uses); the spikes of its samples file are attributed the way the runner attributes them."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rtlab.engine.locate import find_probe
from rtlab.trace.attribution import attribute_run, is_virtualized
from rtlab.trace.capture import TraceCapture
from rtlab.trace.causes import Cause
from rtlab.trace.symbols import LocalSymbols

CPU = 1 if (os.cpu_count() or 1) > 1 else 0
HOUSEKEEPING = [c for c in range(os.cpu_count() or 1) if c != CPU] or [0]
EXIT_SKIPPED = 4


def _header(stdout: str) -> dict[str, Any] | None:
    for line in stdout.splitlines():
        if line.startswith("{"):
            rec = json.loads(line)
            if rec.get("type") == "header":
                return rec
    return None


def measure(
    tmp: Path,
    seconds: float = 5.0,
    interval_us: int = 1000,
    prio: int = 98,
    threshold_ns: int = 300_000,
    load: Callable[[], subprocess.Popen[bytes]] | None = None,
) -> tuple[list[Cause], dict[str, Any]]:
    """Run the engine's timer probe on CPU (SCHED_FIFO `prio`) recording its trace, with
    `load` running; return the causes of the samples above `threshold_ns` and what the
    run said (its header, the capture, the samples file, the load's pid, lost events)."""
    tmp.mkdir(parents=True, exist_ok=True)
    samples, trace_dir = tmp / "timer.samples", tmp / "timer.trace"
    cmd = [str(find_probe()), "timer", "--cpus", str(CPU), "--policy", "fifo",
           "--priority", str(prio), "--interval", f"{interval_us}us",
           "--duration", f"{seconds:g}s", "--samples", str(samples),
           "--trace-dir", str(trace_dir), "--trace-reader-cpu", str(HOUSEKEEPING[0])]
    proc = load() if load else None
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 120,
                             check=False)
    finally:
        if proc:
            proc.terminate()
            proc.wait(timeout=10)
    if out.returncode == EXIT_SKIPPED:
        pytest.skip(out.stderr.strip().splitlines()[-1] if out.stderr.strip() else "skipped")
    header = _header(out.stdout)
    assert out.returncode == 0 and header is not None, out.stderr
    cap = TraceCapture.load(trace_dir)
    cap.symbols = LocalSymbols()  # as the runner does for a capture of this machine
    threads = header["effective"]["threads"]
    # the runner's way (rtlab.runner.tracing.attribute): the samples' at_ns is the wake-up,
    # channel i is the header's effective.threads[i]
    causes = attribute_run(
        cap,
        samples,
        header["start_monotonic_ns"],
        threshold_ns=threshold_ns,
        channel_cpus=[t.get("cpu") for t in threads],
        channel_tids=[t.get("tid") for t in threads],
        at_is_deadline=False,
        virtualized=is_virtualized(),
    )
    meta: dict[str, Any] = {
        "header": header,
        "capture": cap,
        "samples": samples,
        "load_pid": proc.pid if proc else None,
        "lost": {c: sum(int(v) for k, v in counters.items() if k != "commit_overrun")
                 for c, counters in cap.lost.items()},
    }
    return causes, meta


def host_stall(c: Cause) -> bool:
    """A spike mostly made of unexplained time (host/hypervisor): not the injected cause."""
    return c.unexplained_ns * 2 > c.latency_ns
