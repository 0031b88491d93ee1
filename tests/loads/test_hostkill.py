# SPDX-License-Identifier: MIT
"""kill -9 of the process holding a LoadSet: PDEATHSIG and the pgid-based cleanup."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from rtlab.loads import proc, reap_recorded

from .conftest import need

ROOT = Path(__file__).resolve().parents[2]

HOLDER = textwrap.dedent("""
    import json, sys, time
    from pathlib import Path
    from rtlab.loads import CommandLoad, LoadSet, from_spec

    class Journal:
        def record_spawn(self, pgid, starttime):
            print(json.dumps({"pgid": pgid, "starttime": starttime}), flush=True)
        def record_netns(self, name):
            pass

    spec = json.loads(sys.argv[1])
    load = CommandLoad(spec["argv"], workers=True) if "argv" in spec else from_spec(spec)
    ls = LoadSet([load], Journal(), workdir=Path(sys.argv[2]), settle_s=0.3)
    ls.start()
    print("ready", flush=True)
    time.sleep(60)
""")


def _hold_and_kill(spec: dict, workdir: Path) -> tuple[int, int, list[proc.ProcStat]]:
    """Run a LoadSet in a child Python, kill -9 it; (pgid, starttime, members before)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    argv = [sys.executable, "-c", HOLDER, json.dumps(spec), str(workdir)]
    child = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        rec = json.loads(child.stdout.readline())
        assert child.stdout.readline().strip() == "ready"
        members = proc.group_members(rec["pgid"])
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=5)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    return rec["pgid"], rec["starttime"], members


def _wait_gone(pid: int, timeout: float = 3.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        st = proc.read_stat(pid)
        if st is None or st.state == "Z":
            return True
        time.sleep(0.02)
    return False


def test_kill9_of_holder_kills_stress_leader(capsys: pytest.CaptureFixture[str],
                                             tmp_path: Path) -> None:
    need("stress-ng")
    pgid, start, members = _hold_and_kill({"kind": "stress", "cpu": 2, "cpus": "0"}, tmp_path)
    try:
        assert len(members) >= 3  # leader and two workers
        assert _wait_gone(pgid), "PDEATHSIG did not kill the stress-ng leader"
        remains = [(m.pid, m.comm) for m in proc.group_members(pgid)]
        with capsys.disabled():
            print(f"\nstress-ng workers left after the leader died: {remains}")
    finally:
        result = reap_recorded(pgid, start)
    assert result["status"] in ("reaped", "gone")
    assert proc.group_members(pgid) == []


def test_kill9_orphaned_workers_are_reaped_by_pgid(tmp_path: Path) -> None:
    # workers without a death signal of their own (unlike stress-ng's) survive the leader
    argv = ["sh", "-c", "sleep 60 & sleep 60 & wait"]
    pgid, start, _ = _hold_and_kill({"argv": argv}, tmp_path)
    try:
        assert _wait_gone(pgid), "PDEATHSIG did not kill the leader"
        orphans = proc.group_members(pgid)
        assert sorted(m.comm for m in orphans) == ["sleep", "sleep"]
        assert all(m.ppid != pgid for m in orphans)  # reparented
    finally:
        result = reap_recorded(pgid, start)
    assert result["status"] == "reaped"
    assert sorted(result["members"]) == sorted(m.pid for m in orphans)
    assert proc.group_members(pgid) == []
