# SPDX-License-Identifier: MIT
"""`pip install rtlab` with every board's engine inside: the sdist builds the static
engines (Zig toolchain, musl), the wheel carries them and a static host engine under
an honest platform tag, and an install into a fresh virtual environment works on a
PATH without any compiler (`rtlab --version` names every engine build). The wheel is
built once per commit (tests/wheel/wheelbuild.py); the emulated aarch64 board is
measured with it in tests/lab/test_wheel_on_board.py (the lab's session board)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

import rtlab
from rtlab.engine.builds import ARCHES, build_arch

from .wheelbuild import (
    COMPILERS,
    REPO,
    Built,
    built,
    clean_env,
    fresh_venv,
    no_compiler_path,
    system_python,
)

pytestmark = pytest.mark.slow

ENGINE_LIMIT = 1 << 20  # every engine well under 1 MiB (docs/engine.md has the sizes)


@pytest.fixture(scope="module")
def pair() -> Built:
    return built()


@pytest.fixture(scope="module")
def installed(pair: Built, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """(bin/ of a fresh venv with the wheel installed, a PATH without compilers)."""
    root = tmp_path_factory.mktemp("fresh")
    path = no_compiler_path(root)
    bindir = fresh_venv(root, pair.wheel, path)
    return bindir, f"{bindir}:{path}"


def test_sdist_has_the_sources_and_no_binaries(pair: Built) -> None:
    with tarfile.open(pair.sdist) as tar:
        names = [n.split("/", 1)[1] for n in tar.getnames() if "/" in n]
    for need in ("scripts/cross-build.sh", "engine/src/main.c", "meson.build",
                 "pyproject.toml", "rtlab/engine/builds.py"):
        assert need in names, need
    assert {f"engine/cross/musl-{a}.ini" for a in ARCHES} <= set(names)
    assert not [n for n in names if n.endswith("rtlab-probe")]


def _elf_machine(data: bytes) -> tuple[int, int, bool]:
    """(ELF class, e_machine, has a program interpreter)."""
    assert data[:4] == b"\x7fELF"
    end = "big" if data[5] == 2 else "little"
    machine = int.from_bytes(data[18:20], end)
    if data[4] == 2:
        phoff, phentsize, phnum = (int.from_bytes(data[32:40], end),
                                   int.from_bytes(data[54:56], end),
                                   int.from_bytes(data[56:58], end))
    else:
        phoff, phentsize, phnum = (int.from_bytes(data[28:32], end),
                                   int.from_bytes(data[42:44], end),
                                   int.from_bytes(data[44:46], end))
    interp = any(int.from_bytes(data[phoff + i * phentsize:phoff + i * phentsize + 4], end) == 3
                 for i in range(phnum))
    return data[4], machine, interp


E_MACHINE = {"x86_64": 62, "aarch64": 183, "armhf": 40, "ppc64": 21, "ppc": 20}


def test_wheel_carries_every_engine_static_and_small(pair: Built) -> None:
    with zipfile.ZipFile(pair.wheel) as zf:
        names = zf.namelist()
        # the package's root in the wheel (meson-python: <name>.data/purelib/ here)
        (init,) = [n for n in names if n.endswith("rtlab/__init__.py")]
        pkg = init[: -len("/__init__.py")]
        for arch in ARCHES:
            name = f"{pkg}/engines/{arch}/rtlab-probe"
            assert name in names, f"the wheel has no {name}"
            info = zf.getinfo(name)
            assert info.file_size < ENGINE_LIMIT, f"{arch}: {info.file_size} B"
            assert (info.external_attr >> 16) & 0o111, f"{name} is not executable"
            _cls, machine, interp = _elf_machine(zf.read(name))
            assert machine == E_MACHINE[arch] and not interp
            record = json.loads(zf.read(f"{pkg}/engines/{arch}/rtlab-probe.json"))
            assert record["arch"] == arch and record["engine_version"] == rtlab.__version__
            assert record["libc"].startswith("musl")
        host = [n for n in names if n.endswith(".data/scripts/rtlab-probe")]
        assert len(host) == 1, names
        assert not _elf_machine(zf.read(host[0]))[2], "the host engine is not static"
        # the host's engine is the board build of this architecture (static musl)
        arch = build_arch(os.uname().machine)
        if arch is not None:
            assert zf.read(host[0]) == zf.read(f"{pkg}/engines/{arch}/rtlab-probe")
        assert not [n for n in names if "/.stamp" in n]


def test_wheel_tag_is_honest(pair: Built) -> None:
    """Linux executables inside, no Python extension: any Python 3, no ABI, this
    machine's architecture, Linux."""
    m = re.fullmatch(r"rtlab-[^-]+-(?P<py>[^-]+)-(?P<abi>[^-]+)-(?P<plat>[^-]+)\.whl",
                     pair.wheel.name)
    assert m, pair.wheel.name
    machine = os.uname().machine
    assert m["plat"].endswith(f"linux_{machine}"), m["plat"]
    assert m["abi"] == "none" and m["py"] == "py3", pair.wheel.name
    with zipfile.ZipFile(pair.wheel) as zf:
        wheel_meta = zf.read(next(n for n in zf.namelist() if n.endswith(".dist-info/WHEEL")))
    assert f"Tag: py3-none-{m['plat']}".encode() in wheel_meta


