# SPDX-License-Identifier: MIT
"""The host against the real rtlab-probe (needs root and a built engine)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from rtlab.results.store import Store
from tests.support.env import subprocess_env


def test_real_run_two_seconds(probe_bin: str, require_root: None, tmp_path: Path) -> None:
    store = tmp_path / "rtlab.db"
    proc = subprocess.run(
        [sys.executable, "-m", "rtlab", "run", "--duration", "2s", "--no-progress",
         "--store", str(store)],
        capture_output=True, text=True, timeout=60,
        env=subprocess_env({"RTLAB_PROBE": probe_bin}),
    )
    assert proc.returncode == 0, proc.stderr
    assert "worst wake-up latency" in proc.stdout
    (row,) = Store.open(str(store)).list()
    assert row.status == "completed" and row.rt_valid is True
    # ~1000 wake-ups per second per CPU; the host VM may steal some periods
    assert row.samples > 1000
    result = Store.open(str(store)).get(row.id)
    assert result.provenance["engine"]["engine_version"]
    # quick: two phases of 1 s each (idle, then under load), each with its own channels
    assert [p.name for p in result.phases] == ["idle", "load"]
    assert all(ch.samples + ch.missed >= 750 for _, ch in result.channels())
