# SPDX-License-Identifier: MIT
"""Runtime knobs for real on this machine (root): `rtlab run` with every knob of
[shield] applies each one (read back in effect during the run, listed requested vs in
effect in the stored result), names exactly what this machine lacks as skipped, and
leaves every knob file byte for byte as it was: after the run, after SIGTERM, and after
kill -9 of rtlab (its applier restores); `rtlab shield --scenario` applies the same
persistently and `--reset` undoes it; a bad value is one line, exit 2, nothing changed.

The shield moves nothing (cpuset = false, tasks = false): the machine is shared, and the
knobs are what these tests are about."""

from __future__ import annotations

import glob
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from rtlab.results.store import Store
from rtlab.system.shield_knobs import STATE_PATTERNS, thp_mode

ROOT = Path(__file__).resolve().parents[2]
C = "/sys/devices/system/cpu"
pytestmark = pytest.mark.usefixtures("require_root")


def _files() -> dict[str, bytes]:
    out = {}
    for pattern in STATE_PATTERNS:
        for path in glob.glob(pattern):
            try:
                out[path] = Path(path).read_bytes()
            except OSError:
                continue
    return out


def _text(path: str) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def _knobs_and_expectations() -> tuple[dict[str, object], dict[str, object], set[str]]:
    """Knob values that differ from this machine's now, what each then reads, and the
    knobs this machine lacks (derived from its files, not assumed)."""
    tm = _text("/proc/sys/kernel/timer_migration")
    wd = _text("/proc/sys/kernel/watchdog")
    si = _text("/proc/sys/vm/stat_interval")
    nb = _text("/proc/sys/kernel/numa_balancing")
    thp = thp_mode(_text("/sys/kernel/mm/transparent_hugepage/enabled"))
    knobs: dict[str, object] = {
        "timer_migration": tm == "0", "watchdogs": wd == "0",
        "vm_stat_interval": (int(si) % 100) + 6 if si else 7, "idle_max_latency_us": 0,
        "governor": "performance", "min_freq": "max", "smt": False,
        "thp": "never" if thp != "never" else "madvise", "numa_balancing": nb == "0"}
    lacks = set()
    for name, present in (("timer_migration", tm is not None), ("watchdogs", wd is not None),
                          ("vm_stat_interval", si is not None), ("thp", thp is not None),
                          ("numa_balancing", nb is not None)):
        if not present:
            lacks.add(name)
    if not glob.glob(f"{C}/cpu1/cpuidle/state*/latency"):
        lacks.add("idle_max_latency_us")
    if _text(f"{C}/cpu1/cpufreq/scaling_governor") is None:
        lacks |= {"governor", "min_freq"}
    elif "performance" not in (_text(f"{C}/cpu1/cpufreq/scaling_available_governors") or ""):
        knobs.pop("governor")
    if (_text(f"{C}/cpu1/topology/thread_siblings_list") or "1") in ("1", ""):
        lacks.add("smt")
    else:
        knobs.pop("smt")  # the sibling would be a system CPU of this small machine
    return knobs, {k: v for k, v in knobs.items() if k not in lacks}, lacks


def _scenario(knobs: dict[str, object], seconds: int) -> str:
    lines = "\n".join(f"{k} = {json.dumps(v)}" for k, v in knobs.items())
    return f"""\
[scenario]
name = "knobs"
[shield]
user = "1"
system = "0"
cpuset = false
tasks = false
{lines}
[[probe]]
cpus = "user"
interval = "1ms"
[[phase]]
name = "p"
duration = "{seconds}s"
"""


def _env(probe_bin: str, tmp_path: Path) -> dict[str, str]:
    return dict(os.environ, RTLAB_PROBE=probe_bin, PYTHONPATH=str(ROOT),
                RTLAB_JOURNAL_DIR=str(tmp_path / "journal"))


