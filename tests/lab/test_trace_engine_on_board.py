# SPDX-License-Identifier: MIT
"""The engine's trace recorder on the emulated x86_64 PREEMPT_RT board (static engine,
no Python there): `rtlab-probe timer --trace-dir` records the measured CPU's pages with
the board's format files and leaves no instance and no journal; with the timerlat
tracer, the board's global osnoise/cpus is written back. Under TCG only the files are
checked, never timing."""

from __future__ import annotations

import json

from .boards import Board
from .test_rtlab_on_boards import REPO

ENGINE = REPO / ".venv" / "share" / "rtlab" / "engines" / "x86_64" / "rtlab-probe"


def _left(board: Board) -> str:
    """Instances and trace journals left on the board (empty: none)."""
    return board.sh("ls /sys/kernel/tracing/instances; ls /run/rtlab 2>/dev/null | grep trace-",
                    timeout=60).stdout.strip()


def test_timer_records_on_the_board(x86_board: Board) -> None:
    x86_board.copy_to(ENGINE, "/tmp/trace-probe")
    assert _left(x86_board) == ""
    cpus_before = x86_board.sh("cat /sys/kernel/tracing/osnoise/cpus", timeout=60).stdout
    runs = {
        "plain": [],
        "timerlat": ["--trace-tracer", "timerlat", "--trace-events",
                     "sched/sched_switch,osnoise/*"],
    }
    for label, extra in runs.items():
        d = f"/tmp/trace-{label}"
        x86_board.sh(f"rm -rf {d}", timeout=60)
        r = x86_board.ssh("/tmp/trace-probe", "timer", "--cpus", "1", "--duration", "1s",
                          "--allow-non-rt", "--trace-dir", d, *extra, timeout=300)
        assert r.returncode == 0, (label, r.stderr)
        header = json.loads(r.stdout.splitlines()[0])
        assert header["trace"]["dir"] == d
        meta = json.loads(x86_board.ssh("cat", f"{d}/meta.json", timeout=60).stdout)
        m = meta["meta"]
        assert meta["cpus"] == [1] and m["complete"] is True and m["error"] is None, m
        assert m["recorder"] == "engine" and m["machine"] == "x86_64" and m["long_bits"] == 64
        assert m["tracer"] == (None if label == "plain" else "timerlat")
        assert m["pages"]["1"] > 0
        size = x86_board.sh(f"wc -c < {d}/cpu1.pages", timeout=60).stdout.strip()
        assert int(size) == m["bytes"] + 4 * m["pages"]["1"]
        formats = x86_board.sh(f"ls {d}/formats", timeout=60).stdout.split()
        assert {"header_page", "header_event", "sched__sched_switch.format"} <= set(formats)
        if label == "timerlat":
            assert "osnoise__thread_noise.format" in formats
        assert _left(x86_board) == "", label
    assert x86_board.sh("cat /sys/kernel/tracing/osnoise/cpus", timeout=60).stdout == cpus_before
