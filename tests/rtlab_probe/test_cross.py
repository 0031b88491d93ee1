# SPDX-License-Identifier: MIT
"""The static engines for boards (scripts/cross-build.sh): each one is a static,
stripped ELF of the right machine, and under qemu-user (the foreign ones) it reports
its architecture, lists its probes, measures with `timer` and runs `load`. Engines
that were not built (no toolchain: the set-up's ziglang builds them all) and missing
qemu binaries skip with a reason. Behaviour only: nothing here depends on timing."""

from __future__ import annotations

import json
import os
import platform
import shutil
import struct
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

import rtlab
from rtlab.engine.builds import build_arch, check_engine, engines_dir, parse_version

from .helpers import check_order, parse_lines, validate_all

WAIT = 300  # emulated, on a loaded 2-vCPU VM
# The goal is well under 1 MiB: the musl builds (scripts/cross-build.sh's default,
# zig) are 0.42-0.55 MiB (docs/engine.md has the measured sizes). The bound catches a
# binary that was not stripped, that grew by a whole library, or that was built with
# the glibc fallback (--toolchain gnu: up to 1.4 MiB), which misses the goal.
SIZE_BUDGET = 1 << 20  # 1 MiB

PT_INTERP = 3
SHT_SYMTAB = 2
EF_ARM_ABI_FLOAT_HARD = 0x400


@dataclass(frozen=True)
class Arch:
    name: str
    elf_class: int  # 1: 32-bit, 2: 64-bit
    big_endian: bool
    e_machine: int
    qemu: str
    machine: str  # uname -m that qemu-user reports
    board_cpu: str | None  # a qemu CPU model of the boards this build is for


ARCHES = [
    Arch("x86_64", 2, False, 62, "qemu-x86_64-static", "x86_64", None),
    Arch("aarch64", 2, False, 183, "qemu-aarch64-static", "aarch64", "cortex-a53"),
    Arch("armhf", 1, False, 40, "qemu-arm-static", "armv7l", "cortex-a9"),
    # qemu-user has no e5500/e6500 model: its default 64-bit CPU
    Arch("ppc64", 2, True, 21, "qemu-ppc64-static", "ppc64", None),
    Arch("ppc", 1, True, 20, "qemu-ppc-static", "ppc", "e500mc"),
]


def _native(arch: Arch) -> bool:
    return build_arch(platform.machine()) == arch.name


def _engine(arch: Arch) -> Path:
    path = engines_dir() / arch.name / "rtlab-probe"
    if not path.is_file():
        pytest.skip(f"no {arch.name} engine at {path} (no toolchain for it: "
                    "scripts/cross-build.sh builds it with the ziglang package)")
    return path


def _runner(arch: Arch, board_cpu: bool = False) -> tuple[list[str], dict[str, str]]:
    env = dict(os.environ)
    env.pop("QEMU_CPU", None)
    if _native(arch):
        return [], env
    qemu = shutil.which(arch.qemu)
    if qemu is None:
        pytest.skip(f"{arch.qemu} not installed (apt-get install qemu-user-static)")
    if board_cpu and arch.board_cpu:
        env["QEMU_CPU"] = arch.board_cpu
    return [qemu], env


def _run(arch: Arch, *args: str, board_cpu: bool = False) -> subprocess.CompletedProcess:
    prefix, env = _runner(arch, board_cpu)
    return subprocess.run([*prefix, str(_engine(arch)), *args], capture_output=True,
                          text=True, timeout=WAIT, env=env, stdin=subprocess.DEVNULL,
                          check=False)


