# SPDX-License-Identifier: MIT
"""Hardware timestamps in udp runs: the runner applies the journaled `hwtstamp`
operation to the interfaces it pings through and restores them afterwards. This
machine has no timestamping NIC: the refusals are run for real (the namespace peer's
veth pair, loopback towards a --peer), as is the software fallback of "auto"; the
success path of the operation has not run on hardware."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rtlab.runner.peers import peer_timestamps as udp_timestamps
from rtlab.scenario.model import Phase, ProbeSpec, Scenario
from rtlab.system.nic import hwtstamp_op, route_interface

needs_ip = pytest.mark.skipif(not shutil.which("ip"), reason="needs iproute2")


def _sc(*stamps: str | None) -> Scenario:
    probes = [ProbeSpec("udp", {"mode": "ping"} | ({"timestamps": s} if s else {}))
              for s in stamps]
    return Scenario(name="x", description="", phases=tuple(
        Phase(f"p{i}", p, 1_000_000_000) for i, p in enumerate(probes)))


def test_the_peer_follows_the_pingers_timestamps() -> None:
    assert udp_timestamps([_sc(None)]) is None
    assert udp_timestamps([_sc("none"), _sc("none")]) == "none"
    assert udp_timestamps([_sc("software"), _sc("none")]) is None  # disagree: default
    assert udp_timestamps([_sc("software", "auto")]) == "auto"
    assert udp_timestamps([_sc("auto"), _sc("hardware")]) == "hardware"
    assert hwtstamp_op("eth1") == {"op": "hwtstamp", "ifname": "eth1", "tx": "on",
                                   "rx_filter": "all"}


@needs_ip
def test_route_interface() -> None:
    assert route_interface("127.0.0.1") == "lo"


class Ran(subprocess.CompletedProcess[str]):
    pid: int


def rtlab(probe_bin: str, store: Path, *args: str, timeout: float = 90) -> Ran:
    """`rtlab ARGS --store STORE`, remembering its pid: its namespaces are named
    rtlab-PID-... (other rtlab runs on this machine may create theirs meanwhile)."""
    env = {**os.environ, "RTLAB_PROBE": probe_bin, "RTLAB_JOURNAL_DIR": str(store.parent / "j")}
    argv = [sys.executable, "-m", "rtlab", *args, "--store", str(store)]
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          env=env) as p:
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            raise
    r = Ran(argv, p.returncode, out, err)
    r.pid = p.pid
    return r


def _no_leftovers(tmp_path: Path, r: Ran) -> None:
    after = set(os.listdir("/run/netns")) if os.path.isdir("/run/netns") else set()
    assert not {n for n in after if n.startswith(f"rtlab-{r.pid}-")}
    assert not list((tmp_path / "j").glob("*.journal"))


@needs_ip
@pytest.mark.parametrize("peer", [None, "127.0.0.1:9"])
def test_hardware_refused_cleanly(probe_bin: str, require_root: None, tmp_path: Path,
                                  peer: str | None) -> None:
    extra = ("--peer", peer, "--probe-opt", "session=x") if peer else ()
    r = rtlab(probe_bin, tmp_path / "s.db", "run", "--probe", "udp", "--duration", "1s",
              "--probe-opt", "timestamps=hardware", *extra, "--no-progress")
    assert r.returncode == 4, r.stderr + r.stdout
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr
    dev = "lo" if peer else "rtl-b"
    assert 'timestamps = "hardware"' in lines[0] and f"of {dev} (SIOCGHWTSTAMP" in lines[0]
    assert ("veth pair" in lines[0]) == (peer is None)
    assert "run " not in r.stdout  # nothing measured, nothing stored
    _no_leftovers(tmp_path, r)


@needs_ip
def test_auto_falls_back_to_software(probe_bin: str, require_root: None,
                                     tmp_path: Path) -> None:
    r = rtlab(probe_bin, tmp_path / "s.db", "run", "--probe", "udp", "--duration", "1s",
              "--cpus", "1", "--probe-opt", "timestamps=auto", "--no-progress")
    assert r.returncode == 0, r.stderr + r.stdout
    assert "udp ping packets: sent" in r.stdout and "tx_stamps" in r.stdout
    assert "link" in r.stdout and "hw.wire" not in r.stdout
    _no_leftovers(tmp_path, r)


@needs_ip
def test_scenario_asking_for_hardware_is_refused_cleanly(probe_bin: str, require_root: None,
                                                         tmp_path: Path) -> None:
    sc = tmp_path / "udp-hw.toml"
    sc.write_text('[scenario]\nname = "udp-hw"\ndescription = "hardware stamps"\n\n'
                  '[[probe]]\nprobe = "udp"\ncpus = "last"\n'
                  'options = { mode = "ping", rate = 1000, timestamps = "hardware" }\n\n'
                  '[[phase]]\nname = "main"\nduration = "1s"\n')
    r = rtlab(probe_bin, tmp_path / "s.db", "run", str(sc), "--no-progress")
    assert r.returncode == 4, r.stderr + r.stdout
    assert len(r.stderr.strip().splitlines()) == 1 and "veth pair" in r.stderr
    _no_leftovers(tmp_path, r)
