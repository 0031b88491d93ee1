# SPDX-License-Identifier: MIT
"""Loads on a board over real SSH (dropbear in a network namespace): stress-ng started
by the board's engine (`exec`) with its board-side command line in the result, the
engine's built-in load labelled as such, nothing left on the board after a run or
after a kill -9 of the host (the lifeline, then the journal), and a board without
stress-ng refused in one line that says how to install it.

The namespace board shares this machine's PID namespace, so the tests can look at the
board's processes in /proc; rtlab itself never does (it reads them with the engine).
Every check is by the process group recorded, never by process name: other tests may
run stress-ng at the same time."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from rtlab.engine.transport import LocalTransport
from rtlab.errors import SkippedError
from rtlab.exitcodes import ExitCode
from tests.support.procs import group_members
from tests.support.store_reading import stored_dicts

from .nsboard import NsBoard

WAIT = 60.0  # generous: a loaded 2-vCPU VM
REPO = Path(__file__).resolve().parents[2]


def _wait_empty(pgid: int, timeout: float = WAIT) -> float:
    """Seconds until group pgid had no live member (fails after timeout)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if not group_members(pgid):
            return time.monotonic() - t0
        time.sleep(0.05)
    pytest.fail(f"processes of group {pgid} still alive after {timeout:g} s: {group_members(pgid)}")


def _loads_of(run: dict[str, Any]) -> list[dict[str, Any]]:
    return [ld for ph in run["provenance"]["host"]["phases"] for ld in ph["loads"]]


@pytest.mark.usefixtures("require_root")
def test_stress_ng_on_the_board_is_recorded_and_gone_after_the_run(
        board: NsBoard, cli: Any) -> None:
    if subprocess.run(["sh", "-c", "command -v stress-ng"], capture_output=True,
                      check=False).returncode != 0:
        pytest.skip("stress-ng is not installed (the namespace board uses this machine's)")
    proc = cli("run", "quick", "--duration", "4s", "--no-report", "--no-progress",
               "--target", board.name)
    assert proc.returncode == 0, proc.stderr
    (run,) = stored_dicts(cli.store)
    (ld,) = _loads_of(run)
    assert ld["kind"] == "stress" and ld["target"] == board.name
    assert ld["status"] == "stopped" and not ld["died_early"], ld
    # the board-side command line: the stress-ng the board's engine ran, and how
    assert ld["argv"][0] == "stress-ng" and "--cpu" in ld["argv"] and "--taskset" in ld["argv"]
    (p,) = ld["processes"]
    engine = run["provenance"]["host"]["target"]["engine"]
    taskset = ld["argv"][ld["argv"].index("--taskset") + 1]
    assert p["board_command"][:6] == [engine, "--stdin-lifeline", "exec", "--cpus", taskset,
                                      "--"]  # the exec process waits beside its load
    assert p["board_command"][6:] == ld["argv"]
    assert p["end"]["type"] == "exec_done" and p["end"]["stopped"] and p["end"]["group_empty"]
    assert p["workers_seen"] > 0 and p["pgid"] == p["pid"] > 1
    assert group_members(p["pgid"]) == []  # the engine reaped the group before it exited
    assert "nothing to restore" in cli("restore", "--target", board.name, store=False).stdout


@pytest.mark.usefixtures("require_root")
def test_builtin_load_on_the_board_is_labelled(board: NsBoard, cli: Any,
                                               tmp_path: Path) -> None:
    scen = tmp_path / "builtin.toml"
    scen.write_text('[scenario]\nname = "builtin-on-board"\n'
                    '[[load]]\nname = "hog"\nkind = "builtin"\ncpu = 1\nvm = 1\n'
                    'vm_bytes = "8M"\ncpus = "first"\n'
                    '[[probe]]\nprobe = "timer"\ncpus = "last"\n'
                    '[[phase]]\nname = "loaded"\nduration = "3s"\nloads = ["hog"]\n')
    proc = cli("run", str(scen), "--no-report", "--no-progress", "--target", board.name)
    assert proc.returncode == 0, proc.stderr
    (run,) = stored_dicts(cli.store)
    (ld,) = _loads_of(run)
    assert ld["kind"] == "builtin" and "not stress-ng" in ld["label"]
    assert "stress-ng" not in " ".join(ld["argv"])
    engine = run["provenance"]["host"]["target"]["engine"]
    assert ld["argv"] == [engine, "load", "--cpu", "1", "--vm", "1", "--vm-bytes", "8M",
                          "--cpus", "0"]
    assert ld["builtin"]["status"] == "interrupted" and ld["builtin"]["loops"]["cpu"] > 0
    (p,) = ld["processes"]
    assert p["board_command"] == [engine, "--stdin-lifeline", *ld["argv"][1:]]
    assert p["workers_seen"] == 2 and p["end"]["type"] == "load_result"
    assert group_members(p["pgid"]) == []


