# SPDX-License-Identifier: MIT
"""One preemption model for doctor and provenance: the engine decides it
(`rtlab-probe sys preempt`), every probe's header records the same answer, and
both say where it came from."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rtlab.engine.transport import LocalTransport
from rtlab.results.store import Store
from rtlab.system.doctor import Severity, run_checks
from rtlab.system.facts import read_preemption
from rtlab.system.sysroot import SysRoot

ROOT = Path(__file__).resolve().parents[3]
_CHOICE = {"CONFIG_PREEMPT_LAZY": "lazy", "CONFIG_PREEMPT": "full",
           "CONFIG_PREEMPT_VOLUNTARY": "voluntary", "CONFIG_PREEMPT_NONE": "none"}


def _header(probe: str) -> dict:
    out = subprocess.run([probe, "timer", "--cpus", "0", "--duration", "100ms",
                          "--allow-non-rt"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    header = json.loads(out.stdout.splitlines()[0])
    assert header["type"] == "header"
    return header["system"]


def test_header_and_doctor_agree_on_this_machine(probe_bin: str,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression: the header said "unknown" where the doctor said "none (from kernel
    config default)": the engine could not read /proc/config.gz."""
    monkeypatch.setenv("RTLAB_PROBE", probe_bin)
    system = _header(probe_bin)
    (finding,) = run_checks("/", only=["preempt"])
    facts = finding.facts
    assert system["preempt"] == (facts["model"] or "unknown")
    assert system["preempt_source"] == facts["model_source"]
    assert system["preempt_dynamic"] == facts["dynamic"]
    assert system["preempt_live_error"] == facts["live_error"]
    assert (system["preempt_source"] or "unknown") in finding.summary
    # an independent reading of the kernel config (Python's gzip): whenever there is a
    # config, the model is known, and a default taken from it is the config's choice
    cfg, where = SysRoot("/").kconfig()
    if cfg:
        assert system["preempt"] != "unknown"
        if system["preempt_source"].startswith("kernel config default"):
            (sym,) = [k for k, m in _CHOICE.items() if cfg.get(k) == "y"]
            assert system["preempt"] == _CHOICE[sym]
            assert system["preempt_source"] == f"kernel config default: {where} ({sym}=y)"
            assert system["preempt_dynamic"] is True and system["preempt_live_error"]


