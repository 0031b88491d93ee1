# SPDX-License-Identifier: MIT
"""What the shield check and `board clean` know of a target comes from the target:
the cpusets its engine lists (`sys facts`, cgroup.cpusets), the backend chosen from
its cgroup mounts, and its lock, which `board clean` removes under the engine's own
lock (a taker that waited on a removed lock file locks the new one)."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from rtlab.errors import SkippedError
from rtlab.system.facts import parse_facts
from rtlab.system.shield_plan import ShieldRequest, choose_backend, plan_shield
from rtlab.system.target_lock import lock_info
from rtlab.system.verify import verify_shield

SHIELD = "/sys/fs/cgroup/rtlab-shield"


def _facts(cgroup: dict[str, Any]) -> dict[str, Any]:
    return {"type": "facts", "schema": 1, "cpus_online": [0, 1], "cpus_possible": [0, 1],
            "cpus_isolated": [], "tasks": [], "irqs": [], "default_smp_affinity": "3",
            "workqueue_cpumask": "3", "sysctl": {},
            "cgroup": {"v1_cpuset": None, "v2": "/sys/fs/cgroup", "v2_cpuset": True,
                       "v2_partition": True, "v1_mems": None, "v2_subtree_control": "",
                       **cgroup}}


def _cg(v: dict[str, Any]) -> dict[str, Any]:
    return v["in_effect"]["cgroup"]


def test_the_shield_cpuset_is_judged_from_the_targets_facts() -> None:
    listed = {"hierarchy": "v2", "path": SHIELD, "cpus": "1", "cpus_effective": "1",
              "partition": "isolated"}
    v = verify_shield(parse_facts(_facts({"cpusets": [listed]})), {1}, backend="v2",
                      shield_cgroup=SHIELD)
    assert _cg(v) == {"backend": "v2", "path": SHIELD, "cpus_effective": "1",
                      "partition": "isolated", "known": True}
    assert v["problems"] == [] and v["in_effect"]["ok"]
    # the target has no such cpuset (whatever this machine has at that path)
    v = verify_shield(parse_facts(_facts({"cpusets": []})), {1}, backend="v2",
                      shield_cgroup=SHIELD)
    assert v["problems"] == [f"the shield cgroup {SHIELD} does not exist"]
    v = verify_shield(parse_facts(_facts({"cpusets": [{**listed, "cpus_effective": "",
                                                       "partition": "isolated invalid"}]})),
                      {1}, backend="v2", shield_cgroup=SHIELD)
    assert v["problems"] == ["cgroup v2 partition is not in effect: isolated invalid",
                             f"the shield cgroup {SHIELD} has no effective CPU"]
    # facts without the list (an engine that does not report it): nothing concluded
    v = verify_shield(parse_facts(_facts({})), {1}, backend="v2", shield_cgroup=SHIELD)
    assert _cg(v)["known"] is False and v["problems"] == []


def test_cpuset_bound_to_a_v1_hierarchy_beside_v2() -> None:
    outside = parse_facts(_facts({"v1_cpuset": "/tmp/cpuset", "v2_cpuset": False,
                                  "v2_partition": False, "v1_mems": "0"}))
    with pytest.raises(SkippedError) as exc:
        plan_shield(outside, ShieldRequest(cpus=frozenset({1})))
    assert exc.value.message == (
        "cpuset is bound to the cgroup v1 hierarchy mounted at /tmp/cpuset (cgroup v2 at "
        "/sys/fs/cgroup cannot have it meanwhile), outside /sys/fs/cgroup/ where rtlab "
        "makes its cpusets")
    assert "umount /tmp/cpuset" in str(exc.value.hint)
    below = parse_facts(_facts({"v1_cpuset": "/sys/fs/cgroup/v1", "v2_cpuset": False,
                                "v2_partition": False, "v1_mems": "0"}))
    assert choose_backend(below, None) == "v1"
    plan = plan_shield(below, ShieldRequest(cpus=frozenset({1})))
    assert plan.shield_cgroup == "/sys/fs/cgroup/v1/rtlab-shield"
    assert all(op["path"].startswith("/sys/fs/cgroup/v1/") for op in plan.ops
               if op["op"] in ("mkdir", "write") and "cgroup" in op["path"])


def _v1_root() -> Path | None:
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            fields = right.split()
            if fields[:1] == ["cgroup"] and "cpuset" in fields[2].split(","):
                return Path(left.split()[4])
    return None


def test_engine_lists_a_cpuset_made_here(probe_bin: str) -> None:
    """A real cpuset below this machine's v1 cpuset root (empty: no task, CPU 0, not
    exclusive) is in `sys facts` with what its files say, and the check finds it."""
    root = _v1_root()
    if root is None or os.geteuid() != 0:
        pytest.skip("needs root and a cgroup v1 cpuset hierarchy (cgroup v2 cpusets are "
                    "listed on the emulated boards: tests/lab/test_shield_on_board.py)")
    made = root / f"rtlab-factstest-{os.getpid()}"
    made.mkdir()
    try:
        (made / "cpuset.mems").write_text((root / "cpuset.mems").read_text())
        (made / "cpuset.cpus").write_text("0")
        out = subprocess.run([probe_bin, "sys", "facts"], capture_output=True, text=True,
                             check=True)
        facts = parse_facts(json.loads(out.stdout))
        found = facts.cgroup.cpuset(str(made))
        assert found is not None and found.hierarchy == "v1"
        assert (found.cpus, found.cpus_effective, found.partition) == ("0", "0", None)
        v = verify_shield(facts, {0}, backend="v1", shield_cgroup=str(made))
        assert _cg(v)["cpus_effective"] == "0" and not any("cgroup" in p
                                                            for p in v["problems"])
        gone = verify_shield(facts, {0}, backend="v1", shield_cgroup=f"{made}-not-there")
        assert f"the shield cgroup {made}-not-there does not exist" in gone["problems"]
    finally:
        made.rmdir()


def _has_open(pid: int, path: Path) -> bool:
    with contextlib.suppress(OSError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                if os.readlink(f"/proc/{pid}/fd/{fd}") == str(path):
                    return True
    return False


def test_a_lock_removed_while_waited_for_is_not_held(probe_bin: str, tmp_path: Path) -> None:
    """`board clean` unlinks a free lock while holding it. An applier that opened the
    file before and waited for it locks the file at the path afterwards, not the
    removed one: the lock is held by it, and seen so by lockinfo."""
    if os.geteuid() != 0:
        pytest.skip("sys apply needs root")
    d = tmp_path / "run"
    lock = d / "target.lock"
    for _ in range(5):  # the applier retries for about 0.5 s: again if that was missed
        d.mkdir(exist_ok=True)
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(fd, fcntl.LOCK_EX)
        p = subprocess.Popen([probe_bin, "sys", "apply", "--journal", str(d / "t.journal"),
                              "--lock", str(lock), "--owner", "relink test"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
        deadline = time.monotonic() + 5
        while not _has_open(p.pid, lock) and p.poll() is None and time.monotonic() < deadline:
            time.sleep(0.002)
        waited = _has_open(p.pid, lock)
        os.unlink(lock)
        d.rmdir()  # as clean does; the applier makes the directory again
        os.close(fd)
        assert p.stdout is not None
        ready = p.stdout.readline()
        if waited and b'"ready"' in ready:
            try:
                held = lock_info(None, lock)
                assert held.held and held.owner == "relink test", held
            finally:
                p.communicate(timeout=30)
            assert p.returncode == 0
            return
        p.communicate(timeout=30)  # busy (exit 5) under load, or opened after the unlink
    pytest.fail("the applier never waited on the lock that was removed (5 attempts)")
