# SPDX-License-Identifier: MIT
"""The monitor gives what a store pass took back: cycles collected, free pages trimmed."""

from __future__ import annotations

import gc
import platform
import weakref
from pathlib import Path

import pytest

from rtlab.monitor import service
from rtlab.monitor.memory import release_free_memory


class _Node:
    def __init__(self) -> None:
        self.me = self  # a reference cycle: only the collector frees it


def test_release_collects_cycles_and_trims_on_glibc() -> None:
    gc.disable()  # no automatic collection may free it first
    try:
        ref = weakref.ref(_Node())
        assert ref() is not None
        trimmed = release_free_memory()
        assert ref() is None
    finally:
        gc.enable()
    if platform.libc_ver()[0] == "glibc":
        assert trimmed
    else:
        pytest.skip(f"not glibc ({platform.libc_ver()}): nothing to trim with")


def test_a_store_pass_releases_memory_after_it(raw: Path, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.monitor.test_store_segments import state_with

    calls: list[int] = []
    monkeypatch.setattr(service, "release_free_memory", lambda: calls.append(1) or True)
    state, _ = state_with(tmp_path, {"0000600d": raw.read_text()})
    mon = service.Monitor(service.MonitorOptions(targets=[], engine_args=[], state_dir=state,
                                                 store=str(tmp_path / "s.db")))
    mon.prepare()
    try:
        mon._store_pending(every=True)
        assert calls == [1] and mon.cp is not None and mon.cp.pending == []
        mon._store_pending(every=True)  # nothing pending: nothing parsed, nothing to give
        assert calls == [1]
    finally:
        mon.close()
