# SPDX-License-Identifier: MIT
"""Where tracefs is (rtlab.trace.tracefs.TraceFS): what `rtlab run --trace` checks here
before the engine records. Recording itself is the engine's
(tests/rtlab_probe/test_trace_record.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import rtlab.trace.tracefs as tracefs
from rtlab.errors import SkippedError
from rtlab.trace.tracefs import TraceFS


def test_find_takes_the_tracefs_mount(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tracefs, "_mounts", lambda: [("/", "ext4"), ("/mnt/my tr", "tracefs"),
                                                     ("/sys/kernel/debug", "debugfs")])
    found = TraceFS.find()
    assert found == TraceFS(Path("/mnt/my tr"), mounted_by_us=False)


def test_mounts_reads_this_process_mounts() -> None:
    mounts = tracefs._mounts()
    assert any(m == "/" for m, _ in mounts)  # the root file system is always mounted
    assert all(fs and " " not in fs for _, fs in mounts)


def test_not_mounted_and_not_root_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tracefs, "_mounts", list)
    monkeypatch.setattr(Path, "exists", lambda self: False)
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(SkippedError, match="needs root"):
        TraceFS.find_or_mount()


def test_no_mount_point_is_skipped(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(tracefs, "_mounts", list)
    monkeypatch.setattr(TraceFS, "find", classmethod(lambda cls: None))
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    with pytest.raises(SkippedError, match="no tracefs mount point"):
        TraceFS.find_or_mount(str(tmp_path / "absent"))


def test_unmount_only_what_this_process_mounted(tmp_path: Path) -> None:
    assert TraceFS(tmp_path).unmount_if_ours() is False  # found, not mounted by us
    (tmp_path / "instances" / "someone").mkdir(parents=True)
    ours = TraceFS(tmp_path, mounted_by_us=True)
    assert ours.unmount_if_ours() is False  # another tool has an instance: left mounted
    assert ours.mounted_by_us


def test_default_events_name_sched_switch_once() -> None:
    assert "sched/sched_switch" in tracefs.DEFAULT_EVENTS
    assert len(set(tracefs.DEFAULT_EVENTS)) == len(tracefs.DEFAULT_EVENTS)
    assert all(e.count("/") == 1 for e in tracefs.DEFAULT_EVENTS)
