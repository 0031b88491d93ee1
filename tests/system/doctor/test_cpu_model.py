# SPDX-License-Identifier: MIT
"""The doctor names the cores as every probe's header does: the engine decodes
/proc/cpuinfo (`rtlab-probe sys cpumodel`, one table of ARM ids), live or in a copied
tree (`--root`)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from rtlab.cpulist import format_cpulist
from rtlab.system.doctor import Severity, run_checks


def _arm64_cpuinfo(parts: list[str]) -> str:
    return "".join(
        f"processor\t: {cpu}\nBogoMIPS\t: 48.00\nFeatures\t: fp asimd evtstrm cpuid\n"
        f"CPU implementer\t: 0x41\nCPU architecture: 8\nCPU variant\t: 0x0\n"
        f"CPU part\t: {part}\nCPU revision\t: 4\n\n" for cpu, part in enumerate(parts))


def _tree(tmp_path: Path, cpuinfo: str | None, cpus: int) -> Path:
    root = tmp_path / "board"
    (root / "proc").mkdir(parents=True)
    online = root / "sys/devices/system/cpu/online"
    online.parent.mkdir(parents=True)
    online.write_text(f"0-{cpus - 1}\n")
    if cpuinfo is not None:
        (root / "proc/cpuinfo").write_text(cpuinfo)
    return root


@pytest.fixture(autouse=True)
def _engine(probe_bin: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RTLAB_PROBE", probe_bin)


def test_header_and_doctor_agree_on_this_machine(probe_bin: str) -> None:
    out = subprocess.run([probe_bin, "timer", "--cpus", "0", "--duration", "100ms",
                          "--allow-non-rt"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    system = json.loads(out.stdout.splitlines()[0])["system"]
    (f,) = run_checks("/", only=["cpu-model"])
    assert f.facts["cpu_model"] == system["cpu_model"]
    assert f.facts["cpu_models"] == [{"cpus": format_cpulist(g["cpus"]), "model": g["model"]}
                                     for g in system["cpu_models"]]
    names = {g["model"] for g in system["cpu_models"]}
    assert f.severity is (Severity.OK if len(names) == 1 else Severity.INFO)
    # an independent reading: the CPUs named are the CPUs /proc/cpuinfo lists
    listed = {int(line.split(":")[1]) for line in Path("/proc/cpuinfo").read_text().splitlines()
              if line.split(":")[0].strip() == "processor"}
    assert {c for g in system["cpu_models"] for c in g["cpus"]} == listed


def test_big_little_tree(tmp_path: Path) -> None:
    root = str(_tree(tmp_path, _arm64_cpuinfo(["0xd05"] * 4 + ["0xd0b"] * 4), 8))
    (f,) = run_checks(root, only=["cpu-model"])
    assert f.severity is Severity.INFO
    assert f.summary == ("4x Cortex-A55 + 4x Cortex-A76: the measured CPUs are cores of 2 "
                         "kinds (CPUs 0-3 Cortex-A55, 4-7 Cortex-A76)")
    assert f.advice and "--cpus 0-3, then --cpus 4-7" in f.advice
    assert f.facts["cpu_models"] == [{"cpus": "0-3", "model": "Cortex-A55"},
                                     {"cpus": "4-7", "model": "Cortex-A76"}]
    (f,) = run_checks(root, cpus=[5, 6], only=["cpu-model"])
    assert f.severity is Severity.OK
    assert f.summary == ("4x Cortex-A55 + 4x Cortex-A76 (CPUs 0-3 Cortex-A55, 4-7 "
                         "Cortex-A76); measured CPUs 5-6: Cortex-A76")


def test_one_core_unknown_part_and_no_cpuinfo(tmp_path: Path) -> None:
    (f,) = run_checks(str(_tree(tmp_path / "a", _arm64_cpuinfo(["0xd03"] * 2), 2)),
                      only=["cpu-model"])
    assert (f.severity, f.summary) == (Severity.OK, "Cortex-A53")
    (f,) = run_checks(str(_tree(tmp_path / "b", _arm64_cpuinfo(["0xd99"]), 1)),
                      only=["cpu-model"])
    assert (f.severity, f.summary) == (Severity.OK, "ARM implementer 0x41 part 0xd99")
    (f,) = run_checks(str(_tree(tmp_path / "c", None, 1)), only=["cpu-model"])
    assert f.severity is Severity.UNKNOWN and "cpuinfo not readable" in f.summary
    (f,) = run_checks(str(_tree(tmp_path / "d", "processor\t: 0\nBogoMIPS\t: 1.0\n", 1)),
                      only=["cpu-model"])
    assert f.severity is Severity.UNKNOWN and f.summary.endswith("cpuinfo names no core")