def _elf(path: Path) -> tuple[dict[str, int], list[int], list[int]]:
    """ELF header facts, program header types, section header types."""
    data = path.read_bytes()
    assert data[:4] == b"\x7fELF", "not an ELF file"
    cls, enc = data[4], data[5]
    e = ">" if enc == 2 else "<"
    if cls == 2:
        (_t, machine, _v, _entry, phoff, shoff, flags, _eh, phentsize, phnum, shentsize,
         shnum, _shstrndx) = struct.unpack_from(e + "HHIQQQIHHHHHH", data, 16)
    else:
        (_t, machine, _v, _entry, phoff, shoff, flags, _eh, phentsize, phnum, shentsize,
         shnum, _shstrndx) = struct.unpack_from(e + "HHIIIIIHHHHHH", data, 16)
    ptypes = [struct.unpack_from(e + "I", data, phoff + i * phentsize)[0] for i in range(phnum)]
    stypes = [struct.unpack_from(e + "I", data, shoff + i * shentsize + 4)[0]
              for i in range(shnum)]
    head = {"class": cls, "enc": enc, "machine": machine, "flags": flags}
    return head, ptypes, stypes


@pytest.fixture(params=ARCHES, ids=[a.name for a in ARCHES])
def arch(request: pytest.FixtureRequest) -> Arch:
    return request.param


def test_static_stripped_elf_of_the_right_machine(arch: Arch) -> None:
    path = _engine(arch)
    head, ptypes, stypes = _elf(path)
    assert head["class"] == arch.elf_class
    assert head["enc"] == (2 if arch.big_endian else 1)
    assert head["machine"] == arch.e_machine
    if arch.name == "armhf":
        assert head["flags"] & EF_ARM_ABI_FLOAT_HARD, "not the hard-float ABI"
        assert head["flags"] >> 24 == 5, "not EABI version 5"
    assert PT_INTERP not in ptypes, "dynamically linked (has a program interpreter)"
    assert SHT_SYMTAB not in stypes, "not stripped (has a symbol table)"
    assert path.stat().st_size < SIZE_BUDGET
    assert os.access(path, os.X_OK)


def test_version_json_names_the_architecture(arch: Arch) -> None:
    r = _run(arch, "--version", "--json")
    assert r.returncode == 0, r.stderr
    v = parse_version(r.stdout)
    assert v.arch == arch.name
    assert v.static is True
    assert v.engine_version == rtlab.__version__
    machine = platform.machine() if _native(arch) else arch.machine
    assert v.machine == machine
    check_engine(v, machine=machine, want_version=rtlab.__version__)
    human = _run(arch, "--version")
    assert human.stdout == f"rtlab-probe {v.engine_version}\n"


def test_list_json_parses(arch: Arch) -> None:
    r = _run(arch, "list", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["type"] == "probes" and doc["schema"] == 1
    assert "timer" in [p["name"] for p in doc["probes"]]


def test_timer_measures(arch: Arch) -> None:
    """One second of `timer` (SCHED_OTHER: no RT needed under emulation), on the
    board's CPU model where qemu-user has one."""
    cpu = str(min(os.sched_getaffinity(0)))
    r = _run(arch, "timer", "--cpus", cpu, "--duration", "1s", "--policy", "other",
             "--no-mlock", "--allow-non-rt", "--snapshot-interval", "200ms", board_cpu=True)
    assert r.returncode == 0, r.stderr
    recs = parse_lines(r.stdout)
    validate_all(recs)
    check_order(recs)
    assert recs[0]["engine_arch"] == arch.name
    assert recs[-1]["status"] == "completed"
    assert recs[-1]["channels"][0]["samples"] > 0


def test_load_runs_and_stops(arch: Arch) -> None:
    r = _run(arch, "load", "--cpu", "1", "--vm", "1", "--vm-bytes", "1M", "--duration",
             "500ms", board_cpu=True)
    assert r.returncode == 0, r.stderr
    start, res = parse_lines(r.stdout)
    assert start["type"] == "load" and start["engine_arch"] == arch.name
    assert res["type"] == "load_result" and res["status"] == "completed"
    assert [w["end"] for w in res["workers"]] == ["stopped", "stopped"]
