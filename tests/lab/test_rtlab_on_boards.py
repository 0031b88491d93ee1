# SPDX-License-Identifier: MIT
"""rtlab against emulated boards: kernels that are not this machine's (PREEMPT_RT,
cgroup v2 cpusets, ARM), no Python on the board, reached over real SSH.

Latency under emulation means nothing and is never asserted; behaviour is: what is
stored and with which provenance, what the board looks like after a shield, a killed
host and a dropped connection, and which inputs are refused with one line.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli_errors import one_error_line
from tests.support.store_reading import stored_dicts

from .boards import Board

REPO = Path(__file__).resolve().parent.parent.parent


def rtlab(board_cfg: Path, tmp: Path, *args: str, store: bool = True, timeout: float = 300,
          env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    e = {**os.environ, "RTLAB_SSH_CONFIG": str(board_cfg), "PYTHONPATH": str(REPO),
         "XDG_DATA_HOME": str(tmp / "xdg"), "COLUMNS": "200", **(env or {})}
    extra = ["--store", str(tmp / "store.db")] if store else []
    return subprocess.run([sys.executable, "-m", "rtlab", *args, *extra], capture_output=True,
                          text=True, env=e, timeout=timeout, check=False)


def stored(tmp: Path) -> list[dict[str, Any]]:
    """The runs in the store of `rtlab()`, as dicts."""
    return stored_dicts(tmp / "store.db")


@pytest.fixture
def board_facts(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[Board], Any]]:
    """board_facts(board) -> the board's `sys facts`, read there by its engine."""
    from rtlab.engine.board import SshTransport
    from rtlab.system.facts import read_facts

    opened: list[SshTransport] = []

    def read(board: Board) -> Any:
        monkeypatch.setenv("RTLAB_SSH_CONFIG", str(board.ssh_config))
        t = SshTransport(board.alias)
        opened.append(t)
        try:
            return read_facts(t)
        finally:
            t.close()

    yield read


def same_state(a: Any, b: Any) -> list[str]:
    """What differs between two facts of one board: cgroups, task and IRQ affinities,
    sysctls (tasks that came or went meanwhile are not differences)."""
    diff = []
    if a.cgroup != b.cgroup:
        diff.append(f"cgroup {a.cgroup} -> {b.cgroup}")
    if a.sysctl != b.sysctl:
        diff.append(f"sysctl {a.sysctl} -> {b.sysctl}")
    if a.default_smp_affinity != b.default_smp_affinity:
        diff.append("default_smp_affinity")
    for t in a.tasks:
        u = b.task(t.tid)
        if u is None:
            continue
        # the thread of a threaded IRQ follows its IRQ's effective CPU, which the kernel
        # picks within the IRQ's affinity (compared below): not a setting of its own
        follows_irq = t.kthread and t.comm.startswith("irq/")
        # nobody but the kernel sets the affinity of a PF_NO_SETAFFINITY task (rtlab
        # cannot): a workqueue rescuer such as rcu_gp takes the CPUs of the pool it
        # last rescued, which happens when new workers come slowly (a busy host)
        kernels = t.per_cpu
        if u.cgroups != t.cgroups or (u.affinity != t.affinity and not follows_irq
                                      and not kernels):
            diff.append(f"task {t.tid} {t.comm} (kthread {t.kthread}, per_cpu {t.per_cpu}): "
                        "affinity "
                        f"{t.affinity} -> {u.affinity}, cgroups {t.cgroups} -> {u.cgroups}")
    irqs = {i.irq: i for i in b.irqs}
    for i in a.irqs:
        j = irqs.get(i.irq)
        if j is not None and j.affinity != i.affinity:
            diff.append(f"irq {i.irq}")
    return diff


def test_aarch64_board_run_is_stored_with_its_provenance(arm64_board: Board,
                                                         tmp_path: Path) -> None:
    proc = rtlab(arm64_board.ssh_config, tmp_path, "run", "--probe", "timer", "--duration",
                 "2s", "--interval", "1ms", "--no-report", "--target", arm64_board.alias)
    assert proc.returncode == 0, proc.stderr
    (run,) = stored(tmp_path)
    target = run["provenance"]["host"]["target"]
    assert target["machine"] == "aarch64" and target["engine_arch"] == "aarch64"
    system = run["provenance"]["engine"]["system"]
    assert system["machine"] == "aarch64" if "machine" in system else True
    assert system["preempt"] == "rt"
    assert system["hostname"] == arm64_board.alias or system["hostname"]
    assert run["provenance"]["doctor"]["findings"]
    ch = run["phases"][0]["channels"]
    assert len(ch) == arm64_board.cpus and all(c["samples"] > 0 for c in ch)