@pytest.mark.usefixtures("require_root")
def test_kill9_of_the_host_leaves_no_load_on_the_board(board: NsBoard, cli: Any,
                                                       tmp_path: Path) -> None:
    """kill -9 of rtlab mid-load: the board's engine sees its stdin close and ends the
    load's group; the journal (which recorded the group) is restored by the board's
    applier, so `rtlab restore` has nothing left to do."""
    scen = tmp_path / "long.toml"
    scen.write_text('[scenario]\nname = "long-load"\n'
                    '[[load]]\nname = "hog"\nkind = "builtin"\ncpu = 1\nvm = 1\n'
                    'vm_bytes = "8M"\ncpus = "first"\n'
                    '[[probe]]\nprobe = "timer"\ncpus = "last"\n'
                    '[[phase]]\nname = "loaded"\nduration = "120s"\nloads = ["hog"]\n')
    env = {**os.environ, "RTLAB_SSH_CONFIG": str(board.ssh_config),
           "RTLAB_ENGINE_DIR": str(cli.engine_dir), "PYTHONPATH": str(REPO),
           "XDG_DATA_HOME": str(tmp_path / "xdg")}
    host = subprocess.Popen([sys.executable, "-m", "rtlab", "run", str(scen), "--no-report",
                             "--no-progress", "--target", board.name,
                             "--store", str(tmp_path / "k.db")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    # the board's /run/rtlab; the journal is named after this host and its pid
    journal = board.run_dir / f"run-{socket.gethostname()}-{host.pid}.journal"
    spawned: dict[str, Any] | None = None
    deadline = time.monotonic() + WAIT
    try:
        while spawned is None and time.monotonic() < deadline:
            assert host.poll() is None, host.stderr.read().decode() if host.stderr else ""
            if journal.exists():
                for line in journal.read_text().splitlines():
                    rec = json.loads(line) if line.endswith("}") else {}
                    if rec.get("op") == "spawned":
                        spawned = rec
            time.sleep(0.1)
        assert spawned is not None, "the load's group was never journaled on the board"
        pgid = int(spawned["pgid"])
        deadline = time.monotonic() + WAIT
        while len(group_members(pgid)) < 3 and time.monotonic() < deadline:  # load + 2 workers
            time.sleep(0.05)
        assert len(group_members(pgid)) == 3
    finally:
        host.send_signal(signal.SIGKILL)
        host.wait()
    took = _wait_empty(pgid)
    print(f"load group {pgid} gone {took:.2f} s after kill -9 of the host")
    deadline = time.monotonic() + WAIT
    while journal.exists() and time.monotonic() < deadline:  # the applier restores, unlinks
        time.sleep(0.1)
    assert not journal.exists()
    out = cli("restore", "--target", board.name, store=False)
    assert out.returncode == 0 and "nothing to restore" in out.stdout, out.stdout + out.stderr


@pytest.mark.usefixtures("require_root")
def test_exec_of_a_missing_tool_on_the_board_is_exit_4(board: NsBoard, cli: Any,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from rtlab.engine.board import SshTransport
    from rtlab.engine.ssh import CONFIG_ENV

    monkeypatch.setenv(CONFIG_ENV, str(board.ssh_config))

    with SshTransport(board.name, engine_dir=str(cli.engine_dir)) as t:
        p = t.run(["exec", "--", "rtlab-no-such-tool", "--cpu", "1"])
    assert p.returncode == ExitCode.SKIPPED and p.stdout == ""
    assert p.stderr.strip().splitlines() == [
        "rtlab-probe exec: rtlab-no-such-tool: not found on this machine (not in PATH)"]


@pytest.mark.usefixtures("require_root")
def test_heartbeat_keeps_a_board_engine_and_silence_stops_it(
        board: NsBoard, cli: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A board engine held by rtlab hears a heartbeat on its stdin lifeline: it outlives
    its --lifeline-timeout as long as rtlab is there. A link that carries nothing, not
    even an EOF (here: rtlab's ssh client stopped; on a board: a FIFO load starving the
    NIC's interrupt thread), ends it after the timeout, with one line saying why."""
    from rtlab.engine import heartbeat
    from rtlab.engine.board import SshTransport
    from rtlab.engine.ssh import CONFIG_ENV

    monkeypatch.setenv(CONFIG_ENV, str(board.ssh_config))
    monkeypatch.setattr(heartbeat, "TIMEOUT_S", 2)
    monkeypatch.setattr(heartbeat, "INTERVAL_S", 0.3)
    with SshTransport(board.name, engine_dir=str(cli.engine_dir)) as t:
        kept = t.start_held(["--stdin-lifeline", "load", "--cpu", "1", "--duration", "5s"],
                            stdin=subprocess.PIPE)
        assert kept.stdout is not None and kept.stderr is not None
        out = kept.stdout.read()  # stdin stays open (communicate() would close it: EOF)
        assert kept.wait(timeout=120) == 0, kept.stderr.read()
        assert b'"type":"load_result"' in out
        silent = t.start_held(["--stdin-lifeline", "load", "--cpu", "1"],
                              stdin=subprocess.PIPE)
        assert silent.stdout is not None
        assert b'"type":"load"' in silent.stdout.readline()  # started on the board
        # the link stays up and carries nothing (stdin open, no beat): as a starved one
        with heartbeat._lock:
            heartbeat._pipes.remove(silent.stdin)
        t0 = time.monotonic()
        silent.stdout.read()  # the engine ends by itself: its output ends
        assert silent.wait(timeout=120) == ExitCode.INTERRUPTED
        assert time.monotonic() - t0 >= 1.5
        assert silent.stderr is not None
        err = silent.stderr.read()
        assert b"no word from the controller on stdin for 2 s" in err, err
        silent.stdin.close()


class PosingAsBoard(LocalTransport):
    """This machine's transport, named like a board: `board_name` is its target and it
    is not local, so the code under test takes the path it takes for a board."""

    name = "fake"
    board_name = "board"

    @property
    def target(self) -> str:
        return self.board_name

    @property
    def is_local(self) -> bool:
        return False


class NoStressNg(PosingAsBoard):
    """A "board" whose shell finds no stress-ng: its commands run with an empty PATH."""

    board_name = "board7"

    def command_argv(self, argv: list[str]) -> list[str]:
        assert argv[0] == "sh"  # the check is a fixed `sh -c` script
        return ["env", "PATH=/rtlab-nonexistent", "/bin/sh", *argv[1:]]


def test_a_board_without_stress_ng_is_one_line_with_the_packages() -> None:
    from rtlab.loads import from_spec
    from rtlab.loads.on_target import for_target

    load = for_target(from_spec({"kind": "stress", "preset": "seed"}), NoStressNg())
    with pytest.raises(SkippedError) as exc:
        load.check_tools()
    err = exc.value
    assert err.code == ExitCode.SKIPPED == 4
    line = err.one_line()
    assert "\n" not in line
    assert line.startswith("stress-ng is not installed on board7 (")
    for hint in ("Debian: apt-get install stress-ng",
                 'Yocto: IMAGE_INSTALL:append = " stress-ng" (meta-oe)',
                 "Buildroot: BR2_PACKAGE_STRESS_NG=y", 'kind = "builtin"'):
        assert hint in line, line
    # the engine's load is never substituted: the builtin kind needs no tool at all
    for_target(from_spec({"kind": "builtin", "preset": "seed"}), NoStressNg()).check_tools()


def test_a_run_on_a_board_without_stress_ng_starts_nothing(tmp_path: Path) -> None:
    """The runner checks the tools on the board before anything starts: SkippedError
    (exit 4), nothing stored, no engine started there."""
    from rtlab.results.store import Store
    from rtlab.runner import RunOptions, run_scenario
    from rtlab.scenario.loader import parse_text

    (sc,) = parse_text('[scenario]\nname = "s"\n[[load]]\nname = "stress"\nkind = "stress"\n'
                       'preset = "seed"\n[[phase]]\nname = "p"\nduration = "1s"\n'
                       'loads = ["stress"]\n', "s.toml", online=[0, 1]).variants
    store = Store.open(str(tmp_path / "s.db"))
    try:
        with pytest.raises(SkippedError, match="stress-ng is not installed on board7"):
            run_scenario(sc, RunOptions(store=store, transport=NoStressNg("/nonexistent"),
                                        handle_signals=False, doctor=False))
        assert store.list(None) == []
    finally:
        store.close()


def test_builtin_kind_runs_here_too_and_is_labelled(probe_bin: str,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The same kind on this machine: `rtlab-probe load` in its own group, labelled, its
    loop counts in the description, nothing left after the stop."""
    from rtlab.loads import LoadSet, from_spec, validate_spec

    monkeypatch.setenv("RTLAB_PROBE", probe_bin)
    assert validate_spec({"kind": "builtin", "cpu": 1, "policy": "batch"}) == [
        "builtin.policy: 'batch' is not available for this kind; allowed: 'other', 'fifo', "
        "'rr'"]
    cpu = min(os.sched_getaffinity(0))
    load = from_spec({"kind": "builtin", "cpu": 1, "vm": 1, "vm_bytes": "4M", "cpus": [cpu]})
    with LoadSet([load], settle_s=0.3) as ls:
        assert not ls.died()
        pgid = load.procs[0].pgid
        assert len(group_members(pgid)) == 3  # the load process and its two workers
    d = ls.describe()[0]
    assert d["kind"] == "builtin" and "not stress-ng" in d["label"]
    assert d["argv"] == [probe_bin, "load", "--cpu", "1", "--vm", "1", "--vm-bytes", "4M",
                         "--cpus", str(cpu)]
    assert d["builtin"]["status"] == "interrupted" and d["status"] == "stopped"
    assert group_members(pgid) == []


class EngineHere(PosingAsBoard):
    """A "board" that is this machine reached without SSH: the remote-load code path
    (engine-started groups, lifeline, records) with no connection in between."""

    board_name = "here"

    @property
    def engine_path(self) -> str:
        return str(self.probe)


def test_a_board_load_that_ends_by_itself_died_early(probe_bin: str) -> None:
    """Liveness of a board's load comes from its engine: stress-ng ending on its own
    (exec_done before the stop) is a load that died early, noticed by the watcher."""
    from rtlab.loads import LoadSet, from_spec
    from rtlab.loads.board import RemoteLoad
    from rtlab.loads.on_target import for_target

    if subprocess.run(["sh", "-c", "command -v stress-ng"], capture_output=True,
                      check=False).returncode != 0:
        pytest.skip("stress-ng is not installed")
    cpu = min(os.sched_getaffinity(0))
    load = for_target(from_spec({"kind": "stress", "cpu": 1, "timeout": "8s",
                                 "cpus": [cpu]}), EngineHere(probe_bin))
    assert isinstance(load, RemoteLoad)
    deaths: list[str] = []
    spawns: list[tuple[int, int]] = []

    class Journal:
        def record_spawn(self, pgid: int, starttime: int) -> None:
            spawns.append((pgid, starttime))

        def record_netns(self, name: str) -> None:
            raise AssertionError(name)

    with LoadSet([load], Journal(), settle_s=0.3,
                 on_death=lambda ld: deaths.append(ld.name)) as ls:
        (p,) = load.procs
        assert spawns == [(p.pgid, p.starttime)] and p.pgid == p.pid
        assert p.workers_seen > 0 and not ls.died()
        deadline = time.monotonic() + WAIT + 10
        while not deaths and time.monotonic() < deadline:
            time.sleep(0.1)
        assert deaths == ["stress"]
    d = ls.describe()[0]
    assert d["died_early"] and d["status"] == "died" and d["exit_status"] == 0
    (pd,) = d["processes"]
    assert pd["end"]["type"] == "exec_done" and not pd["end"]["stopped"]
    assert pd["board_command"][:3] == [probe_bin, "--stdin-lifeline", "exec"]
    assert group_members(p.pgid) == []


def test_a_board_load_is_stopped_through_its_lifeline(probe_bin: str) -> None:
    """The stop closes the engine's stdin; the engine ends the group and says so."""
    from rtlab.loads import LoadSet, from_spec
    from rtlab.loads.on_target import for_target

    cpu = min(os.sched_getaffinity(0))
    load = for_target(from_spec({"kind": "builtin", "cpu": 1, "vm": 1, "vm_bytes": "4M",
                                 "cpus": [cpu]}), EngineHere(probe_bin))
    with LoadSet([load], settle_s=0.3) as ls:
        (p,) = load.procs
        assert p.workers_seen == 2 and len(group_members(p.pgid)) == 3
    assert ls.stop_result["killed"] == []  # ended by the engine, not by dropping ssh
    d = ls.describe()[0]
    assert d["status"] == "stopped" and not d["died_early"] and d["exit_status"] == 130
    assert d["builtin"]["status"] == "interrupted" and d["target"] == "here"
    assert group_members(p.pgid) == []


def test_competing_timer_threads_on_a_board_report_back(probe_bin: str) -> None:
    """rt-competitor on a board: the board's engine under `exec`, its JSON Lines back on
    the exec's stderr, summarised in the description like a local competitor's."""
    from rtlab.loads import LoadSet, from_spec
    from rtlab.loads.on_target import for_target

    cpu = min(os.sched_getaffinity(0))
    load = for_target(from_spec({"kind": "rt-competitor", "cpus": [cpu], "policy": "other",
                                 "interval": "1ms"}), EngineHere(probe_bin))
    with LoadSet([load], settle_s=0.3):
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline and '"snapshot"' not in \
                load.procs[0].stderr_path.read_text(errors="replace"):
            time.sleep(0.1)
    d = load.describe()
    assert d["argv"][:2] == [probe_bin, "timer"] and "--output" in d["argv"]
    assert d["processes"][0]["board_command"][2:6] == ["exec", "--cpus", str(cpu), "--"]
    (ch,) = d["competitor"]["channels"]
    assert ch["cpu"] == cpu and ch["samples"] > 0
    assert group_members(load.procs[0].pgid) == []
