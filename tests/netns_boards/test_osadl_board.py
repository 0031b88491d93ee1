# SPDX-License-Identifier: MIT
"""The built-in `osadl-style` scenario on a board over real SSH (dropbear in a network
namespace): the OSADL mid load runs as the engine's own load there (memory, synced file
I/O), its network part sent to this machine (the board sees it at its veth address, its
$SSH_CONNECTION), or to a second board over a cable; with `peer = "none"` it is left
out, in one note. Nothing of the load is left after the run: no process of its groups,
no private directory, no sink.

The namespace board shares this machine's PID namespace and files, so the tests look at
/proc and the load's directory directly; rtlab itself never does."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.support.procs import children_of, group_members
from tests.support.store_reading import stored_dicts

from .nsboard import NsBoard, board_link, ns_board
from .test_board_loads import _loads_of

OSADL = (Path(__file__).resolve().parents[2] / "scenarios" / "osadl-style.toml").read_text()


def _scenario(tmp_path: Path, peer: str) -> Path:
    """osadl-style with a peer for its load (and the phases the built-in has)."""
    text = OSADL.replace('alloc_period = 1\n', f'alloc_period = 1\npeer = "{peer}"\n')
    assert f'peer = "{peer}"' in text
    path = tmp_path / "osadl-peer.toml"
    path.write_text(text)
    return path


def _osadl_load(run: dict[str, Any]) -> dict[str, Any]:
    (ld,) = [ld for ld in _loads_of(run) if ld["kind"] == "osadl-mid"]
    return ld


def _nothing_left(ld: dict[str, Any]) -> None:
    for p in ld["processes"]:
        assert group_members(p["pgid"]) == [], p["name"]
    io_dir = ld["engine_load"]["io_dir"]
    assert io_dir and io_dir.startswith("/tmp/rtlab-load-") and not os.path.exists(io_dir)


@pytest.mark.usefixtures("require_root")
def test_osadl_style_sends_to_this_machine(board: NsBoard, cli: Any) -> None:
    proc = cli("run", "osadl-style", "--duration", "6s", "--no-report", "--no-progress",
               "--target", board.name, timeout=300)
    assert proc.returncode == 0, proc.stderr
    (run,) = stored_dicts(cli.store)
    assert run["status"] == "completed", run["notes"]  # "invalid" if the numbers disagree
    ld = _osadl_load(run)
    assert ld["status"] == "stopped" and not ld["died_early"], ld["stderr_tail"]
    assert "the engine's own load" in ld["label"] and "not stress-ng/sockperf" in ld["label"]
    engine = run["provenance"]["host"]["target"]["engine"]
    assert ld["argv"][:2] == [engine, "load"] and "--io" in ld["argv"]
    net = ld["network"]
    assert net["peer"] == "this machine" and net["left_out"] is None
    assert net["to"].startswith(f"{board.host_addr}:")  # the board's $SSH_CONNECTION
    assert net["sent"] > 0 and 0 < net["received"] <= net["sent"]
    el = ld["engine_load"]
    assert el["alloc"]["rounds"] > 0 and el["io"]["files"] > 0 and el["io"]["bytes"] > 0
    names = [p["name"] for p in ld["processes"]]
    assert names == ["rtlab-probe-load", "rtlab-probe-load-sink", "rtlab-probe-load-net"]
    (note,) = [n for n in run["notes"] if "osadl-mid" in n]
    assert f"UDP at 1000 kbit/s to {net['to']} (this machine)" in note
    assert note in proc.stdout.replace("\n", " ") or "osadl-mid as the engine" in proc.stdout
    _nothing_left(ld)


@pytest.mark.usefixtures("require_root")
def test_peer_none_leaves_the_network_part_out_in_one_note(board: NsBoard, cli: Any,
                                                           tmp_path: Path) -> None:
    proc = cli("run", str(_scenario(tmp_path, "none")), "--duration", "4s", "--no-report",
               "--no-progress", "--target", board.name, timeout=300)
    assert proc.returncode == 0, proc.stderr
    (run,) = stored_dicts(cli.store)
    ld = _osadl_load(run)
    assert ld["network"]["left_out"] == 'peer = "none"' and ld["network"]["sent"] is None
    assert [p["name"] for p in ld["processes"]] == ["rtlab-probe-load"]
    assert ld["engine_load"]["io"]["files"] > 0
    (note,) = [n for n in run["notes"] if "osadl-mid" in n]
    assert note.endswith('network part left out: peer = "none"')
    _nothing_left(ld)


@pytest.mark.usefixtures("require_root")
def test_osadl_between_two_boards(board: NsBoard, cli: Any, tmp_path: Path) -> None:
    """The sink on board B (started there over SSH, bound to its cable address), the
    sender on board A: the messages cross the cable, and both ends count them."""
    with ns_board(tmp_path / "b", index=1) as other, board_link(board, other) as (_, addr_b):
        cfg = tmp_path / "both"
        cfg.write_text(board.ssh_config.read_text() + other.ssh_config.read_text())
        scen = _scenario(tmp_path, f"{other.name}={addr_b}:7500")
        proc = cli("run", str(scen), "--duration", "4s", "--no-report", "--no-progress",
                   "--target", board.name, env={"RTLAB_SSH_CONFIG": str(cfg)}, timeout=300)
        assert proc.returncode == 0, proc.stderr
        (run,) = stored_dicts(cli.store)
        ld = _osadl_load(run)
        net = ld["network"]
        assert net["peer"] == f"board {other.name}" and net["to"] == f"{addr_b}:7500"
        assert net["left_out"] is None and net["sent"] > 0 and net["received"] > 0
        sink = next(p for p in ld["processes"] if p["name"] == "rtlab-probe-load-sink")
        assert sink["target"] == other.name and sink["board_command"][1:5] == [
            "--stdin-lifeline", "load", "--net-sink", f"{addr_b}:7500"]
        _nothing_left(ld)
        # the same board as its own peer is refused before anything starts
        same = _scenario(tmp_path, f"{board.name}=10.0.0.1:7500")
        bad = cli("run", str(same), "--duration", "2s", "--no-report", "--no-progress",
                  "--target", board.name, env={"RTLAB_SSH_CONFIG": str(cfg)})
        assert bad.returncode == 2
        assert "is the board the load runs on" in bad.stderr.strip().splitlines()[-1]


def _children_with(pid: int, word: str) -> list[int]:
    """Processes whose parent is pid and whose command line has word (this machine)."""
    out = []
    for child in sorted(children_of(pid)):
        try:
            cmd = Path(f"/proc/{child}/cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if word.encode() in cmd:
            out.append(child)
    return out


@pytest.mark.usefixtures("require_root")
def test_kill9_of_the_host_leaves_nothing_of_osadl(board: NsBoard, cli: Any,
                                                   tmp_path: Path) -> None:
    """kill -9 of rtlab while the mid load runs: the board ends its load groups (their
    lifelines), the io workers remove the private directory, and the sink on this
    machine dies with rtlab."""
    import json
    import signal
    import socket
    import subprocess
    import sys
    import time

    long = tmp_path / "osadl-long.toml"
    long.write_text(OSADL.replace('duration = "2h"', 'duration = "1s"')
                    .replace('duration = "210m"', 'duration = "120s"'))
    before = set(Path("/tmp").glob("rtlab-load-*"))
    env = {**os.environ, "RTLAB_SSH_CONFIG": str(board.ssh_config),
           "RTLAB_ENGINE_DIR": str(cli.engine_dir),
           "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
           "XDG_DATA_HOME": str(tmp_path / "xdg")}
    host = subprocess.Popen([sys.executable, "-m", "rtlab", "run", str(long), "--no-report",
                             "--no-progress", "--target", board.name, "--store",
                             str(tmp_path / "k.db")], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, env=env)
    # the board's journal of the run: its load groups (memory + I/O, then the sender)
    journal = board.run_dir / f"run-{socket.gethostname()}-{host.pid}.journal"
    try:
        deadline = time.monotonic() + 120
        new: set[Path] = set()
        sinks: list[int] = []
        spawned: list[int] = []
        while time.monotonic() < deadline and not (new and sinks and len(spawned) == 2):
            assert host.poll() is None, host.stderr.read().decode() if host.stderr else ""
            new = set(Path("/tmp").glob("rtlab-load-*")) - before
            sinks = _children_with(host.pid, "--net-sink")
            if journal.exists():
                spawned = [int(json.loads(ln)["pgid"]) for ln in journal.read_text().splitlines()
                           if ln.endswith("}") and '"spawned"' in ln]
            time.sleep(0.1)
        assert new and sinks and len(spawned) == 2, (new, sinks, spawned)
        groups = [os.getpgid(p) for p in sinks] + spawned
        assert all(group_members(g) for g in groups)
    finally:
        host.send_signal(signal.SIGKILL)
        host.wait()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (any(d.exists() for d in new)
                                           or any(group_members(g) for g in groups)):
        time.sleep(0.1)
    assert not any(d.exists() for d in new), new
    assert not any(group_members(g) for g in groups)
    out = cli("restore", "--target", board.name, store=False)
    assert out.returncode == 0 and "nothing to restore" in out.stdout, out.stdout + out.stderr