def test_doctor_sees_preempt_rt_on_the_board(x86_board: Board, tmp_path: Path) -> None:
    proc = rtlab(x86_board.ssh_config, tmp_path, "doctor", "--json", "--target",
                 x86_board.alias, store=False)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    pre = next(f for f in doc["findings"] if f["check"] == "preempt")
    assert pre["severity"] == "ok", pre
    assert pre["facts"]["model"] == "rt"


def test_cgroup_v2_shield_on_the_rt_board_and_back(x86_board: Board, tmp_path: Path,
                                                   board_facts: Callable[[Board], Any]) -> None:
    before = board_facts(x86_board)
    assert before.cgroup.v2_cpuset or before.cgroup.v2
    on = rtlab(x86_board.ssh_config, tmp_path, "shield", "--cpus", "1", "--irqs",
               "--json", "--target", x86_board.alias, store=False)
    try:
        assert on.returncode == 0, on.stderr
        out = json.loads(on.stdout)
        assert out["summary"]["backend"] == "v2", out["summary"]
        during = board_facts(x86_board)
        assert same_state(before, during)  # the shield changed the board
    finally:
        off = rtlab(x86_board.ssh_config, tmp_path, "shield", "--reset", "--target",
                    x86_board.alias, store=False)
    assert off.returncode == 0, off.stderr
    after = board_facts(x86_board)
    assert same_state(before, after) == []


SHIELDED = ('[scenario]\nname = "shielded"\n[shield]\ncpuset = true\nuser = "1"\nirqs = true\n'
            '[[probe]]\nprobe = "timer"\ncpus = "1"\n[[phase]]\nname = "p"\nduration = "90s"\n')


def _start_shielded_run(board: Board, tmp: Path) -> subprocess.Popen[bytes]:
    scen = tmp / "s.toml"
    scen.write_text(SHIELDED)
    env = {**os.environ, "RTLAB_SSH_CONFIG": str(board.ssh_config), "PYTHONPATH": str(REPO),
           "XDG_DATA_HOME": str(tmp / "xdg")}
    return subprocess.Popen([sys.executable, "-m", "rtlab", "run", str(scen), "--no-report",
                             "--no-progress", "--target", board.alias,
                             "--store", str(tmp / "store.db")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                            start_new_session=True)


def _wait_measuring(board: Board, p: subprocess.Popen[bytes]) -> None:
    """Until the board has a run journal and a kept raw file with a snapshot."""
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        assert p.poll() is None, p.stderr.read().decode() if p.stderr else ""
        r = board.sh('ls /run/rtlab/run-*.journal >/dev/null 2>&1 && '
                     'grep -l "\\"snapshot\\"" /tmp/rtlab.0/runs/*.jsonl >/dev/null 2>&1 '
                     '&& echo yes')
        if r.stdout.strip() == "yes":
            return
        time.sleep(1.0)
    pytest.fail("the run did not start measuring on the board")


def _wait_restored(board: Board) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if not board.sh("ls /run/rtlab/run-*.journal 2>/dev/null").stdout.strip():
            return
        time.sleep(0.5)
    pytest.fail("the board kept its run journal: it did not restore by itself")


def _children(pid: int) -> list[int]:
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True,
                         text=True, check=False).stdout.split()
    return [int(x) for x in out]


def test_kill9_of_the_host_leaves_the_board_as_before(fresh_board: Callable[..., Board],
                                                      tmp_path: Path,
                                                      board_facts: Callable[[Board], Any]
                                                      ) -> None:
    board = fresh_board("x86_64-rt")
    before = board_facts(board)
    p = _start_shielded_run(board, tmp_path)
    _wait_measuring(board, p)
    os.killpg(p.pid, signal.SIGKILL)  # rtlab and its ssh processes, at once
    p.wait()
    _wait_restored(board)
    assert same_state(before, board_facts(board)) == []
    # the board kept the run; it comes home with `results fetch`
    got = rtlab(board.ssh_config, tmp_path, "results", "fetch", "--target", board.alias)
    assert got.returncode == 0, got.stderr
    (run,) = stored(tmp_path)
    assert run["partial"] and run["phases"][0]["channels"][0]["samples"] > 0


