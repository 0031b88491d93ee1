# SPDX-License-Identifier: MIT
"""`rtlab run --trace --kernel-split` on the emulated x86_64 PREEMPT_RT board, with a
known cause: the engine's duty spinner (`rtlab-probe load --cpu 1 --cpu-duty 20ms/100ms
--cpus 1 --policy fifo --priority 97`, comm rtlab-spin, the builtin load `duty`) on the
measured CPU 1, above rtlab's timer thread (FIFO 90) and the kernel's timerlat thread
(FIFO 95). The same spinner process runs all along, so three views must name the same
task, comm and pid: rtlab's verdict on its own spikes (the stored spike records), the
kernel's split stored with the same run (trace.kernel_split), and `rtla timerlat top -a
10000 -c 1 -q` run on the board right after (read with parse_rtla_auto). The board's
tracefs is as before after the run: osnoise/cpus written back, no instance left.
Behaviour only: latency figures under emulation mean nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from rtlab.results.store import Store
from rtlab.trace.timerlat import parse_rtla_auto

from .boards import Board
from .test_rtlab_on_boards import REPO

ENGINE = REPO / ".venv" / "share" / "rtlab" / "engines" / "x86_64" / "rtlab-probe"
SPIN = "/tmp/ks-spin"
THRESHOLD_US = 10_000


def _tracefs(board: Board) -> tuple[str, str]:
    """(osnoise/cpus, the instances) of the board's tracefs."""
    out = board.sh("cat /sys/kernel/tracing/osnoise/cpus; echo ---; "
                   "ls /sys/kernel/tracing/instances", timeout=60).stdout
    cpus, _, inst = out.partition("---\n")
    return cpus.strip(), inst.strip()


def _start_spinner(board: Board) -> tuple[int, int]:
    """The duty spinner started on the board: (its load process's pid, its worker's pid)."""
    board.copy_to(ENGINE, f"{SPIN}-probe")
    board.sh(f"rm -f {SPIN}.jsonl; {SPIN}-probe load --cpu 1 --cpu-duty 20ms/100ms --cpus 1 "
             f"--policy fifo --priority 97 </dev/null >{SPIN}.jsonl 2>{SPIN}.err &",
             timeout=60)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        text = board.sh(f"cat {SPIN}.jsonl", timeout=60).stdout
        for line in text.splitlines():
            rec = json.loads(line)
            if rec.get("workers"):
                (w,) = rec["workers"]
                assert (w["policy"], w["priority"]) == ("fifo", 97)
                assert rec["config"]["cpu_duty"]["comm"] == "rtlab-spin"
                return int(rec["pid"]), int(w["pid"])
        time.sleep(0.5)
    raise AssertionError("the spinner wrote no load record: "
                         + board.sh(f"cat {SPIN}.err", timeout=60).stdout)


def _rtlab_verdict(spikes: list[dict[str, Any]]) -> tuple[str, str, int] | None:
    """The most frequent largest cause of rtlab's own spikes: (kind, name, id)."""
    tops: Counter[tuple[str, str, int]] = Counter()
    for s in spikes:
        comps = [c for c in s.get("components") or [] if c.get("kind") != "wake_path"]
        if comps:
            c = max(comps, key=lambda c: c["duration_ns"])
            tops[(c["kind"], c["name"], c["id"])] += 1
    return tops.most_common(1)[0][0] if tops else None


def test_kernel_split_names_the_spinner_like_rtla(x86_board: Board, tmp_path: Path) -> None:
    before = _tracefs(x86_board)
    assert before[1] == "", "an instance is left from before this test"
    load_pid, spin_pid = _start_spinner(x86_board)
    try:
        env = {**os.environ, "RTLAB_SSH_CONFIG": str(x86_board.ssh_config),
               "PYTHONPATH": str(REPO), "XDG_DATA_HOME": str(tmp_path / "xdg"),
               "COLUMNS": "250"}
        store = tmp_path / "store.db"
        proc = subprocess.run(
            [sys.executable, "-m", "rtlab", "run", "--probe", "timer", "--target",
             x86_board.alias, "--cpus", "1", "--priority", "90", "--duration", "3s",
             "--kernel-split", "--trace-threshold", f"{THRESHOLD_US}us", "--no-report",
             "--no-progress", "--store", str(store)],
            capture_output=True, text=True, env=env, timeout=600, check=False)
        assert proc.returncode == 0, proc.stderr + proc.stdout[-3000:]
        assert "Traceback" not in proc.stderr
        # the run's display: one line per CPU of the kernel's view, and the honest note
        assert "kernel's view (timerlat) CPU1: IRQ p99 " in proc.stdout, proc.stdout[-3000:]
        after_run = _tracefs(x86_board)
        assert after_run == before  # osnoise/cpus written back, no instance left

        s = Store.open(str(store))
        try:
            (summary,) = s.list(None)
            run = s.get(summary.id)
        finally:
            s.close()
        (phase,) = run.phases
        assert "kernel's timerlat threads (FIFO 95)" in " ".join(run.notes), run.notes
        # rtlab's verdict on its own spikes
        assert phase.spike_summary and phase.spike_summary["spikes"] > 0, phase.spike_summary
        ours = _rtlab_verdict(phase.spikes or [])
        assert ours == ("task", "rtlab-spin", spin_pid), phase.spike_summary
        # the kernel's split of the same run
        ks = phase.trace["kernel_split"]
        assert not ks.get("error"), ks
        cpu1 = ks["cpus"]["1"]
        assert cpu1["irq"]["count"] > 0 and cpu1["thread"]["count"] > 0
        assert cpu1["splits"] > 0 and cpu1["worst"], cpu1
        culprit, n = next(iter(cpu1["culprits"].items()))
        assert culprit == f"task rtlab-spin[{spin_pid}]", cpu1["culprits"]
        assert n >= 0.9 * cpu1["splits"], cpu1["culprits"]
        worst = max(cpu1["worst"], key=lambda w: w["latency_ns"])
        assert (worst["culprit"]["kind"], worst["culprit"]["name"], worst["culprit"]["id"]) \
            == ("thread", "rtlab-spin", spin_pid)

        # rtla's auto-analysis, right after, with the same spinner still running
        out = x86_board.sh(
            "rm -rf /tmp/ks-rtla && mkdir /tmp/ks-rtla && cd /tmp/ks-rtla && "
            f"timeout 120 rtla timerlat top -a {THRESHOLD_US} -c 1 -q -d 60 2>&1; "
            "echo '@@@'; cat timerlat_trace.txt 2>/dev/null", timeout=300).stdout
        stdout, _, saved = out.partition("@@@\n")
        (verdict,) = parse_rtla_auto(stdout, saved or None)
        assert verdict.cpu == 1
        assert (verdict.kind, verdict.name, verdict.ident) == ("thread", "rtlab-spin",
                                                                spin_pid), stdout
    finally:
        x86_board.sh(f"kill {load_pid} {spin_pid} 2>/dev/null; echo {before[0]} > "
                     "/sys/kernel/tracing/osnoise/cpus; rm -rf /tmp/ks-rtla "
                     f"{SPIN}.jsonl {SPIN}.err {SPIN}-probe", timeout=60)
    assert _tracefs(x86_board) == before
