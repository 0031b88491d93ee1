# SPDX-License-Identifier: MIT
"""`kill -9` of `rtlab run` in the middle of a shielded, loaded scenario, then
`rtlab restore`: every cpuset, task affinity, IRQ affinity, priority and sysctl
rtlab touched is back to its recorded value (full snapshots compared), no load
or engine process is left running, and the partial raw stream is kept."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support import snapshot

ROOT = Path(__file__).resolve().parent.parent.parent

SCENARIO = """
[scenario]
name = "killed-shielded-loaded"
description = "shield the last CPU, load the others, measure on the shielded one"

[shield]
user = "last"
system = "others"
cpuset = true
tasks = true
kthreads = true
irqs = true
default_smp_affinity = true
thread_priorities = [{match = "ksoftirqd/", policy = "fifo", priority = 2}]

[[load]]
name = "stress"
kind = "stress"
cpu = 1
vm = 1
vm_bytes = "16M"
cpus = "system"

[[load]]
name = "competitors"
kind = "rt-competitor"
cpus = "all"
policy = "fifo"
priority = 98
interval = "1ms"

[[probe]]
name = "measured"
probe = "timer"
cpus = "user"
priority = 99
interval = "1ms"

[[phase]]
name = "loaded"
duration = "60s"
loads = ["stress", "competitors"]
"""


def _engine_pids(probe_bin: str) -> set[int]:
    """Live rtlab-probe processes (measured probe, competitors, applier)."""
    exe = os.path.realpath(probe_bin)
    out = set()
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if os.path.realpath(d / "exe") == exe:
                    out.add(int(d.name))
            except OSError:
                continue
    return out


def _stress_pids() -> list[int]:
    pids = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if (d / "comm").read_text().startswith("stress-ng"):
                    pids.append(int(d.name))
            except OSError:
                continue
    return pids


def _wait(cond, timeout_s: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def test_kill9_mid_shielded_loaded_run_then_restore(
    require_root: None, probe_bin: str, store_path: Path, tmp_path: Path
) -> None:
    if not Path("/sys/fs/cgroup/cpuset/cpuset.cpus").exists() or (os.cpu_count() or 1) < 2:
        pytest.skip("needs a cgroup v1 cpuset hierarchy and two CPUs")
    if _stress_pids():
        pytest.skip("another stress-ng is running: cannot tell ours from it")
    journal_dir = Path(os.environ["RTLAB_JOURNAL_DIR"])
    scenario = tmp_path / "killed.toml"
    scenario.write_text(SCENARIO)
    env = dict(os.environ, RTLAB_PROBE=probe_bin, PYTHONPATH=str(ROOT))
    before = snapshot.snapshot()
    engines_before = _engine_pids(probe_bin)

    run = subprocess.Popen(
        [sys.executable, "-m", "rtlab", "run", str(scenario), "--no-progress", "--no-report"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
    )
    try:
        # in the middle: shield journaled, loads running, the measured engine writing
        _wait(lambda: any(journal_dir.glob("*.journal")), 30, "the shield journal")
        _wait(lambda: bool(_stress_pids()), 30, "the stress-ng load")
        runs_dir = store_path.parent / "runs"
        _wait(lambda: any(p.stat().st_size > 0 for p in runs_dir.glob("*.jsonl"))
              if runs_dir.is_dir() else False, 30, "the engine's raw stream")
        time.sleep(1.5)  # at least one snapshot of the measured phase
        during = snapshot.snapshot()
        changed = snapshot.diff(before, during)
        assert changed, "the shield should be in effect"
        assert any("ksoftirqd" in line and "policy" in line for line in changed), \
            "thread_priorities should have made ksoftirqd SCHED_FIFO"
    finally:
        run.send_signal(signal.SIGKILL)
        run.wait(timeout=10)

    # what the kernel ends with rtlab (PDEATHSIG) and what the applier restores by
    # itself when its stdin closes; then `rtlab restore` for anything left
    time.sleep(3)
    r = subprocess.run([sys.executable, "-m", "rtlab", "restore"], env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip(), "restore must say what it did (or that nothing was left)"

    deadline = time.monotonic() + 5
    while (d := snapshot.diff(before, snapshot.snapshot())) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert d == [], "system not restored:\n" + "\n".join(d[:30])
    assert not list(journal_dir.glob("*.journal")), "a journal was left behind"
    _wait(lambda: not _stress_pids(), 10, "stress-ng to be gone")
    _wait(lambda: not (_engine_pids(probe_bin) - engines_before), 10,
          "no rtlab-probe process of this run left")
    assert not any(Path("/sys/fs/cgroup/cpuset").glob("rtlab*")), "a cpuset was left behind"

    # nothing lost: the raw engine stream of the killed run is kept and importable
    raw = sorted((store_path.parent / "runs").glob("*.jsonl"))
    assert raw and '"type":"snapshot"' in raw[0].read_text().replace(" ", "")
    imp = subprocess.run([sys.executable, "-m", "rtlab", "results", "import", str(raw[0])],
                         env=env, capture_output=True, text=True, timeout=60)
    assert imp.returncode == 0, imp.stderr