def test_run_records_the_doctors_model_and_its_source(
        probe_bin: str, require_root: None, tmp_path: Path) -> None:
    """The stored run (provenance), its report and the doctor findings of the same run
    name the same model and source."""
    store = tmp_path / "rtlab.db"
    proc = subprocess.run(
        [sys.executable, "-m", "rtlab", "run", "--probe", "timer", "--cpus", "0",
         "--duration", "1s", "--no-progress", "--store", str(store)],
        capture_output=True, text=True, timeout=60,
        env=dict(os.environ, RTLAB_PROBE=probe_bin,
                 PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")))
    assert proc.returncode == 0, proc.stderr
    s = Store.open(str(store))
    (row,) = s.list()
    result = s.get(row.id)
    system = result.provenance["engine"]["system"]
    doctor = {f["check"]: f for f in result.provenance["doctor"]["findings"]}
    assert system["preempt"] == (doctor["preempt"]["facts"]["model"] or "unknown")
    assert system["preempt_source"] == doctor["preempt"]["facts"]["model_source"]
    assert row.preempt == system["preempt"]
    html = next((tmp_path / "reports").glob("*.html")).read_text()
    if system["preempt_source"]:
        assert system["preempt_source"].replace(">", "&gt;") in html


def _tree(tmp_path: Path, *, version: str, cmdline: str, config: str | None,
          gz: bool = True, debugfs: str | None = None, realtime: str | None = None) -> Path:
    root = tmp_path / "tree"
    (root / "proc/sys/kernel").mkdir(parents=True)
    (root / "sys/kernel/debug").mkdir(parents=True)
    (root / "proc/sys/kernel/version").write_text(version + "\n")
    (root / "proc/sys/kernel/osrelease").write_text("6.6.0-test\n")
    (root / "proc/cmdline").write_text(cmdline + "\n")
    if config is not None and gz:
        (root / "proc/config.gz").write_bytes(gzip.compress(config.encode()))
    elif config is not None:
        (root / "boot").mkdir()
        (root / "boot/config-6.6.0-test").write_text(config)
    if debugfs is not None:
        (root / "sys/kernel/debug/sched").mkdir()
        (root / "sys/kernel/debug/sched/preempt").write_text(debugfs + "\n")
    if realtime is not None:
        (root / "sys/kernel/realtime").write_text(realtime + "\n")
    return root


DYN = "#1 SMP PREEMPT_DYNAMIC Debian 6.6.0"
DYN_CFG = ("CONFIG_PREEMPT_BUILD=y\nCONFIG_PREEMPT_VOLUNTARY=y\n# CONFIG_PREEMPT is not set\n"
           "CONFIG_PREEMPTION=y\nCONFIG_PREEMPT_DYNAMIC=y\n" + "CONFIG_PADDING=y\n" * 2000)


@pytest.mark.parametrize(("kw", "model", "source", "live_error"), [
    # this machine's case: no debugfs, no preempt= (one after "--" belongs to init)
    ({"cmdline": "quiet -- preempt=full", "config": DYN_CFG}, "voluntary",
     "kernel config default: /proc/config.gz (CONFIG_PREEMPT_VOLUNTARY=y)",
     "debugfs not mounted"),
    ({"cmdline": "preempt=none quiet preempt=full", "config": DYN_CFG}, "full",
     "/proc/cmdline (preempt=full)", "debugfs not mounted"),
    ({"cmdline": "preempt=full", "config": DYN_CFG, "debugfs": "none voluntary full (lazy)"},
     "lazy", "/sys/kernel/debug/sched/preempt", None),
    ({"cmdline": "", "config": DYN_CFG, "gz": False}, "voluntary",
     "kernel config default: /boot/config-6.6.0-test (CONFIG_PREEMPT_VOLUNTARY=y)",
     "debugfs not mounted"),
    ({"cmdline": "", "config": None}, "unknown", None, "debugfs not mounted"),
    ({"cmdline": "", "config": "CONFIG_PREEMPT_RT=y\n", "realtime": "0"}, "rt",
     "/proc/config.gz (CONFIG_PREEMPT_RT=y)", None),
])
def test_decision_order_on_trees(probe_bin: str, tmp_path: Path, kw: dict, model: str,
                                 source: str | None, live_error: str | None) -> None:
    root = _tree(tmp_path, version=DYN, **kw)
    p = read_preemption(LocalTransport(probe_bin), root=str(root))
    assert (p.model, p.source, p.live_error) == (model, source, live_error)
    assert p.dynamic is True


def test_doctor_names_the_source(probe_bin: str, tmp_path: Path,
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RTLAB_PROBE", probe_bin)
    root = _tree(tmp_path, version=DYN, cmdline="quiet", config=DYN_CFG)
    (f,) = run_checks(str(root), only=["preempt"])
    assert f.severity is Severity.CRITICAL
    assert f.summary == ("not PREEMPT_RT; preemption voluntary (from kernel config default: "
                         "/proc/config.gz (CONFIG_PREEMPT_VOLUNTARY=y)); live mode unreadable: "
                         "debugfs not mounted")
    assert "preempt=full" in (f.advice or "")
    (tmp_path / "tree/proc/config.gz").write_bytes(b"\x1f\x8b\x08\x00 truncated")
    (f,) = run_checks(str(root), only=["preempt"])
    assert f.severity is Severity.UNKNOWN and "debugfs not mounted" in f.summary


def test_doctor_without_engine_is_unknown(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RTLAB_PROBE", str(tmp_path / "missing"))
    (f,) = run_checks("/", only=["preempt"])
    assert f.severity is Severity.UNKNOWN and "RTLAB_PROBE" in f.summary


def _debugfs_mounted() -> bool:
    return any(line.split()[2] == "debugfs" for line in Path("/proc/self/mounts").open())


def test_live_mode_from_a_private_debugfs(probe_bin: str, require_root: None,
                                          tmp_path: Path) -> None:
    """debugfs mounted in a private mount namespace (the machine's mounts stay as
    they are): the engine reads the live mode there, or says why it cannot."""
    if shutil.which("unshare") is None:
        pytest.skip("needs unshare(1)")
    if not read_preemption(LocalTransport(probe_bin)).dynamic:
        pytest.skip("not a PREEMPT_DYNAMIC kernel")
    mounted_before = _debugfs_mounted()
    script = ("mountpoint -q /sys/kernel/debug || mount -t debugfs none /sys/kernel/debug "
              "|| exit 77; cat /sys/kernel/debug/sched/preempt > \"$1\" 2>/dev/null; "
              "echo $? >> \"$1\"; exec \"$2\" sys preempt")
    out = tmp_path / "cat-preempt"
    proc = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                           script, "sh", str(out), probe_bin],
                          capture_output=True, text=True, timeout=30)
    if proc.returncode == 77:
        pytest.skip(f"cannot mount debugfs in a mount namespace: {proc.stderr.strip()}")
    assert proc.returncode == 0, proc.stderr
    lines = out.read_text().splitlines()
    ans = json.loads(proc.stdout)
    if lines[-1] == "0":  # readable: the mode in parentheses, from debugfs
        mode = lines[0][lines[0].index("(") + 1:lines[0].index(")")]
        assert (ans["preempt"], ans["preempt_source"]) == (mode,
                                                           "/sys/kernel/debug/sched/preempt")
        assert ans["preempt_live_error"] is None
    else:  # e.g. EPERM on this VM: said so, and the model comes from preempt= or the config
        assert ans["preempt_live_error"] in ("EPERM", "EACCES")
        assert ans["preempt_source"] != "/sys/kernel/debug/sched/preempt"
    assert _debugfs_mounted() == mounted_before