def test_dropped_connection_leaves_the_board_as_before(fresh_board: Callable[..., Board],
                                                       tmp_path: Path,
                                                       board_facts: Callable[[Board], Any]
                                                       ) -> None:
    """The SSH connection dies under a running shielded run (its ControlMaster is
    killed): rtlab says so, keeps what it got, and the board restores by itself."""
    board = fresh_board("x86_64-rt")
    before = board_facts(board)
    p = _start_shielded_run(board, tmp_path)
    _wait_measuring(board, p)
    masters = [c for c in _children(p.pid)
               if b"-M" in Path(f"/proc/{c}/cmdline").read_bytes().split(b"\0")[:20]
               and b"ssh" in Path(f"/proc/{c}/cmdline").read_bytes()]
    assert masters, "no ssh ControlMaster under the rtlab process"
    for m in masters:
        os.kill(m, signal.SIGKILL)
    _out, err = p.communicate(timeout=120)
    assert p.returncode not in (0, None)
    assert b"Traceback" not in err, err.decode()
    _wait_restored(board)
    assert same_state(before, board_facts(board)) == []


def test_two_boards_in_parallel_one_comparison(x86_board: Board, arm64_board: Board,
                                               tmp_path: Path) -> None:
    cfg = tmp_path / "both"
    cfg.write_text(x86_board.ssh_config.read_text() + arm64_board.ssh_config.read_text())
    proc = rtlab(cfg, tmp_path, "run", "--probe", "timer", "--duration", "2s", "--target",
                 x86_board.alias, "--target", arm64_board.alias,
                 "--report", str(tmp_path / "r.html"))
    assert proc.returncode == 0, proc.stderr
    runs = stored(tmp_path)
    assert sorted(r["provenance"]["host"]["target"]["machine"] for r in runs) == [
        "aarch64", "x86_64"]
    assert len({r["scenario"]["comparison"] for r in runs}) == 1
    assert "per CPU, side by side" in proc.stdout
    assert "Per CPU, side by side" in (tmp_path / "r.html").read_text()


def test_engine_that_does_not_run_on_the_board_is_refused(arm64_board: Board,
                                                          tmp_path: Path) -> None:
    """An aarch64 board given an x86_64 binary as its engine: one line, exit 4."""
    from rtlab.engine.builds import engines_dir

    fake = tmp_path / "engines" / "aarch64" / "rtlab-probe"
    fake.parent.mkdir(parents=True)
    fake.write_bytes((engines_dir() / "x86_64" / "rtlab-probe").read_bytes())
    fake.chmod(0o755)
    proc = rtlab(arm64_board.ssh_config, tmp_path, "board", "info", "--target",
                 arm64_board.alias, "--engine-dir", "/tmp/rtlab-wrong-arch",
                 env={"RTLAB_ENGINES": str(tmp_path / "engines")}, store=False)
    assert proc.returncode == 4
    assert "does not run there" in one_error_line(proc)
    arm64_board.sh("rm -rf /tmp/rtlab-wrong-arch")


def test_board_without_an_engine_build_is_refused(arm64_board: Board, tmp_path: Path) -> None:
    (tmp_path / "engines" / "x86_64").mkdir(parents=True)
    proc = rtlab(arm64_board.ssh_config, tmp_path, "doctor", "--target", arm64_board.alias,
                 env={"RTLAB_ENGINES": str(tmp_path / "engines")}, store=False)
    assert proc.returncode != 0
    line = one_error_line(proc)
    assert "aarch64" in line


def test_full_or_read_only_engine_dir_is_one_error_line(arm64_board: Board, tmp_path: Path) -> None:
    arm64_board.sh("mkdir -p /mnt/tiny && (mountpoint -q /mnt/tiny || "
                   "mount -t tmpfs -o size=64k tmpfs /mnt/tiny)", check=True)
    try:
        full = rtlab(arm64_board.ssh_config, tmp_path, "board", "info", "--target",
                     arm64_board.alias, "--engine-dir", "/mnt/tiny/rtlab", store=False)
        assert full.returncode == 1
        assert "No space left" in one_error_line(full)
        ro = rtlab(arm64_board.ssh_config, tmp_path, "board", "info", "--target",
                   arm64_board.alias, "--engine-dir", "/proc/rtlab", store=False)
        assert ro.returncode == 1
        assert "copying the engine" in one_error_line(ro)
    finally:
        arm64_board.sh("umount /mnt/tiny")


