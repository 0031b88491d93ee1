# SPDX-License-Identifier: MIT
"""The hwnoise probe on the emulated x86_64 PREEMPT_RT board (Debian 12, 6.1: the hwlat
tracer in per-cpu mode; its osnoise tracer has no OSNOISE_IRQ_DISABLE yet). Under TCG
the figures mean nothing: the tests assert the results' structure and consistency, the
board's tracefs as before afterwards (also after kill -9 and `sys restore`), and what the
doctor says of the board's tracers."""

from __future__ import annotations

import json
import time
from pathlib import Path

from .boards import Board
from .test_rtlab_on_boards import REPO, rtlab, stored

STATE = ("current_tracer", "tracing_thresh", "tracing_cpumask", "tracing_on",
         "hwlat_detector/mode", "hwlat_detector/width", "hwlat_detector/window")


def _tracefs(board: Board) -> dict[str, str]:
    script = "; ".join(f"echo {f}=$(cat /sys/kernel/tracing/{f})" for f in STATE)
    out = board.sh(script + "; echo journals=$(ls /run/rtlab 2>/dev/null | grep -c hwnoise)",
                   timeout=60).stdout
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def test_hwnoise_run_on_the_board_gives_per_cpu_noise_and_restores(x86_board: Board,
                                                                   tmp_path: Path) -> None:
    before = _tracefs(x86_board)
    assert before["current_tracer"] == "nop" and before["journals"] == "0", before
    proc = rtlab(x86_board.ssh_config, tmp_path, "run", "--probe", "hwnoise", "--duration",
                 "3s", "--no-report", "--target", x86_board.alias)
    assert proc.returncode == 0, proc.stderr
    assert _tracefs(x86_board) == before
    (run,) = stored(tmp_path)
    assert run["probe"] == "hwnoise"
    (phase,) = run["phases"]
    hw = phase["extras"]["hwnoise"]
    assert hw["tracer"] == "hwlat" and hw["mode"] == "per-cpu"
    assert hw["threshold_ns"] == 10_000 and hw["width_ns"] < hw["window_ns"]
    assert hw["decode_errors"] == 0
    chans = {c["name"]: c for c in phase["channels"]}
    extra = {c["channel"]: c for c in hw["channels"]}
    assert set(chans) == set(extra) == {"cpu1"}  # all online CPUs but the first
    for name, ch in chans.items():
        nc = extra[name]
        assert ch["samples"] >= 0
        assert sum(n for _, n in ch["hist"]["buckets"]) == ch["samples"]
        if ch["samples"]:
            assert ch["sum_ns"] >= ch["max_ns"] >= ch["min_ns"] > 0
            assert nc["noise_ns"] == ch["sum_ns"]
        assert nc["windows"] >= 1 and nc["measured_ns"] == nc["windows"] * hw["width_ns"]
        assert 0 <= nc["stolen_ppm"] <= 1_000_000
        assert nc["nmi_count"] >= 0 and nc["above_threshold"] >= ch["samples"]
        assert max(nc["max_inner_ns"], nc["max_outer_ns"]) == (ch["max_ns"] or 0)


def test_kill9_leaves_a_journal_that_sys_restore_undoes(x86_board: Board) -> None:
    before = _tracefs(x86_board)
    engine = REPO / ".venv" / "share" / "rtlab" / "engines" / "x86_64" / "rtlab-probe"
    x86_board.copy_to(engine, "/tmp/hwnoise-probe")
    x86_board.sh("(/tmp/hwnoise-probe hwnoise --duration 60s </dev/null >/dev/null 2>&1 &)",
                 timeout=60)
    deadline = time.monotonic() + 60
    while _tracefs(x86_board)["current_tracer"] != "hwlat":
        assert time.monotonic() < deadline, "the tracer never started"
        time.sleep(0.5)
    x86_board.sh("kill -9 $(pidof hwnoise-probe)", timeout=60)
    left = _tracefs(x86_board)
    assert left["current_tracer"] == "hwlat" and left["journals"] == "1", left
    out = x86_board.sh("for j in /run/rtlab/hwnoise-*.journal; do "
                       "/tmp/hwnoise-probe sys restore --journal $j; done", timeout=60)
    done = [json.loads(line) for line in out.stdout.splitlines()][-1]
    assert done["failed"] == 0 and not done["journal_kept"], out.stdout
    assert _tracefs(x86_board) == before


def test_doctor_lists_the_boards_tracers(x86_board: Board, tmp_path: Path) -> None:
    proc = rtlab(x86_board.ssh_config, tmp_path, "doctor", "--json", "--target",
                 x86_board.alias, store=False)
    assert proc.returncode in (0, 3), proc.stderr
    doc = json.loads(proc.stdout)
    findings = doc["findings"] if isinstance(doc, dict) else doc
    (tr,) = [f for f in findings if f["check"] == "tracers"]
    assert {"timerlat", "osnoise", "hwlat"} <= set(tr["facts"]["available_tracers"])
    assert tr["facts"]["hwnoise_tracer"] == "hwlat"
    assert "--probe hwnoise" in tr["summary"] and "--trace-tracer timerlat" in tr["summary"]
