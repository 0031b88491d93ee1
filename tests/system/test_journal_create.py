# SPDX-License-Identifier: MIT
"""`sys apply` makes its journal appear already locked and with its header (made under
a temporary name, then linked): a stale check racing a starting applier never takes
its journal for a crashed run's. An existing journal is still refused."""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path

import pytest

from rtlab.engine.transport import LocalTransport
from rtlab.system.applier import Applier, SystemSession
from rtlab.system.journal_files import journals, remote_journals


def test_a_starting_journal_is_never_seen_stale(require_root: None, probe_bin: str,
                                                tmp_path: Path) -> None:
    t = LocalTransport(probe_bin)
    seen: list[tuple[bool, int]] = []
    stop = threading.Event()

    def watch() -> None:  # read here, and as a board's engine reads (`sys journals`)
        while not stop.is_set():
            for j in [*journals(tmp_path), *remote_journals(t, tmp_path)]:
                seen.append((j.held, j.pid or 0))

    w = threading.Thread(target=watch, daemon=True)
    w.start()
    try:
        for k in range(20):
            with SystemSession(t, tmp_path, name=f"s{k}"):
                pass
    finally:
        stop.set()
        w.join()
    assert all(held and pid for held, pid in seen), [s for s in seen if not all(s)][:5]
    print(f"{len(seen)} journal reads while sessions came and went")
    assert not list(tmp_path.iterdir()), "no journal and no temporary file left"


def test_an_existing_journal_is_refused(require_root: None, probe_bin: str,
                                        tmp_path: Path) -> None:
    (tmp_path / "x.journal").write_text("")
    r = subprocess.run([probe_bin, "sys", "apply", "--journal", str(tmp_path / "x.journal")],
                       input="", capture_output=True, text=True, timeout=30)
    assert r.returncode == 1 and "exists: a live session or stale changes" in r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.journal"]
    with pytest.raises(Exception, match="exists"):
        Applier(LocalTransport(probe_bin), tmp_path / "x.journal")


def test_an_unreadable_journal_on_a_board_is_listed_alone(probe_bin: str,
                                                          tmp_path: Path) -> None:
    """A board's `sys journals` answers a garbage journal with an `error` record (exit 1):
    it is listed as a stale journal of its own (`rtlab restore` then says why it cannot
    be restored), and the journal before it keeps only its own records."""
    good = tmp_path / "a.journal"
    good.write_text('{"type":"journal","schema":1,"pid":4242,"starttime":1,"detached":false,'
                    '"engine_version":"x","time_ns":1}\n')
    (tmp_path / "b.journal").write_bytes(b"\xff\xfe garbage, not a journal\n")
    t = LocalTransport(probe_bin)
    found = {j.path.name: j for j in remote_journals(t, tmp_path)}
    assert set(found) == {"a.journal", "b.journal"}
    assert found["a.journal"].pid == 4242 and found["a.journal"].entries == []
    assert found["b.journal"].stale and found["b.journal"].entries == []