def test_non_root_user_is_told_what_is_missing(x86_board: Board, tmp_path: Path) -> None:
    """The board's unprivileged user `lab`: the engine cannot get SCHED_FIFO there, so
    the run is skipped (exit 4) with one line saying why; nothing is stored."""
    proc = rtlab(x86_board.ssh_config, tmp_path, "run", "--probe", "timer", "--duration",
                 "1s", "--no-report", "--target", f"lab@{x86_board.alias}")
    assert proc.returncode == 4, proc.stderr
    one_error_line(proc)
    assert not (tmp_path / "store.db").exists() or not stored(tmp_path)
    x86_board.sh("rm -rf /tmp/rtlab.1000")


def test_udp_ping_pong_across_the_board_link(x86_board: Board, arm64_board: Board,
                                             tmp_path: Path,
                                             board_facts: Callable[[Board], Any]) -> None:
    """The seed's UDP test between two boards: the reflector on the aarch64 board
    (10.77.0.2 on the link), the pinger on the x86_64 board, the link's NIC IRQ threads
    on the reflector board at FIFO 99 for the run and back afterwards."""
    before = board_facts(arm64_board)
    link_irq_threads = [t for t in before.tasks if t.kthread and t.comm.startswith("irq/")]
    cfg = tmp_path / "both"
    cfg.write_text(x86_board.ssh_config.read_text() + arm64_board.ssh_config.read_text())
    proc = rtlab(cfg, tmp_path, "run", "--probe", "udp", "--duration", "3s", "--no-report",
                 "--target", x86_board.alias, "--reflector", arm64_board.alias,
                 "--peer", "10.77.0.2:7400", "--reflector-thread-priority",
                 "irq/[0-9]+-virtio=fifo:99", "--reflector-irq", "virtio=0")
    assert proc.returncode == 0, proc.stderr
    (run,) = stored(tmp_path)
    rtt = next(c for c in run["phases"][0]["channels"] if c["name"] == "rtt")
    assert rtt["samples"] > 0
    peer = run["provenance"]["host"]["udp_peer"]
    assert peer["kind"] == "board" and peer["reflector_target"] == arm64_board.alias
    applied = peer["thread_priorities"]
    # PREEMPT_RT threads every IRQ: the virtio NICs' IRQ threads were given FIFO 99
    assert any(t.comm.startswith("irq/") and "virtio" in t.comm for t in link_irq_threads)
    assert applied and all(a["ok"] and a["priority"] == 99 for a in applied)
    moved = peer["irqs_moved"]  # the NICs' IRQs on CPU 0 for the run, back afterwards
    assert moved and all(m["ok"] and m["cpus"] == "0" for m in moved), moved
    after = board_facts(arm64_board)
    assert same_state(before, after) == []
    for t in before.tasks:
        u = after.task(t.tid)
        if u is not None:
            assert (u.policy, u.priority) == (t.policy, t.priority), t.comm


def test_armhf_board_runs_its_engine(fresh_board: Callable[..., Board],
                                     tmp_path: Path) -> None:
    """A 32-bit ARM (Cortex-A15, armv7l) PREEMPT_RT board gets the armhf engine."""
    board = fresh_board("armhf-rt", cpus=1, mem_mb=256)
    proc = rtlab(board.ssh_config, tmp_path, "run", "--probe", "timer", "--duration", "1s",
                 "--no-report", "--target", board.alias)
    assert proc.returncode == 0, proc.stderr
    (run,) = stored(tmp_path)
    target = run["provenance"]["host"]["target"]
    assert target["machine"].startswith("armv7") and target["engine_arch"] == "armhf"
    assert run["provenance"]["engine"]["system"]["preempt"] == "rt"


def test_board_without_cpusets_is_told_so(fresh_board: Callable[..., Board],
                                          tmp_path: Path) -> None:
    """No cgroup hierarchy with cpusets on the board: the shield is skipped with one line
    (exit 4) and the board is left as it was."""
    board = fresh_board("aarch64-rt", cpus=2, mem_mb=256)
    board.sh("umount /sys/fs/cgroup", check=True)
    proc = rtlab(board.ssh_config, tmp_path, "shield", "--cpus", "1", "--target",
                 board.alias, store=False)
    assert proc.returncode == 4
    assert "cpuset" in one_error_line(proc)
    assert not board.sh("ls /run/rtlab/*.journal 2>/dev/null").stdout.strip()
