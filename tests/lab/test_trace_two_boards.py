# SPDX-License-Identifier: MIT
"""`rtlab run --trace` on two boards at once (x86_64 and aarch64, one command): each board's
engine records its own capture, both come home under their own run, each names the known
cause (the engine's FIFO duty spinner on the measured CPU), and `rtlab compare`, `rtlab
spikes` and the HTML report work on the traced board runs as on local ones. Behaviour
only: latency figures under emulation mean nothing."""

from __future__ import annotations

from pathlib import Path

from .boards import Board
from .test_rtlab_on_boards import rtlab, stored
from .test_trace_on_boards import (
    SPINNER,
    THRESHOLD,
    assert_spinner_named,
    board_state,
    spinner_pids,
)


def test_two_boards_traced_in_one_run(x86_board: Board, arm64_board: Board,
                                      tmp_path: Path) -> None:
    cfg = tmp_path / "both"
    cfg.write_text(x86_board.ssh_config.read_text() + arm64_board.ssh_config.read_text())
    scenario = tmp_path / "spinner.toml"
    scenario.write_text(SPINNER)
    proc = rtlab(cfg, tmp_path, "run", str(scenario), "--trace", "--trace-threshold",
                 THRESHOLD, "--target", x86_board.alias, "--target", arm64_board.alias,
                 "--no-progress", timeout=900)
    assert proc.returncode == 0, proc.stderr + proc.stdout[-3000:]
    runs = stored(tmp_path)
    assert len(runs) == 2
    machines = set()
    for run in runs:
        machine = run["provenance"]["host"]["target"]["machine"]
        machines.add(machine)
        (phase,) = [p for p in run["phases"] if p.get("trace")]
        capture = tmp_path / "runs" / phase["trace"]["capture"]
        assert (capture / "meta.json").is_file(), capture
        assert f'"machine": "{machine}"' in (capture / "meta.json").read_text()
        assert_spinner_named(run, phase)
        # the causes of a board's run, from its capture at home
        out = rtlab(cfg, tmp_path, "spikes", run["run_id"], "--limit", "2")
        assert out.returncode == 0 and "rtlab-spin" in out.stdout, out.stderr
    assert machines == {"x86_64", "aarch64"}
    a, b = (r["run_id"] for r in runs)
    cmp = rtlab(cfg, tmp_path, "compare", a, b, "--by", "host")
    assert cmp.returncode in (0, 3), cmp.stderr
    report = rtlab(cfg, tmp_path, "report", runs[0]["run_id"], "--output", str(tmp_path / "a.html"))
    assert report.returncode == 0, report.stderr
    html = (tmp_path / "a.html").read_text()
    # the spike attributions of the board's run are in it: the cause with its pid
    assert any(f"rtlab-spin[{p}]" in html for p in spinner_pids(runs[0])), \
        spinner_pids(runs[0])
    for board in (x86_board, arm64_board):
        state = board_state(board)
        assert state["instances"].strip() == "" and state["journals"].strip() == "", state
        assert state["leftovers"].strip() == "", state


def test_a_polling_probe_traced_on_a_board(x86_board: Board, tmp_path: Path) -> None:
    """The noise probe lists its gaps instead of writing samples: a traced run on a board
    attributes its gaps from the capture brought home, with no note about samples."""
    proc = rtlab(x86_board.ssh_config, tmp_path, "run", "--probe", "noise", "--cpus", "1",
                 "--duration", "2s", "--trace", "--trace-threshold", "1ms", "--target",
                 x86_board.alias, "--no-progress", "--no-report", timeout=600)
    assert proc.returncode in (0, 1), proc.stderr + proc.stdout[-2000:]
    (run,) = stored(tmp_path)
    (phase,) = [p for p in run["phases"] if p.get("trace")]
    trace = phase["trace"]
    assert trace["samples"] is None and trace["gaps"], trace
    assert (tmp_path / "runs" / trace["capture"] / "meta.json").is_file()
    assert phase["spike_summary"]["spikes"] >= 1, phase["spike_summary"]  # TCG has gaps
    assert not any("samples" in n for n in run["notes"]), run["notes"]
    state = board_state(x86_board)
    assert state["instances"].strip() == "" and state["leftovers"].strip() == "", state
