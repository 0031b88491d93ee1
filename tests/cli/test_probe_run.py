# SPDX-License-Identifier: MIT
"""`rtlab run --probe NAME` end to end on this machine: every probe is stored, shown,
exported; bad probe names and options are one-line usage errors (exit 2)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rtlab.engine.options import adapt_options, check_option, probe_options
from rtlab.errors import UsageError


def rtlab(probe_bin: str, store: Path, *args: str, timeout: float = 90
          ) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "RTLAB_PROBE": probe_bin, "RTLAB_JOURNAL_DIR": str(store.parent / "j")}
    return subprocess.run([sys.executable, "-m", "rtlab", *args, "--store", str(store)],
                          capture_output=True, text=True, env=env, timeout=timeout, check=False)


def run_id(out: str) -> str:
    line = next(ln for ln in out.splitlines() if ln.startswith("run ") and "stored" in ln)
    return line.split()[1]


def test_options_table(probe_bin: str) -> None:
    t = probe_options("switch", probe_bin)
    assert t.has("mechanism") and t.is_flag("pi_check") and t.takes_one_cpu("cpus")
    assert check_option(t, "pi-check", "false") == ("no_pi_check", True)
    assert check_option(t, "mechanism", "pipe") == ("mechanism", "pipe")
    with pytest.raises(UsageError):
        check_option(t, "nope", "1")
    opts = adapt_options({"cpus": [1], "policy": "fifo", "interval_ns": 1000,
                          "mechanism": "pipe"}, t)
    assert opts == {"cpus": [1], "interval_ns": 1000, "mechanism": "pipe"}
    with pytest.raises(UsageError):
        probe_options("nosuch", probe_bin)


@pytest.mark.parametrize("args", [
    ("--probe", "nosuch"),
    ("--probe", "switch", "--probe-opt", "bogus=1"),
    ("--probe", "switch", "--probe-opt", "pi-check=maybe"),
    ("--probe", "interfere", "--duration", "2s"),
    ("--probe", "noise", "--interval", "1ms"),
    ("--probe", "noise", "--peer", "192.0.2.1:7"),
    ("--probe", "udp", "--peer", "nonsense"),
    ("--probe", "udp", "--probe-opt", "path=dpdk"),
    ("--probe", "udp", "--probe-opt", "path=xdp", "--probe-opt", "xdp-mode=hw"),
    ("--probe-opt", "window=1s"),
])
def test_bad_input_one_line_exit_2(probe_bin: str, tmp_path: Path, args: tuple[str, ...]
                                   ) -> None:
    r = rtlab(probe_bin, tmp_path / "s.db", "run", *args, "--no-progress")
    assert r.returncode == 2, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and r.stdout == ""
    assert not (tmp_path / "s.db").exists() or "run " not in r.stdout


CASES = {
    "noise": (("--duration", "2s", "--cpus", "1"), "CPU available"),
    "switch": (("--duration", "1s"), "priority order: PASSED"),
    "overhead": (("--duration", "500ms"), "cost per test"),
    "event": (("--duration", "1s", "--probe-opt", "source=soft"), "clock: captured on"),
    "udp": (("--duration", "1s", "--cpus", "1"), "udp ping packets: sent"),
}


@pytest.mark.parametrize("probe", sorted(CASES))
def test_probe_runs_stored_shown_exported(probe_bin: str, require_root: None, tmp_path: Path,
                                          probe: str) -> None:
    args, extra = CASES[probe]
    store = tmp_path / "s.db"
    before = set(os.listdir("/run/netns")) if os.path.isdir("/run/netns") else set()
    r = rtlab(probe_bin, store, "run", "--probe", probe, *args, "--no-progress")
    assert r.returncode == 0, r.stderr + r.stdout
    assert extra in r.stdout
    rid = run_id(r.stdout)
    shown = rtlab(probe_bin, store, "results", "show", rid)
    assert shown.returncode == 0 and extra in shown.stdout
    js = rtlab(probe_bin, store, "export", rid, "--format", "json")
    d = json.loads(js.stdout)
    assert d["probe"] == probe and d["phases"][0]["channels"]
    if probe != "overhead":
        assert d["phases"][0]["extras"]
    csv = rtlab(probe_bin, store, "export", rid, "--format", "csv")
    assert csv.returncode == 0 and len(csv.stdout.splitlines()) >= 2
    if probe == "udp":  # the two namespaces and the journal are gone afterwards
        after = set(os.listdir("/run/netns")) if os.path.isdir("/run/netns") else set()
        assert not {n for n in after - before if n.startswith("rtlab-")}
        assert not list((tmp_path / "j").glob("*.journal"))


def test_udp_xdp_path_both_ends(probe_bin: str, require_root: None, tmp_path: Path) -> None:
    """`--probe-opt path=xdp`: the pinger and the reflector rtlab starts both on AF_XDP."""
    store = tmp_path / "s.db"
    env = {**os.environ, "RTLAB_PROBE": probe_bin, "RTLAB_JOURNAL_DIR": str(tmp_path / "j")}
    with subprocess.Popen([sys.executable, "-m", "rtlab", "run", "--probe", "udp", "--duration",
                           "1s", "--cpus", "1", "--probe-opt", "path=xdp", "--no-progress",
                           "--store", str(store)], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, env=env) as p:
        out, err = p.communicate(timeout=90)
    r = subprocess.CompletedProcess(p.args, p.returncode, out, err)
    if r.returncode == 4:
        pytest.skip("the xdp path is refused here: " + r.stderr.strip())
    assert r.returncode == 0, r.stderr + r.stdout
    assert "udp ping packets: sent" in r.stdout
    d = json.loads(rtlab(probe_bin, store, "export", run_id(r.stdout), "--format",
                         "json").stdout)
    eff = d["provenance"]["engine"]["effective"]
    assert eff["path"] == "xdp" and eff["xdp"]["attach"] in ("native", "generic")
    udp = d["phases"][0]["extras"]["udp"]
    assert udp["replies"] > 0 and udp["xdp"]["frames"] >= udp["replies"]
    # (the run starts the pinger only once the reflector's XDP program is attached in
    # its namespace: NetnsPeer.start); both namespaces (named after rtlab's pid) are gone
    assert not [n for n in os.listdir("/run/netns") if n.startswith(f"rtlab-{p.pid}-")]
