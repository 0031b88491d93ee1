# SPDX-License-Identifier: MIT
"""A shield's cgroup that exists already: the run names whose it is instead of the
engine's "left over? run `rtlab restore`" while its owner is alive (real cgroup v1
cpusets, real appliers; the cpuset made here holds no task and no CPU of anyone)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from rtlab.engine.transport import LocalTransport
from rtlab.runner.shield import explain_exists
from rtlab.system.applier import Applier, ApplyError, SystemSession
from rtlab.system.journal_files import SHIELD_JOURNAL, restore_journal
from rtlab.system.target_lock import owner_label

CPUSET = Path("/sys/fs/cgroup/cpuset")


@pytest.fixture
def cgroup(require_root: None) -> Iterator[Path]:
    if not (CPUSET / "cpuset.cpus").exists():
        pytest.skip("needs a cgroup v1 cpuset hierarchy")
    path = CPUSET / f"rtlab-locktest-{os.getpid()}"
    yield path
    if path.exists():
        path.rmdir()


def _second_mkdir(t: LocalTransport, where: Path, path: Path) -> ApplyError:
    """What a second session gets when it creates `path` too."""
    with SystemSession(t, where, name="second") as s, pytest.raises(ApplyError) as exc:
        s.apply([{"op": "mkdir", "path": str(path)}], required=[0])
    return exc.value


def test_live_owner_named_never_left_over(cgroup: Path, probe_bin: str, tmp_path: Path) -> None:
    t = LocalTransport(probe_bin)
    owned = tmp_path / "owner"
    with SystemSession(t, owned, name="run-1", owner=owner_label(command="rtlab run x")) \
            as first:
        first.apply([{"op": "mkdir", "path": str(cgroup)}], required=[0])
        exc = _second_mkdir(t, tmp_path / "other", cgroup)
        assert "left over" in exc.message  # the engine's words, about to be replaced
        better = explain_exists(exc, t, owned)
        assert better is not None
        assert f"rtlab run pid {os.getpid()}" in better.message
        assert "`rtlab run x`" in better.message and "live session" in better.message
        text = better.one_line()
        assert "rtlab restore" not in text and "left over" not in text
        # a journal directory where nobody created it: no "left over" guess either
        unknown = explain_exists(exc, t, tmp_path / "other")
        assert unknown is not None and "rtlab restore" not in unknown.one_line()
    assert not cgroup.exists()  # the owner's release removed it


def test_persistent_shield_and_crashed_run_named(cgroup: Path, probe_bin: str,
                                                 tmp_path: Path) -> None:
    t = LocalTransport(probe_bin)
    d = tmp_path / "j"
    # a persistent shield's journal (detached): `rtlab shield --reset`
    applier = Applier(t, d / SHIELD_JOURNAL, detach=True)
    assert applier.apply([{"op": "mkdir", "path": str(cgroup)}])[0]["ok"]
    applier.detach_now()
    try:
        exc = _second_mkdir(t, tmp_path / "other", cgroup)
        better = explain_exists(exc, t, d)
        assert better is not None and "persistent shield" in better.message
        assert "rtlab shield --reset" in better.one_line()
        # the same journal under a run's name, nobody holding it: a crash
        (d / SHIELD_JOURNAL).rename(d / "run-999.journal")
        text = (d / "run-999.journal").read_text().replace('"detached":true',
                                                           '"detached":false')
        (d / "run-999.journal").write_text(text)
        better = explain_exists(exc, t, d)
        assert better is not None and "crashed" in better.message
        assert "rtlab restore" in better.one_line()
    finally:
        for j in d.glob("*.journal"):
            assert restore_journal(t, j).ok
    assert not cgroup.exists()