def _wait(cond: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def _in_effect(applies: dict[str, object]) -> bool:
    """Every sysctl-like knob reads as asked (the cpuidle one too)."""
    want = {"timer_migration": ("/proc/sys/kernel/timer_migration", "1", "0"),
            "watchdogs": ("/proc/sys/kernel/watchdog", "1", "0"),
            "numa_balancing": ("/proc/sys/kernel/numa_balancing", "1", "0")}
    for name, (path, on, off) in want.items():
        if name in applies and _text(path) != (on if applies[name] else off):
            return False
    if "vm_stat_interval" in applies and \
            _text("/proc/sys/vm/stat_interval") != str(applies["vm_stat_interval"]):
        return False
    if "thp" in applies and \
            thp_mode(_text("/sys/kernel/mm/transparent_hugepage/enabled")) != applies["thp"]:
        return False
    if "idle_max_latency_us" in applies:
        for d in glob.glob(f"{C}/cpu1/cpuidle/state*"):
            if int(_text(f"{d}/latency") or 0) > 0 and _text(f"{d}/disable") != "1":
                return False
    return True


def _same(before: dict[str, bytes], timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        now = _files()
        diff = sorted(p for p in set(before) | set(now) if before.get(p) != now.get(p))
        if not diff or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert diff == [], "not restored: " + ", ".join(
        f"{p}: {before.get(p)!r} -> {now.get(p)!r}" for p in diff[:8])


def test_run_applies_every_knob_and_restores_them(probe_bin: str, store_path: Path,
                                                  tmp_path: Path) -> None:
    knobs, applies, lacks = _knobs_and_expectations()
    sc = tmp_path / "k.toml"
    sc.write_text(_scenario(knobs, 4))
    before = _files()
    run = subprocess.Popen([sys.executable, "-m", "rtlab", "run", str(sc), "--no-progress",
                            "--no-report"], env=_env(probe_bin, tmp_path),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait(lambda: _in_effect(applies) or run.poll() is not None, 60, "the knobs")
        assert _in_effect(applies), "the knobs were not in effect during the run"
        _out, err = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 0, err
    _same(before, timeout_s=5)
    (row,) = Store.open(str(store_path)).list()
    shield = Store.open(str(store_path)).get(row.id).provenance["host"]["shield"]
    assert {k: shield["requested"][k] for k in knobs} == knobs
    effect = shield["in_effect"]["in_effect"]["knobs"]
    assert set(effect) == set(knobs)
    assert {k for k, e in effect.items() if e["skipped"]} == lacks & set(knobs)
    for name, e in effect.items():
        assert e["requested"] == knobs[name]
        if name not in lacks:
            assert e["ok"] is True, (name, e)
    if "vm_stat_interval" in applies:
        assert effect["vm_stat_interval"]["in_effect"] == knobs["vm_stat_interval"]
    skipped = [n for n in Store.open(str(store_path)).get(row.id).notes
               if n.startswith("runtime knobs skipped")]
    if lacks & set(knobs):
        (note,) = skipped
        assert all(f"{k}:" in note for k in lacks & set(knobs))
    else:
        assert skipped == []


@pytest.mark.parametrize("how", ["sigterm", "kill9"])
def test_knobs_restored_after_sigterm_and_kill9(how: str, probe_bin: str, store_path: Path,
                                                tmp_path: Path) -> None:
    knobs, applies, _ = _knobs_and_expectations()
    sc = tmp_path / "k.toml"
    sc.write_text(_scenario(knobs, 120))
    before = _files()
    run = subprocess.Popen([sys.executable, "-m", "rtlab", "run", str(sc), "--no-progress",
                            "--no-report"], env=_env(probe_bin, tmp_path),
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                           start_new_session=True)
    try:
        _wait(lambda: _in_effect(applies) or run.poll() is not None, 60, "the knobs")
        assert run.poll() is None and _in_effect(applies)
        time.sleep(1.5)  # measuring
        run.send_signal(signal.SIGTERM if how == "sigterm" else signal.SIGKILL)
        code = run.wait(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
    if how == "sigterm":
        assert code == 130, run.stderr.read() if run.stderr else ""
        _same(before, timeout_s=5)
    else:
        # the applier sees its controller gone (stdin EOF) and restores by itself
        _same(before, timeout_s=30)
        _wait(lambda: not list((tmp_path / "journal").glob("*.journal")), 30,
              "the applier to remove its journal")


def test_bad_value_is_one_line_exit_2_and_changes_nothing(probe_bin: str, store_path: Path,
                                                          tmp_path: Path) -> None:
    knobs, _, _ = _knobs_and_expectations()
    before = _files()
    for bad in ({**knobs, "thp": "sometimes"}, {**knobs, "vm_stat_interval": 0}):
        sc = tmp_path / "bad.toml"
        sc.write_text(_scenario(bad, 2))
        for argv in (["run", str(sc), "--no-progress", "--no-report"],
                     ["shield", "--scenario", str(sc)]):
            r = subprocess.run([sys.executable, "-m", "rtlab", *argv], capture_output=True,
                               text=True, env=_env(probe_bin, tmp_path), timeout=120)
            assert r.returncode == 2, r.stderr
            (line,) = r.stderr.strip().splitlines()
            assert f"{sc}:" in line and "allowed:" in line
    assert _files() == before
    assert not store_path.exists() and not (tmp_path / "journal").exists()


def test_shield_scenario_is_persistent_until_reset(probe_bin: str, tmp_path: Path) -> None:
    knobs, applies, lacks = _knobs_and_expectations()
    sc = tmp_path / "profile.toml"
    sc.write_text(_scenario(knobs, 2))
    before = _files()
    env = _env(probe_bin, tmp_path)

    def rtlab(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "rtlab", *argv], capture_output=True,
                              text=True, env=env, timeout=120)

    r = rtlab("shield", "--scenario", str(sc), "--json")
    try:
        assert r.returncode == 0, r.stderr
        doc = json.loads(r.stdout)
        effect = doc["verify"]["in_effect"]["knobs"]
        assert {k for k, e in effect.items() if e["skipped"]} == lacks & set(knobs)
        assert all(e["ok"] for k, e in effect.items() if k not in lacks)
        assert doc["verify"]["problems"] == []  # a shield that moves nothing
        assert _in_effect(applies)  # after rtlab exited: persistent
        st = rtlab("shield", "--status", "--json")
        assert st.returncode == 0, st.stderr
        written = {k["knob"] for k in json.loads(st.stdout)["requested"]["knobs"]}
        assert written == set(applies)
    finally:
        rs = rtlab("shield", "--reset")
    assert rs.returncode == 0, rs.stderr
    _same(before, timeout_s=5)


def test_shield_cpus_with_knob_options(probe_bin: str, tmp_path: Path) -> None:
    """`rtlab shield --cpus 1` with knob options: a cpuset shield plus the knobs, in
    effect after rtlab exits, undone byte for byte by --reset (other people's processes
    on this shared machine are left where they are)."""
    from rtlab.engine.transport import LocalTransport
    from rtlab.system.facts import read_facts
    from tests.system.helpers import foreign_pids

    facts = read_facts(LocalTransport(probe_bin))
    if not facts.cgroup.v1_cpuset or 1 not in facts.cpus_online:
        pytest.skip("needs a cgroup v1 cpuset hierarchy and CPU 1 online")
    knobs, applies, _ = _knobs_and_expectations()
    before = _files()
    env = _env(probe_bin, tmp_path)
    exclude = ",".join(map(str, sorted(foreign_pids(facts))))
    interval = str(knobs["vm_stat_interval"])
    r = subprocess.run([sys.executable, "-m", "rtlab", "shield", "--cpus", "1", "--exclude",
                        exclude, "--vm-stat-interval", interval, "--thp", str(knobs["thp"]),
                        "--timer-migration", "on" if knobs["timer_migration"] else "off"],
                       capture_output=True, text=True, env=env, timeout=120)
    try:
        assert r.returncode == 0, r.stderr
        assert f"vm_stat_interval = {interval}: in effect {interval}" in r.stdout, r.stdout
        assert _in_effect({k: applies[k] for k in ("vm_stat_interval", "thp",
                                                   "timer_migration") if k in applies})
    finally:
        rs = subprocess.run([sys.executable, "-m", "rtlab", "shield", "--reset"],
                            capture_output=True, text=True, env=env, timeout=120)
    assert rs.returncode == 0, rs.stderr
    _same(before, timeout_s=5)
