# SPDX-License-Identifier: MIT
"""The journaled `hwtstamp` operation of `rtlab-probe sys apply` against real
interfaces of a private network namespace (root). veth and loopback have no
hardware timestamping: the operation must be refused cleanly (nothing journaled,
nothing changed); its success path needs a timestamping NIC (not on this machine;
the configuration arithmetic is covered by engine/tests/test_hwts.c)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.usefixtures("require_root")

if not shutil.which("ip"):
    pytest.skip("needs iproute2 (ip netns)", allow_module_level=True)


def _apply(probe: str, ns: str, journal: Path, ops: list[str]) -> list[dict]:
    p = subprocess.run(["ip", "netns", "exec", ns, probe, "sys", "apply", "--journal",
                        str(journal)], input="\n".join(ops) + "\n", capture_output=True,
                       text=True, timeout=30, check=False)
    assert p.returncode == 0, p.stderr
    return [json.loads(x) for x in p.stdout.splitlines()]


def test_hwtstamp_refused_cleanly_without_hardware(probe_bin: str, tmp_path: Path) -> None:
    ns = f"rtl-hwts-{os.getpid()}"  # not another test run's (deleted at the end)
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        subprocess.run(["ip", "-n", ns, "link", "add", "hw0", "type", "veth", "peer", "name",
                        "hw1"], check=True)
        journal = tmp_path / "hw.journal"
        ops = [
            '{"op":"hwtstamp","ifname":"hw0","tx":"on","rx_filter":"all"}',
            '{"op":"hwtstamp","ifname":"lo","tx":"off","rx_filter":"none"}',
            '{"op":"hwtstamp","ifname":"nosuch0","tx":"on","rx_filter":"all"}',
            '{"op":"hwtstamp","ifname":"../x","tx":"on","rx_filter":"all"}',
            '{"op":"hwtstamp","ifname":"hw0","tx":"sideways","rx_filter":"all"}',
            '{"op":"hwtstamp","ifname":"hw0","tx":"on","rx_filter":"everything"}',
            '{"op":"hwtstamp","ifname":"hw0"}',
        ]
        recs = _apply(probe_bin, ns, journal, ops)
        applied = [r for r in recs if r["type"] == "applied"]
        assert len(applied) == len(ops) and not any(a["ok"] for a in applied)
        why = [a["error"] for a in applied]
        assert "could not be restored" in why[0] and "SIOCGHWTSTAMP" in why[0]
        assert "no interface nosuch0" in why[2]
        assert "not an interface name" in why[3]
        assert "unknown tx 'sideways'" in why[4] and "unknown rx_filter 'everything'" in why[5]
        assert "needs string fields" in why[6]
        done = recs[-1]
        assert done["type"] == "released" and done["restored"] == 0 and done["failed"] == 0
        assert not journal.exists()
    finally:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True, check=False)


def test_restore_of_a_vanished_interface_is_gone_not_failed(probe_bin: str,
                                                           tmp_path: Path) -> None:
    # a journal written by an applier killed while a NIC had timestamping on; the
    # interface has gone since (unplugged, or its namespace deleted)
    journal = tmp_path / "stale.journal"
    head = {"schema": 1, "seq": 0, "op": "begin", "pid": 0, "time_ns": 0}
    entry = {"schema": 1, "seq": 1, "op": "hwtstamp", "ifname": "rtlgone0", "ifindex": 999999,
             "old_tx": 0, "old_rx_filter": 0, "tx": 1, "rx_filter": 1, "time_ns": 1}
    journal.write_text(json.dumps(head) + "\n" + json.dumps(entry) + "\n")
    r = subprocess.run([probe_bin, "sys", "restore", "--journal", str(journal)],
                       capture_output=True, text=True, timeout=30, check=False)
    assert r.returncode == 0, r.stderr
    recs = [json.loads(x) for x in r.stdout.splitlines()]
    assert any(x.get("op") == "hwtstamp" and x.get("result") == "gone" for x in recs), recs
    assert not journal.exists()
