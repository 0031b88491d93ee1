# SPDX-License-Identifier: MIT
"""The seed's UDP ping-pong between two boards, named in the scenario (`[reflector]`),
on the emulated boards joined by their link; and the bad inputs around it: a reflector
that is the pinging board under another name, boards that do not exist. Behaviour only:
what ran where, what was applied on the reflector board and undone, what is refused in
one line with nothing changed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.support.store_reading import stored_runs

from .boards import Board
from .test_builtin_scenarios import _facts
from .test_rtlab_on_boards import REPO, same_state

SCENARIO = """\
[scenario]
name = "udp-two-boards"
description = "the seed's UDP ping-pong over the link, the reflector named here"

[reflector]
target = "{reflector}"
address = "10.77.0.2:7400"
cpu = 1
thread_priorities = [{{match = "irq/[0-9]+-{nic}", policy = "fifo", priority = 99}}]
irqs = [{{match = "{nic}", cpus = "0"}}]

[[probe]]
probe = "udp"
cpus = "last"
policy = "fifo"
priority = 98
options = {{ mode = "ping", rate = 200, size = 64 }}

[[phase]]
name = "idle"
duration = "3s"
"""


def _config(tmp: Path, *boards: Board, alias: tuple[Board, str] | None = None) -> Path:
    """One ssh configuration for several boards (and another name for one of them)."""
    text = "\n".join(b.ssh_config.read_text() for b in boards)
    if alias is not None:
        board, name = alias
        text += "\n" + board.ssh_config.read_text().replace(f"Host {board.alias}\n",
                                                            f"Host {name}\n", 1)
    path = tmp / "ssh_config"
    path.write_text(text)
    return path


def _rtlab(cfg: Path, tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "RTLAB_SSH_CONFIG": str(cfg), "PYTHONPATH": str(REPO),
           "XDG_DATA_HOME": str(tmp / "xdg"), "COLUMNS": "200"}
    run = ["--no-report", "--no-progress", "--store", str(tmp / "store.db")]
    return subprocess.run([sys.executable, "-m", "rtlab", *args,
                           *(run if args[0] == "run" else [])], capture_output=True,
                          text=True, env=env, timeout=600, check=False)


def _prio(facts: Any, prefix: str) -> dict[int, tuple[str, int]]:
    return {t.tid: (t.policy, t.priority) for t in facts.tasks if t.comm.startswith(prefix)}


def test_udp_between_boards_with_the_reflector_named_in_the_scenario(
        x86_board: Board, arm64_board: Board, tmp_path: Path) -> None:
    cfg = _config(tmp_path, x86_board, arm64_board)
    sc = tmp_path / "udp.toml"
    # the link's NIC on the reflector board (eth1) is a virtio device: its IRQs and IRQ
    # threads are named after it (virtioN-input.0, irq/NN-virtioN-...)
    nic = arm64_board.sh("basename $(readlink /sys/class/net/eth1/device)").stdout.strip()
    assert nic.startswith("virtio"), nic
    sc.write_text(SCENARIO.format(reflector=arm64_board.alias, nic=nic))
    before = {b.alias: _facts(b) for b in (x86_board, arm64_board)}
    proc = _rtlab(cfg, tmp_path, "run", str(sc), "--target", x86_board.alias)
    assert proc.returncode == 0, proc.stderr + proc.stdout[-2000:]
    (r,) = stored_runs(tmp_path / "store.db")
    peer = r.provenance["host"]["udp_peer"]
    assert peer["kind"] == "board" and peer["reflector_target"] == arm64_board.alias
    assert peer["reflector"] == "10.77.0.2:7400" and peer["reflector_cpu"] == 1
    assert peer["reflector_priority"] == 98
    # the seed's IRQ thread priority and IRQ move were applied on the reflector board
    assert peer["thread_priorities"] and all(t["ok"] for t in peer["thread_priorities"])
    assert {t["priority"] for t in peer["thread_priorities"]} == {99}
    assert peer["irqs_moved"] and all(i["ok"] and i["cpus"] == "0" for i in peer["irqs_moved"])
    assert r.provenance["host"]["target"]["target"] == x86_board.alias
    rtt = next(ch for _, ch in r.channels() if ch.name.startswith("rtt"))
    assert rtt.samples > 0
    assert not any("loopback" in n for n in r.notes), r.notes
    # ... and undone: priorities, IRQ affinities, cgroups, sysctls as before
    for b in (x86_board, arm64_board):
        after = _facts(b)
        assert not same_state(before[b.alias], after), same_state(before[b.alias], after)
        assert _prio(after, "irq/") == {
            k: v for k, v in _prio(before[b.alias], "irq/").items()
            if k in _prio(after, "irq/")}


def test_a_reflector_that_is_the_pinging_board_is_refused(x86_board: Board,
                                                          tmp_path: Path) -> None:
    cfg = _config(tmp_path, x86_board, alias=(x86_board, "same-board-again"))
    sc = tmp_path / "udp.toml"
    sc.write_text(SCENARIO.format(reflector="same-board-again", nic="virtio"))
    before = _facts(x86_board)
    proc = _rtlab(cfg, tmp_path, "run", str(sc), "--target", x86_board.alias)
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert "Traceback" not in proc.stderr
    assert line.startswith("rtlab: ") and "is the board that pings" in line, line
    assert not same_state(before, _facts(x86_board))
    assert x86_board.ssh("sh", "-c", "ls /run/rtlab 2>/dev/null || true").stdout.split() \
        in ([], ["target.lock"]), "a journal was left"
    # the same with --reflector naming the pinging board itself
    proc = _rtlab(cfg, tmp_path, "run", str(sc), "--target", x86_board.alias, "--reflector",
                  x86_board.alias, "--peer", "10.77.0.1:7400")
    assert proc.returncode == 2 and "is the board that pings" in proc.stderr, proc.stderr


def test_boards_that_do_not_exist_are_one_line(x86_board: Board, tmp_path: Path) -> None:
    sc = tmp_path / "nb.toml"
    sc.write_text('[scenario]\nname = "nb"\ntargets = ["no-such-board-here", '
                  f'"{x86_board.alias}"]\n[[probe]]\ncpus = "all"\n[[phase]]\nname = "p"\n'
                  'duration = "2s"\n')
    before = _facts(x86_board)
    proc = _rtlab(_config(tmp_path, x86_board), tmp_path, "run", str(sc))
    assert proc.returncode == 1, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("rtlab: ") and "no-such-board-here" in line, line
    assert not (tmp_path / "store.db").exists()
    assert not same_state(before, _facts(x86_board))


def test_peer_from_a_board_pings_from_the_board(x86_board: Board, tmp_path: Path) -> None:
    """`--target B --peer ADDR:PORT`: the pinger runs on B (it pinged from this machine
    before). The reflector is started by hand on B's loopback: only a pinger on B can
    reach it."""
    cfg = _config(tmp_path, x86_board)
    warm = _rtlab(cfg, tmp_path, "board", "info", "--target", x86_board.alias)
    assert warm.returncode == 0, warm.stderr  # the engine is on the board now
    engine = x86_board.sh("ls -t /tmp/rtlab.0/rtlab-probe-* | head -1").stdout.strip()
    reflector = subprocess.Popen(
        ["ssh", "-F", str(x86_board.ssh_config), x86_board.alias, engine, "udp", "reflect",
         "--bind", "127.0.0.1:7411", "--session", "feedc0de", "--duration", "60s",
         "--allow-non-rt"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE)
    try:
        assert reflector.stdout is not None
        assert reflector.stdout.readline().startswith(b'{"type":"header"')  # bound
        proc = _rtlab(cfg, tmp_path, "run", "--probe", "udp", "--target", x86_board.alias,
                      "--peer", "127.0.0.1:7411", "--probe-opt", "session=feedc0de",
                      "--probe-opt", "rate=200", "--duration", "2s")
    finally:
        reflector.kill()
        reflector.wait()
    assert proc.returncode == 0, proc.stderr
    (r,) = stored_runs(tmp_path / "store.db")
    assert r.provenance["host"]["target"]["target"] == x86_board.alias
    assert r.provenance["host"]["udp_peer"]["kind"] == "remote"
    assert next(ch for _, ch in r.channels() if ch.name.startswith("rtt")).samples > 0
