# SPDX-License-Identifier: MIT
"""`rtlab monitor --trace --target B` on the emulated x86_64 PREEMPT_RT board: every
segment's engine keeps a flight recorder on the board, the windows around its spikes come
home when the segment ends and explain them (a known cause: the engine's duty spinner,
FIFO 97, 20 ms every 100 ms on the measured CPU), the bytes sent stay under the cap, and
the board keeps nothing (no instance, no journal, no capture in its runs directory).
Behaviour only: latency figures under emulation mean nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from rtlab.results.store import Store

from .boards import Board
from .test_kernel_split_on_board import SPIN, _start_spinner
from .test_rtlab_on_boards import REPO
from .test_trace_on_boards import emulator_stall

RATE = 128 * 1024


def test_monitor_segments_explain_the_boards_spikes(x86_board: Board, tmp_path: Path) -> None:
    load_pid, spin_pid = _start_spinner(x86_board)
    try:
        env = {**os.environ, "RTLAB_SSH_CONFIG": str(x86_board.ssh_config),
               "PYTHONPATH": str(REPO), "XDG_DATA_HOME": str(tmp_path / "xdg")}
        r = subprocess.run([sys.executable, "-m", "rtlab", "monitor", "--target",
                            x86_board.alias, "--cpus", "1", "--priority", "90", "--segment",
                            "4s", "--duration", "9s", "--trace", "--trace-threshold", "10ms",
                            "--trace-rate", str(RATE), "--state-dir", str(tmp_path / "state"),
                            "--store", str(tmp_path / "store.db")],
                           env=env, capture_output=True, text=True, timeout=400)
    finally:
        x86_board.sh(f"kill {load_pid}; rm -f {SPIN}-probe {SPIN}.jsonl {SPIN}.err",
                     timeout=60)
    assert r.returncode == 0, r.stderr
    st = Store.open(str(tmp_path / "store.db"), create=False)
    try:
        runs = [st.get(x.id) for x in st.list(None)]
        runs_dir = st.runs_dir
    finally:
        st.close()
    assert len(runs) >= 2, r.stderr
    named = total = 0
    for run in runs:
        ph = run.phases[0]
        if ph.trace is None:  # a segment that measured too little to trigger
            continue
        assert ph.trace["mode"] == "flight"
        cap = runs_dir / ph.trace["capture"]
        meta = (cap / "meta.json").read_text()
        assert '"machine":"x86_64"' in meta.replace(" ", "")
        summ = ph.spike_summary
        assert summ["spikes"] == summ["attributed"] + summ["not_kept"]
        # bytes written on the board stay under the cap (10 s of burst + rate x time)
        written = sum(f.stat().st_size for f in cap.glob("w*-cpu*.pages"))
        assert written <= RATE * (10 + 5), written
        for s in ph.spikes or []:
            if emulator_stall(s):  # qemu not running the vCPU: not a cause on the board
                continue
            total += 1
            named += f"[{spin_pid}]" in str(s["top"]) and "rtlab-spin" in str(s["top"])
    assert total >= 5, (r.stderr, [run.notes for run in runs])
    assert named >= 0.9 * total, (named, total)
    left = x86_board.sh("ls /sys/kernel/tracing/instances /run/rtlab; ls /tmp/rtlab.0/runs",
                        timeout=60).stdout
    assert "rtlab-" not in left and ".journal" not in left and ".trace" not in left, left