def test_no_compiler_on_the_fresh_path(installed: tuple[Path, str]) -> None:
    _bindir, path = installed
    for tool in COMPILERS:
        assert shutil.which(tool, path=path) is None, f"{tool} is reachable on the test PATH"
    probe = subprocess.run([str(installed[0] / "python"), "-c", "import ziglang"],
                           capture_output=True, env=clean_env(path), check=False,
                           cwd=installed[0])
    assert probe.returncode != 0, "the fresh venv must not have the Zig toolchain"


def test_version_names_every_engine_build(installed: tuple[Path, str]) -> None:
    bindir, path = installed
    proc = subprocess.run([str(bindir / "rtlab"), "--version"], capture_output=True, text=True,
                          env=clean_env(path), timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == f"rtlab {rtlab.__version__}"
    site = subprocess.run([str(bindir / "python"), "-c",
                           "import rtlab, os; print(os.path.dirname(rtlab.__file__))"],
                          capture_output=True, text=True, env=clean_env(path), check=True,
                          cwd=bindir)  # not the clone's directory: its rtlab would be found
    pkg = Path(site.stdout.strip())
    assert pkg.is_relative_to(bindir.parent), pkg
    for arch in ARCHES:
        (line,) = [ln for ln in lines if ln.split()[:2] == ["engine", arch]]
        engine = pkg / "engines" / arch / "rtlab-probe"
        digest = hashlib.sha256(engine.read_bytes()).hexdigest()
        assert digest[:16] in line and "musl" in line and str(engine) in line
        assert f"{engine.stat().st_size:,} B" in line and rtlab.__version__ in line
    assert "no engine for" not in proc.stdout


def test_host_engine_runs_from_the_fresh_install(installed: tuple[Path, str]) -> None:
    bindir, path = installed
    proc = subprocess.run([str(bindir / "rtlab-probe"), "--version", "--json"],
                          capture_output=True, text=True, env=clean_env(path), timeout=60,
                          check=True)
    rec = json.loads(proc.stdout)
    assert rec["static"] is True and rec["engine_version"] == rtlab.__version__
    run = subprocess.run([str(bindir / "rtlab-probe"), "timer", "--cpus", "0", "--duration",
                          "300ms", "--policy", "other", "--no-mlock", "--allow-non-rt"],
                         capture_output=True, text=True, env=clean_env(path), timeout=120,
                         check=False)
    assert run.returncode == 0, run.stderr
    last = json.loads(run.stdout.splitlines()[-1])
    assert last["type"] == "result"


def test_pipx_install_of_the_wheel(pair: Built, tmp_path: Path) -> None:
    pipx = Path(sys.executable).parent / "pipx"
    if not pipx.exists():
        pytest.skip("pipx is not in this venv (the dev extra installs it: make test's set-up)")
    path = no_compiler_path(tmp_path)
    env = clean_env(path, PIPX_HOME=str(tmp_path / "pipx"), PIPX_BIN_DIR=str(tmp_path / "bin"),
                    PIPX_MAN_DIR=str(tmp_path / "man"), PIPX_DEFAULT_PYTHON=system_python())
    proc = subprocess.run([str(pipx), "install", str(pair.wheel)], capture_output=True,
                          text=True, env=env, timeout=900, check=False)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    ver = subprocess.run([str(tmp_path / "bin" / "rtlab"), "--version"], capture_output=True,
                         text=True, env=env, timeout=120, check=False)
    assert ver.returncode == 0, ver.stderr
    engines = [ln.split()[1] for ln in ver.stdout.splitlines() if ln.startswith("  engine ")]
    assert engines == list(ARCHES)
    assert str(tmp_path / "pipx") in ver.stdout  # the engines of pipx's venv, not the clone's
    assert str(REPO) not in ver.stdout
