# SPDX-License-Identifier: MIT
"""`rtlab tune`'s refusals and the parts that change nothing: the plan with its
estimated time and the knobs skipped and named, a budget too short for any verdict
refused up front, boot knobs without a reboot interface, a target whose owner lock
another rtlab holds, not root; each one line, its exit code, nothing created."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _rtlab(tmp: Path, *args: str, user: str | None = None,
           timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "200",
           "XDG_DATA_HOME": str(tmp / "xdg"), "XDG_STATE_HOME": str(tmp / "state")}
    argv = [sys.executable, "-m", "rtlab", *args]
    if user is not None:
        argv = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", *argv]
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=timeout,
                          cwd=tmp)


def _nothing_created(tmp: Path) -> None:
    assert not (tmp / "state").exists() and not (tmp / "xdg").exists()
    assert not list(tmp.glob("*.db"))


def test_plan_names_candidates_skips_and_time(tmp_path: Path) -> None:
    p = _rtlab(tmp_path, "tune", "--plan", "--budget", "30m")
    assert p.returncode == 0, p.stderr
    assert "estimated time" in p.stdout and "plan:" in p.stdout
    assert "candidate cpuset-shield" in p.stdout
    # what this machine lacks is skipped and named, never a failure
    if not Path("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor").exists():
        assert "skipped governor: no cpufreq on the measured CPUs" in p.stdout
    _nothing_created(tmp_path)


@pytest.mark.parametrize(("args", "words"), [
    (["--budget", "1m"], "too short for any verdict"),
    (["--knobs", "nope"], "--knobs: unknown knob 'nope'"),
    (["--knobs", "isolcpus"], "it needs a reboot interface"),
    (["--knobs", "stat-interval,stat-interval"], "given twice"),
    (["--stats", "p42"], "--stats: unknown statistic 'p42'"),
    (["--block", "1s"], "--block 1s is too short"),
    (["--pairs", "0"], "--pairs 0 out of range"),
    (["--reboot-cmd", " "], "--reboot-cmd"),
    (["--reboot-cmd", "reboot\nnow"], "--reboot-cmd: not a command"),
    (["--resume", "tune-nope"], "--resume 'tune-nope': no such tune"),
    (["--show", "tune-nope"], "--show 'tune-nope': no such tune"),
    (["--slo", "p99 <"], "SLO"),
])
def test_bad_input_is_one_line_exit_2_nothing_created(tmp_path: Path, args: list[str],
                                                      words: str) -> None:
    p = _rtlab(tmp_path, "tune", "--plan", *args)
    assert p.returncode == 2, (p.stdout, p.stderr)
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0], p.stderr
    assert "Traceback" not in p.stderr
    _nothing_created(tmp_path)


def test_list_knobs_is_the_catalogue(tmp_path: Path) -> None:
    from rtlab.tune.knobs import CATALOGUE

    p = _rtlab(tmp_path, "tune", "--list-knobs", "--json")
    assert p.returncode == 0, p.stderr
    names = [k["name"] for k in json.loads(p.stdout)]
    assert names == [k.name for k in CATALOGUE]
    # every issue's runtime and boot knob is in it
    for must in ("cpuset-shield", "irq-affinity", "kthreads", "rt-throttling-off",
                 "dma-latency", "idle-states", "governor", "min-freq", "smt-off",
                 "timer-migration-off", "watchdogs-off", "stat-interval",
                 "net-irq-priority", "isolcpus", "nohz_full", "rcu_nocbs", "irqaffinity",
                 "idle-poll", "max-cstate", "nosmt", "skew_tick", "nowatchdog"):
        assert must in names


@pytest.mark.skipif(shutil.which("setpriv") is None, reason="setpriv (util-linux) missing")
def test_not_root_is_skipped_exit_4(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("runs as root to drop to another user")
    import tempfile

    d = Path(tempfile.mkdtemp(prefix="rtlab-tune-nonroot-"))  # a place nobody may enter
    try:
        d.chmod(0o777)
        p = _rtlab(d, "tune", "--budget", "10m", "--dir", str(d / "t"), user="65534")
        assert p.returncode == 4, (p.stdout, p.stderr)
        assert "needs root" in p.stderr and len(p.stderr.strip().splitlines()) == 1
        assert not (d / "t").exists()
    finally:
        shutil.rmtree(d)


def test_a_target_another_rtlab_holds_is_refused(require_root: None, tmp_path: Path) -> None:
    """The owner lock: while another rtlab holds this machine, a tune does not start."""
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\n"
         "from rtlab.engine.transport import LocalTransport\n"
         "from rtlab.system.applier import hold_target\n"
         "from rtlab.system.journal_files import journal_dir\n"
         "t = LocalTransport()\n"
         "journal_dir(t).mkdir(parents=True, exist_ok=True)\n"
         "with hold_target(t, journal_dir(t), 'shield --reset'):\n"
         "    print('held', flush=True)\n"
         "    sys.stdin.read()\n"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        t0 = time.monotonic()
        p = _rtlab(tmp_path, "tune", "--knobs", "stat-interval", "--budget", "10m",
                   "--block", "2s", "--store", str(tmp_path / "s.db"),
                   "--dir", str(tmp_path / "tunes"))
        assert p.returncode == 1, (p.stdout, p.stderr)
        (line,) = p.stderr.strip().splitlines()
        assert "shield --reset" in line and f"pid {holder.pid}" in line, line
        assert time.monotonic() - t0 < 60
        assert not (tmp_path / "s.db").exists()
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=30)


def test_docs_name_every_knob() -> None:
    from rtlab.tune.knobs import CATALOGUE

    text = (REPO / "docs" / "tune.md").read_text()
    missing = [k.name for k in CATALOGUE if f"`{k.name}`" not in text]
    assert not missing, f"docs/tune.md does not describe: {missing}"
