# SPDX-License-Identifier: MIT
"""Boards over real SSH (OpenSSH client, dropbear server in a network namespace):
engine copy and reuse, a measurement streamed back with the board's provenance, the
doctor and the shield on the board, bad input, and shell metacharacters that must
arrive as plain text."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from rtlab.engine.ssh import SshTarget
from rtlab.errors import UsageError
from tests.support.cli_errors import one_error_line
from tests.support.store_reading import stored_dicts

from .nsboard import NsBoard

pytestmark = pytest.mark.usefixtures("require_root")


@pytest.mark.parametrize("text", ["board7", "root@board7", "board7:2222", "lab@10.0.2.15:22",
                                  "[fe80::1]:22", "u@[::1]", "b-7.lab.example"])
def test_target_accepts_destinations(text: str) -> None:
    t = SshTarget.parse(text)
    assert str(t) == text.replace("[::1]", "[::1]")


@pytest.mark.parametrize("text", ["-oProxyCommand=touch /tmp/x", "b;touch /tmp/x",
                                  "$(touch /tmp/x)", "b 7", "b7:0", "b7:70000", "b7:x",
                                  "@b7", "a@b@c", "b`id`", "[::1", ""])
def test_target_refuses_anything_else(text: str) -> None:
    with pytest.raises(UsageError) as exc:
        SshTarget.parse(text)
    assert "--target" in exc.value.message


def test_run_on_a_board_streams_and_stores_its_provenance(board: NsBoard, cli) -> None:  # type: ignore[no-untyped-def]
    first = cli("run", "--probe", "timer", "--cpus", "0", "--duration", "2s",
                "--interval", "1ms", "--no-report", "--target", board.name)
    assert first.returncode == 0, first.stderr
    assert "CPU0" in first.stdout
    second = cli("run", "--probe", "timer", "--cpus", "0", "--duration", "1s",
                 "--no-report", "--target", board.name)
    assert second.returncode == 0, second.stderr
    engines = sorted(p.name for p in Path(cli.engine_dir).iterdir()
                     if p.name.startswith("rtlab-probe-"))
    assert len(engines) == 1  # copied once, content-addressed, reused
    runs = stored_dicts(cli.store)
    assert len(runs) == 2
    targets = [r["provenance"]["host"]["target"] for r in runs]  # type: ignore[index]
    assert [t["copied"] for t in sorted(targets, key=lambda t: not t["copied"])] == [True, False]
    for r, t in zip(runs, targets, strict=True):
        assert t["kind"] == "ssh" and t["machine"] == os.uname().machine
        assert t["engine"].startswith(str(cli.engine_dir))
        assert r["status"] == "completed"
        ch = r["phases"][0]["channels"][0]  # type: ignore[index]
        assert ch["samples"] > 500
        # the board kept its own copy of the raw output, identical to what came back
        kept = Path(cli.engine_dir) / "runs"
        assert any(kept.iterdir())
    assert "doctor" in runs[0]["provenance"]


def test_doctor_reads_the_board(board: NsBoard, cli) -> None:  # type: ignore[no-untyped-def]
    proc = cli("doctor", "--json", "--target", board.name, store=False)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["target"] == board.name
    checks = {f["check"]: f for f in doc["findings"]}
    assert "preempt" in checks and checks["preempt"]["severity"] != "unknown"


def test_shield_on_the_board_and_back(board: NsBoard, cli, probe_bin: str) -> None:  # type: ignore[no-untyped-def]
    from rtlab.engine.transport import LocalTransport
    from rtlab.system.facts import read_facts

    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs 2 CPUs")
    before = read_facts(LocalTransport(probe_bin))
    on = cli("shield", "--cpus", "1", "--target", board.name, store=False)
    try:
        assert on.returncode == 0, on.stderr
        assert f"on {board.name}" in on.stdout
        st = cli("shield", "--status", "--json", "--target", board.name, store=False)
        assert st.returncode == 0 and json.loads(st.stdout)["requested"]["cpus"]
    finally:
        off = cli("shield", "--reset", "--target", board.name, store=False)
    assert off.returncode == 0, off.stderr
    after = read_facts(LocalTransport(probe_bin))
    moved = [t for t in before.tasks if (a := after.task(t.tid)) is not None
             and a.affinity != t.affinity]
    assert not moved
    assert "nothing to restore" in cli("restore", "--target", board.name,
                                       store=False).stdout


@pytest.mark.parametrize("alias,expect", [
    ("nsboard0-badkey", "host key"),
    ("unreachable", "cannot reach"),
])
def test_unusable_boards_are_one_line(board: NsBoard, cli, alias: str, expect: str) -> None:  # type: ignore[no-untyped-def]
    target = alias if alias != "unreachable" else f"root@{board.host_addr}:1"
    proc = cli("run", "--probe", "timer", "--duration", "1s", "--no-report",
               "--target", target)
    assert proc.returncode == 1
    assert expect in one_error_line(proc)
    assert not Path(cli.store).exists() or not stored_dicts(cli.store)


def test_refused_key_is_one_line(board: NsBoard, cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    other = tmp_path / "other"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)],
                   check=True)
    cfg = tmp_path / "cfg"
    cfg.write_text(board.ssh_config.read_text().replace(str(board.key), str(other)))
    proc = cli("doctor", "--target", board.name, env={"RTLAB_SSH_CONFIG": str(cfg)},
               store=False)
    assert proc.returncode == 1
    assert "refused the login" in one_error_line(proc)


def test_metacharacters_reach_the_board_as_text(board: NsBoard, cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    canary = tmp_path / "pwned"
    odd = tmp_path / f"dir with ; $(touch {canary}) `touch {canary}` 'q\" & | >x"
    proc = cli("board", "info", "--target", board.name, "--engine-dir", str(odd),
               store=False)
    assert proc.returncode == 0, proc.stderr
    assert not canary.exists()
    assert any(p.name.startswith("rtlab-probe-") for p in odd.iterdir())
    gone = cli("board", "clean", "--target", board.name, "--engine-dir", str(odd),
               store=False)
    assert gone.returncode == 0, gone.stderr
    assert not odd.exists() and not canary.exists()


def test_an_engine_of_another_version_is_refused(board: NsBoard, cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    machine = os.uname().machine
    from rtlab.engine.builds import MACHINE_ARCH

    arch = MACHINE_ARCH[machine]
    fake = tmp_path / "engines" / arch / "rtlab-probe"
    fake.parent.mkdir(parents=True)
    fake.write_text("#!/bin/sh\necho '{\"type\":\"version\",\"schema\":1,"
                    "\"engine_version\":\"0.0.1\",\"arch\":\"" + arch + "\",\"machine\":\""
                    + machine + "\",\"output_schema\":1,\"sys_schema\":1,\"static\":true,"
                    "\"af_xdp\":false}'\n")
    fake.chmod(0o755)
    proc = cli("board", "info", "--target", board.name,
               env={"RTLAB_ENGINES": str(tmp_path / "engines")}, store=False)
    assert proc.returncode != 0
    assert "0.0.1" in one_error_line(proc)


def test_killed_host_leaves_the_board_as_it_was(board: NsBoard, cli, tmp_path: Path,
                                                probe_bin: str) -> None:  # type: ignore[no-untyped-def]
    """kill -9 of rtlab while the board is shielded for a run: the board's applier sees
    its stdin close (the SSH connection went with rtlab) and restores by itself."""
    import signal
    import sys
    import time

    from rtlab.engine.transport import LocalTransport
    from rtlab.system.facts import read_facts

    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs 2 CPUs")
    scen = tmp_path / "s.toml"
    scen.write_text('[scenario]\nname = "shielded"\n[shield]\ncpuset = true\nuser = "1"\n'
                    '[[probe]]\nprobe = "timer"\ncpus = "1"\n'
                    '[[phase]]\nname = "p"\nduration = "60s"\n')
    before = read_facts(LocalTransport(probe_bin))
    env = {**os.environ, "RTLAB_PROBE": probe_bin, "RTLAB_SSH_CONFIG": str(board.ssh_config),
           "RTLAB_ENGINE_DIR": str(cli.engine_dir), "PYTHONPATH": str(Path.cwd()),
           "XDG_DATA_HOME": str(tmp_path / "xdg")}
    p = subprocess.Popen([sys.executable, "-m", "rtlab", "run", str(scen), "--no-report",
                          "--no-progress", "--target", board.name,
                          "--store", str(tmp_path / "k.db")],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    deadline = time.monotonic() + 60
    raw_dir = Path(cli.engine_dir) / "runs"
    while time.monotonic() < deadline:  # measuring on the board: its raw file grows
        if raw_dir.is_dir() and any(f.stat().st_size > 2000 for f in raw_dir.iterdir()):
            break
        assert p.poll() is None, p.stderr.read().decode() if p.stderr else ""
        time.sleep(0.2)
    else:
        pytest.fail("the run did not start measuring on the board")
    p.send_signal(signal.SIGKILL)
    p.wait()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if not list(board.run_dir.glob("run-*.journal")):
            break
        time.sleep(0.2)
    after = read_facts(LocalTransport(probe_bin))
    assert after.cgroup == before.cgroup
    moved = [t.tid for t in before.tasks if (a := after.task(t.tid)) is not None
             and (a.affinity != t.affinity or a.cgroups != t.cgroups)]
    assert not moved
    # the engine stopped when its stdin closed and kept its whole output on the board:
    # a header and a final (interrupted) result after about a second of measuring
    kept = max(raw_dir.iterdir(), key=lambda f: f.stat().st_mtime).read_text()
    recs = [json.loads(line) for line in kept.splitlines()]
    assert recs[0]["type"] == "header" and recs[-1]["type"] == "result"
    assert recs[-1]["status"] == "interrupted"
    assert recs[-1]["channels"][0]["samples"] > 0


def test_two_hosts_cannot_drive_one_board(board: NsBoard, cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A board is measured by one run at a time: the second gets one line naming the
    first (its owner lock lives beside the journals on the board), and stores nothing."""
    import sys
    import time

    env = {**os.environ, "RTLAB_SSH_CONFIG": str(board.ssh_config),
           "RTLAB_ENGINE_DIR": str(cli.engine_dir), "PYTHONPATH": str(Path.cwd()),
           "XDG_DATA_HOME": str(tmp_path / "xdg")}
    first = subprocess.Popen([sys.executable, "-m", "rtlab", "run", "--probe", "timer",
                              "--cpus", "0", "--duration", "20s", "--no-report",
                              "--no-progress", "--target", board.name,
                              "--store", str(tmp_path / "first.db")],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        deadline = time.monotonic() + 60
        lock = board.run_dir / "target.lock"
        while time.monotonic() < deadline:
            if lock.exists() and "rtlab run" in lock.read_text():
                break
            assert first.poll() is None
            time.sleep(0.1)
        second = cli("run", "--probe", "timer", "--cpus", "0", "--duration", "1s",
                     "--no-report", "--target", board.name)
        assert second.returncode == 1
        line = one_error_line(second)
        assert "in use by rtlab run" in line and f"pid {first.pid}" in line
        assert not stored_dicts(cli.store)
    finally:
        first.terminate()
        _out, err = first.communicate(timeout=60)
    assert first.returncode == 130, err  # interrupted: its partial result is stored


def test_fetch_brings_home_what_a_killed_host_lost(board: NsBoard, cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """kill -9 of rtlab mid-run: nothing was stored; the board kept the run (stopped by its
    lifeline), and `rtlab results fetch` stores it, once."""
    import signal
    import sys
    import time

    env = {**os.environ, "RTLAB_SSH_CONFIG": str(board.ssh_config),
           "RTLAB_ENGINE_DIR": str(cli.engine_dir), "PYTHONPATH": str(Path.cwd()),
           "XDG_DATA_HOME": str(tmp_path / "xdg")}
    p = subprocess.Popen([sys.executable, "-m", "rtlab", "run", "--probe", "timer", "--cpus",
                          "0", "--duration", "60s", "--no-report", "--no-progress",
                          "--target", board.name, "--store", str(cli.store)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    raw_dir = Path(cli.engine_dir) / "runs"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if raw_dir.is_dir() and any('"snapshot"' in f.read_text() for f in raw_dir.iterdir()):
            break
        assert p.poll() is None
        time.sleep(0.2)
    p.send_signal(signal.SIGKILL)
    p.wait()
    assert not stored_dicts(cli.store)
    deadline = time.monotonic() + 60  # the board's engine ends as its stdin closes
    while time.monotonic() < deadline and not any(
            '"type":"result"' in f.read_text() for f in raw_dir.iterdir()):
        time.sleep(0.2)
    got = cli("results", "fetch", "--target", board.name)
    assert got.returncode == 0, got.stderr
    runs = stored_dicts(cli.store)
    assert len(runs) == 1 and runs[0]["partial"] and runs[0]["status"] == "partial"
    assert runs[0]["phases"][0]["channels"][0]["samples"] > 0
    notes = runs[0]["notes"]
    # the whole run comes from the board's copy, and the run says so: that is what tells
    # the reader that the host lost it (the killed host stored nothing)
    kept = [f for f in raw_dir.iterdir() if f.suffix == ".jsonl"]
    assert len(kept) == 1 and any(f"imported from {kept[0].name}" in n for n in notes), notes
    recs = [json.loads(x) for x in kept[0].read_text().splitlines()]
    # stopped by its lifeline (stdin closed as the connection went): the result is last
    assert recs[-1]["type"] == "result" and recs[-1]["status"] == "interrupted", recs[-1]
    # `stdout_lost` is written when a write to stdout fails (docs/engine.md). sshd closes
    # the engine's stdin and stdout as it tears the session down; when the engine sees
    # its stdin close while its stdout still has a reader, it stops and its last write
    # still fits in the open pipe: nothing failed, so no note is written. This
    # happened about once in 6 runs under a `stress-ng --cpu 1` hog. Whenever the engine
    # did note it in its kept copy, the stored run must say so.
    lost = [r for r in recs if r["type"] == "log" and r["code"] == "stdout_lost"]
    said = any("stopped reaching the host" in n for n in notes)
    assert said == bool(lost), (notes, lost)
    again = cli("results", "fetch", "--target", board.name)
    assert again.returncode == 0 and "already stored" in again.stdout
    assert len(stored_dicts(cli.store)) == 1


def test_two_boards_in_parallel_give_one_comparison(board: NsBoard, cli,
                                                    tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """`--target a --target b`: one run per board, measured at the same time, stored
    with one comparison id, and compared by host (the boards' own hostnames)."""
    from .nsboard import ns_board

    with ns_board(tmp_path / "second", index=1) as other:
        cfg = tmp_path / "both"
        cfg.write_text(board.ssh_config.read_text() + other.ssh_config.read_text())
        proc = cli("run", "--probe", "timer", "--cpus", "0", "--duration", "3s",
                   "--target", board.name, "--target", other.name,
                   "--report", str(tmp_path / "r.html"),
                   env={"RTLAB_SSH_CONFIG": str(cfg)})
        assert proc.returncode == 0, proc.stderr
    runs = stored_dicts(cli.store)
    assert len(runs) == 2
    hosts = sorted(r["provenance"]["engine"]["system"]["hostname"] for r in runs)  # type: ignore[index]
    assert hosts == ["nsboard0", "nsboard1"]
    assert len({r["scenario"]["comparison"] for r in runs}) == 1  # type: ignore[index]
    starts = sorted(r["provenance"]["host"]["start_wall"] for r in runs)  # type: ignore[index]
    ends = sorted(r["provenance"]["host"]["end_wall"] for r in runs)  # type: ignore[index]
    assert starts[1] < ends[0]  # in parallel: the second started before the first ended
    assert "per CPU, side by side" in proc.stdout
    assert "nsboard0" in proc.stdout and "nsboard1" in proc.stdout
    html = (tmp_path / "r.html").read_text()
    assert "Per CPU, side by side" in html
    ids = [str(r["run_id"]) for r in runs]
    cmp = cli("compare", *ids, "--by", "host")
    assert cmp.returncode == 0, cmp.stderr
    assert "nsboard0" in cmp.stdout and "nsboard1" in cmp.stdout


def test_udp_ping_pong_between_two_boards(board: NsBoard, cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The reflector on board B (started there over SSH), the pinger on board A, the
    packets over the cable between them; a thread priority on B for the run, journaled
    there and undone."""
    import shutil
    import sys

    from .nsboard import board_link, ns_board

    with ns_board(tmp_path / "b", index=1) as other, board_link(board, other) as (_, addr_b):
        cfg = tmp_path / "both"
        cfg.write_text(board.ssh_config.read_text() + other.ssh_config.read_text())
        # a process of B's with a name of its own, to prioritise like the seed's IRQ thread
        marker = tmp_path / "rtlabprio"
        shutil.copy("/bin/sleep", marker)
        held = subprocess.Popen(["ip", "netns", "exec", other.netns, str(marker), "60"])
        try:
            proc = cli("run", "--probe", "udp", "--duration", "3s", "--no-report",
                       "--target", board.name, "--reflector", other.name,
                       "--peer", f"{addr_b}:7400", "--reflector-cpu", "1",
                       "--reflector-thread-priority", "rtlabprio=fifo:9",
                       env={"RTLAB_SSH_CONFIG": str(cfg)})
            assert proc.returncode == 0, proc.stderr
            policy = os.sched_getscheduler(held.pid)
        finally:
            held.kill()
            held.wait()
        assert policy == os.SCHED_OTHER  # the priority was undone at the end of the run
    (run,) = stored_dicts(cli.store)
    rtt = next(c for c in run["phases"][0]["channels"] if c["name"] == "rtt")  # type: ignore[index]
    assert rtt["samples"] > 100
    peer = run["provenance"]["host"]["udp_peer"] if "udp_peer" in run["provenance"]["host"] \
        else run["provenance"]["host"]
    text = json.dumps(peer)
    assert other.name in text and f"{addr_b}:7400" in text
    assert '"priority": 9' in text and '"ok": true' in text
    del sys


def test_seed_scenario_on_a_cgroup_v1_board(board: NsBoard, cli, probe_bin: str) -> None:  # type: ignore[no-untyped-def]
    """The AMSC seed (seed-stress-builtin: shield, the engine's load, competitors at FIFO
    98 in both sets) on a board whose cpusets are cgroup v1 (this machine's, reached over
    SSH): it completes, the competitors run on every CPU, and the board is as before."""
    from rtlab.engine.transport import LocalTransport
    from rtlab.system.facts import read_facts

    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs 2 CPUs")
    # (the module's require_root holds the machine lock: this machine's cpusets are ours)
    before = read_facts(LocalTransport(probe_bin))
    proc = cli("run", "seed-stress-builtin", "--duration", "2s", "--no-report",
               "--target", board.name, timeout=300)
    after = read_facts(LocalTransport(probe_bin))
    assert proc.returncode == 0, proc.stderr
    (run,) = stored_dicts(cli.store)
    shield = run["provenance"]["host"]["shield"]  # type: ignore[index]
    assert shield["in_effect"]["in_effect"]["cgroup"]["backend"] == "v1"
    loads = {ld["name"]: ld for ld in run["provenance"]["host"]["phases"][0]["loads"]}  # type: ignore[index]
    comp = loads["competitors"]["competitor"]["channels"]
    assert sorted(c["cpu"] for c in comp) == sorted(os.sched_getaffinity(0))
    assert all(c["samples"] > 0 for c in comp)
    assert loads["stress"]["kind"] == "builtin" and loads["stress"]["status"] == "stopped"
    moved = [t.label for t in before.tasks if (a := after.task(t.tid)) is not None
             and (a.affinity != t.affinity or a.cgroups.get("cpuset") != t.cgroups.get("cpuset"))
             and not t.comm.startswith("irq/") and not t.per_cpu]
    assert not moved
    assert after.cgroup == before.cgroup
