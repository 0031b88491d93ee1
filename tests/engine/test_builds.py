# SPDX-License-Identifier: MIT
"""rtlab.engine.builds: board architecture -> static engine, the version record, and
refusing an engine that does not fit the board or this rtlab. No root, no board."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import subprocess
from pathlib import Path

import pytest

import rtlab
from rtlab.engine import builds
from rtlab.engine.builds import (
    ARCHES,
    EngineVersion,
    build_arch,
    check_engine,
    engine_for,
    engines_dir,
    parse_version,
)
from rtlab.errors import RtlabError

ROOT = Path(__file__).resolve().parents[2]

GOOD = {
    "type": "version", "schema": 1, "engine_version": rtlab.__version__, "arch": "aarch64",
    "machine": "aarch64", "output_schema": 1, "sys_schema": 1, "static": True,
    "af_xdp": False,
}


def _line(**changes: object) -> str:
    rec = {**GOOD, **changes}
    return json.dumps({k: v for k, v in rec.items() if v is not ...}) + "\n"


@pytest.mark.parametrize(("machine", "arch"), [
    ("x86_64", "x86_64"), ("aarch64", "aarch64"), ("arm64", "aarch64"),
    ("armv7l", "armhf"), ("armv7hl", "armhf"), ("armv8l", "armhf"), ("armv6l", "armhf"),
    ("ppc64", "ppc64"), ("ppc", "ppc"), ("ppc64\n", "ppc64"),
    ("ppc64le", None), ("riscv64", None), ("i686", None), ("mips", None), ("", None),
])
def test_machine_to_build(machine: str, arch: str | None) -> None:
    assert build_arch(machine) == arch


def test_every_mapping_lands_on_a_build() -> None:
    assert set(builds.MACHINE_ARCH.values()) <= set(ARCHES)
    assert set(builds.TOOLCHAINS) == set(ARCHES)


def _fake_engines(root: Path, *arches: str) -> Path:
    for a in arches:
        p = root / a / "rtlab-probe"
        p.parent.mkdir(parents=True)
        p.write_bytes(b"\x7fELF")
        p.chmod(0o755)
    return root


def test_engines_dir_env_and_default(tmp_path: Path) -> None:
    assert engines_dir({"RTLAB_ENGINES": str(tmp_path)}) == tmp_path
    default = engines_dir({})
    assert default.parts[-3:] == ("share", "rtlab", "engines")
    # $RTLAB_ENGINES alone; else the environment's share/, then the package's engines/
    assert builds.engine_dirs({"RTLAB_ENGINES": str(tmp_path)}) == [tmp_path]
    assert builds.engine_dirs({}) == [default, builds.package_engines_dir()]
    assert builds.package_engines_dir() == Path(builds.__file__).resolve().parents[1] / "engines"


def test_engine_for_falls_back_to_the_package(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    share = _fake_engines(tmp_path / "share", "aarch64")
    package = _fake_engines(tmp_path / "package", "aarch64", "ppc")
    monkeypatch.setattr(builds, "engines_dir", lambda env=None: share)
    monkeypatch.setattr(builds, "package_engines_dir", lambda: package)
    assert engine_for("aarch64", env={}) == share / "aarch64" / "rtlab-probe"
    assert engine_for("ppc", env={}) == package / "ppc" / "rtlab-probe"
    assert [b.arch for b in builds.installed_builds(env={})] == ["aarch64", "ppc"]
    with pytest.raises(RtlabError) as ei:
        engine_for("armv7l", env={})
    line = ei.value.one_line()
    assert "no armhf engine" in line and str(share) in line and str(package) in line
    assert "builds there: aarch64, ppc" in line


def test_installed_build_facts(tmp_path: Path) -> None:
    d = _fake_engines(tmp_path, "armhf", "ppc64")
    (d / "armhf" / "rtlab-probe").write_bytes(b"\x7fELF armhf engine")
    (d / "armhf" / "rtlab-probe.json").write_text(json.dumps({
        "schema": 1, "arch": "armhf", "engine_version": "9.9.9", "libc": "musl (zig 1.0)",
        "toolchain": "zig 1.0 cc -target arm-linux-musleabihf"}))
    (d / "ppc64" / "rtlab-probe.json").write_text("{not json")
    found = builds.installed_builds(env={"RTLAB_ENGINES": str(d)})
    arm, ppc64 = found
    assert arm.arch == "armhf" and arm.size == len(b"\x7fELF armhf engine")
    assert arm.sha256 == hashlib.sha256(b"\x7fELF armhf engine").hexdigest()
    assert (arm.engine_version, arm.libc) == ("9.9.9", "musl (zig 1.0)")
    assert "arm-linux-musleabihf" in (arm.toolchain or "")
    line = arm.one_line()
    assert "armhf" in line and "9.9.9" in line and arm.sha256[:16] in line and "\n" not in line
    # a broken record beside an engine: its facts are unknown, not invented
    assert (ppc64.engine_version, ppc64.libc, ppc64.toolchain) == (None, None, None)
    assert "build not recorded" in ppc64.one_line()


def test_engine_for_picks_the_build(tmp_path: Path) -> None:
    d = _fake_engines(tmp_path, "aarch64", "armhf")
    env = {"RTLAB_ENGINES": str(d)}
    assert engine_for("aarch64", env=env) == d / "aarch64" / "rtlab-probe"
    assert engine_for("arm64", env=env) == d / "aarch64" / "rtlab-probe"
    assert engine_for("armv7l", env=env) == d / "armhf" / "rtlab-probe"
    assert builds.available(d) == ["aarch64", "armhf"]


def test_engine_for_missing_build_says_what_to_do(tmp_path: Path) -> None:
    d = _fake_engines(tmp_path, "aarch64")
    (d / "ppc").mkdir()
    (d / "ppc" / "rtlab-probe").write_text("not executable")
    with pytest.raises(RtlabError) as ei:
        engine_for("ppc", env={"RTLAB_ENGINES": str(d)})
    line = ei.value.one_line()
    assert "\n" not in line
    assert "no ppc engine for board architecture ppc" in line
    assert "builds there: aarch64" in line
    # what to do: a wheel with every engine, or build this one
    assert "pipx install" in line and "scripts/cross-build.sh ppc" in line
    assert "ziglang" in line and "RTLAB_ENGINES" in line


def test_engine_for_unknown_board(tmp_path: Path) -> None:
    with pytest.raises(RtlabError) as ei:
        engine_for("riscv64", env={"RTLAB_ENGINES": str(tmp_path)})
    line = ei.value.one_line()
    assert "'riscv64'" in line and "builds in" in line and "none" in line
    assert "x86_64, aarch64, armhf, ppc64, ppc" in line


def test_parse_version() -> None:
    v = parse_version(_line())
    assert v == EngineVersion(engine_version=rtlab.__version__, arch="aarch64",
                              machine="aarch64", output_schema=1, sys_schema=1, static=True,
                              af_xdp=False, schema=1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        v.arch = "ppc"  # type: ignore[misc]
    assert parse_version(_line(machine=None)).machine is None
    assert v.libc is None  # an engine from before the key
    assert parse_version(_line(libc="musl")).libc == "musl"
    assert parse_version("\n" + _line() + "\n\n").arch == "aarch64"


@pytest.mark.parametrize("text", [
    "", "rtlab-probe 0.1.0\n", "[1, 2]\n", "{\n", _line() + _line(),
    _line(type="probes"), _line(arch=...), _line(arch=""), _line(engine_version=1),
    _line(output_schema="1"), _line(sys_schema=True), _line(static="yes"),
    _line(af_xdp=None), _line(machine=5), _line(schema=...), _line(libc=""), _line(libc=3),
])
def test_parse_version_refuses_garbage(text: str) -> None:
    with pytest.raises(RtlabError) as ei:
        parse_version(text)
    assert "not an rtlab-probe version record" in ei.value.message


def test_parse_version_refuses_unknown_record_schema() -> None:
    with pytest.raises(RtlabError, match="schema 2, which this rtlab does not read"):
        parse_version(_line(schema=2))


def _version(**changes: object) -> EngineVersion:
    return dataclasses.replace(parse_version(_line()), **changes)  # type: ignore[arg-type]


def test_check_engine_accepts_a_fitting_engine() -> None:
    check_engine(_version(), machine="aarch64", want_version=rtlab.__version__)
    check_engine(_version(), machine="arm64", want_version=rtlab.__version__)
    check_engine(_version(arch="armhf"), machine="armv7l", want_version=rtlab.__version__)


@pytest.mark.parametrize(("changes", "machine", "want"), [
    ({"arch": "armhf"}, "aarch64", "built for armhf, the board is aarch64"),
    ({"arch": "unknown"}, "ppc64", "needs the ppc64 build"),
    ({}, "riscv64", "for which rtlab makes no build"),
    ({"engine_version": "0.0.9"}, "aarch64", "version 0.0.9, this rtlab is"),
    ({"output_schema": 2}, "aarch64", "output schema 2, this rtlab reads 1"),
    ({"sys_schema": 7}, "aarch64", "sys protocol 7, this rtlab speaks 1"),
])
def test_check_engine_refuses(changes: dict[str, object], machine: str, want: str) -> None:
    with pytest.raises(RtlabError) as ei:
        check_engine(_version(**changes), machine=machine, want_version=rtlab.__version__)
    assert want in ei.value.message
    assert ei.value.hint


def test_versions_agree() -> None:
    """The engine reports the meson project version; check_engine compares it with
    rtlab.__version__ — they must be the same number, also in pyproject.toml."""
    meson = re.search(r"version:\s*'([^']+)'", (ROOT / "meson.build").read_text())
    pyproject = re.search(r'^version = "([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.M)
    assert meson and pyproject
    assert meson.group(1) == rtlab.__version__ == pyproject.group(1)


def test_sys_schema_matches_the_host() -> None:
    from rtlab.system.facts import SCHEMA

    assert {SCHEMA} == set(builds.SYS_SCHEMAS)


def test_the_engine_under_test_fits_this_machine(probe_bin: str) -> None:
    """The real engine's record parses and passes check_engine on this machine."""
    r = subprocess.run([probe_bin, "--version", "--json"], capture_output=True, text=True,
                       timeout=30, check=False)
    assert r.returncode == 0, r.stderr
    v = parse_version(r.stdout)
    machine = subprocess.run(["uname", "-m"], capture_output=True, text=True,
                             check=True).stdout.strip()
    assert v.machine == machine
    if build_arch(machine) is None:
        pytest.skip(f"this machine ({machine}) has no rtlab build")
    check_engine(v, machine=machine, want_version=rtlab.__version__)
