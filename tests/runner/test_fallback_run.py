# SPDX-License-Identifier: MIT
"""A stress load on a target without stress-ng: with `fallback = "builtin"` the run goes
on with the engine's own load and says so in one note, in the stored result and in the
load's description; without it the missing tool stays a one-line skip (exit 4) that
names the fallback, and nothing is stored. Real engine, real SCHED_FIFO, this machine
with stress-ng hidden from PATH."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rtlab.results.store import Store
from tests.support.env import subprocess_env

SCENARIO = """\
[scenario]
name = "fb"

[[load]]
name = "hog"
kind = "stress"
cpus = "first"
cpu = 1
io = 1
{fallback}

[[probe]]
cpus = "last"
interval = "1ms"

[[phase]]
name = "loaded"
duration = "1s"
loads = ["hog"]
"""


def _path_without_stress_ng(tmp: Path) -> str:
    """A PATH of every program of this one but stress-ng (symbolic links)."""
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    for d in os.environ.get("PATH", "").split(os.pathsep):
        if not d or not os.path.isdir(d):
            continue
        for name in os.listdir(d):
            target = os.path.join(d, name)
            if name != "stress-ng" and not (bin_dir / name).exists() and os.access(target,
                                                                                   os.X_OK):
                (bin_dir / name).symlink_to(target)
    assert shutil.which("stress-ng", path=str(bin_dir)) is None
    return str(bin_dir)


def _run(tmp: Path, fallback: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    sc = tmp / "fb.toml"
    sc.write_text(SCENARIO.format(fallback=fallback))
    store = tmp / "store.db"
    env = subprocess_env({"PATH": _path_without_stress_ng(tmp), "COLUMNS": "200"})
    proc = subprocess.run([sys.executable, "-m", "rtlab", "run", str(sc), "--no-report",
                           "--no-progress", "--store", str(store)], capture_output=True,
                          text=True, env=env, timeout=300, check=False)
    return proc, store


def test_fallback_runs_the_engine_load_and_says_so(require_root: None, probe_bin: str,
                                                   tmp_path: Path) -> None:
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs two CPUs")
    proc, store = _run(tmp_path, 'fallback = "builtin"')
    assert proc.returncode == 0, proc.stderr
    notes = [ln for ln in proc.stdout.splitlines() if ln.startswith("note: load hog:")]
    assert notes == ["note: load hog: stress-ng is not installed: ran the engine's built-in "
                     "CPU+memory load instead (cpu 1); left out: io 1; compare only with "
                     "runs of the same load"], proc.stdout
    s = Store.open(str(store))
    try:
        (summary,) = s.list(None)
        r = s.get(summary.id)
    finally:
        s.close()
    assert r.status == "completed"
    assert notes[0].removeprefix("note: ") in r.notes
    (load,) = r.provenance["host"]["phases"][0]["loads"]
    assert load["kind"] == "builtin" and load["status"] == "stopped"
    assert load["fallback"]["for_kind"] == "stress"
    assert load["fallback"]["left_out"] == ["io 1"]
    assert load["builtin"]["loops"]["cpu"] > 0  # the engine's load really ran


def test_without_fallback_the_missing_tool_is_a_skip(require_root: None, probe_bin: str,
                                                     tmp_path: Path) -> None:
    proc, store = _run(tmp_path, "")
    assert proc.returncode == 4, proc.stderr
    err = proc.stderr.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert err[0].startswith("rtlab: ") and "stress-ng is not installed" in err[0]
    if store.exists():  # (an empty store is still created before the check: issue 24)
        s = Store.open(str(store))
        try:
            assert s.list(None) == []
        finally:
            s.close()


def test_a_shield_not_wholly_in_effect_is_one_note() -> None:
    from rtlab.runner.run import shield_note

    assert shield_note(None) is None
    assert shield_note({"problems": []}) is None
    note = shield_note({"problems": ["CPU 1: IRQ 0 may be delivered there", "b", "c", "d",
                                     "e"]})
    assert note == ("shield not wholly in effect: CPU 1: IRQ 0 may be delivered there; b; c "
                    "and 2 more")


FIB_TRIE = """\
Main:
  +-- 0.0.0.0/0 3 0 5
     |-- 0.0.0.0
        /0 universe UNICAST
     +-- 10.77.0.0/24 2 0 2
        |-- 10.77.0.0
           /24 link UNICAST
        |-- 10.77.0.2
           /32 host LOCAL
     +-- 127.0.0.0/8 2 0 2
           |-- 127.0.0.1
              /32 host LOCAL
        |-- 127.255.255.255
           /32 link BROADCAST
Local:
  +-- 0.0.0.0/0 3 0 5
        |-- 10.77.0.2
           /32 host LOCAL
"""


def test_a_targets_own_addresses_tell_two_namespaces_of_one_kernel_apart() -> None:
    from rtlab.runner.netpeer import local_addresses

    assert sorted(set(local_addresses(FIB_TRIE))) == ["10.77.0.2", "127.0.0.1"]
    assert local_addresses("") == []
