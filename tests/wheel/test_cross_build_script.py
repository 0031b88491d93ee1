# SPDX-License-Identifier: MIT
"""scripts/cross-build.sh: bad input is one line with exit 2, a missing toolchain one
line with exit 1 naming what to install, and an engine installed elsewhere (--into)
gets its build record and is not rebuilt when nothing changed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import rtlab

from .wheelbuild import REPO

SCRIPT = REPO / "scripts" / "cross-build.sh"


def _run(*args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    env.pop("RTLAB_CROSS_TOOLCHAIN", None)
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, env=env,
                          timeout=timeout, check=False, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize(("args", "says"), [
    (["riscv64"], "unknown architecture 'riscv64' (known: x86_64 aarch64 armhf ppc64 ppc)"),
    (["--toolchain", "llvm"], "unknown toolchain 'llvm' (zig or gnu)"),
    (["--frobnicate"], "unknown option --frobnicate"),
    (["--into"], "--into needs a directory"),
])
def test_bad_input_is_one_line_exit_2(args: list[str], says: str, tmp_path: Path) -> None:
    proc = _run("--build-root", str(tmp_path / "b"), *args)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0], proc.stderr
    assert proc.stdout == ""
    assert not (tmp_path / "b").exists(), "nothing is created on bad input"


def test_zig_without_ziglang_says_what_to_install(tmp_path: Path) -> None:
    python = tmp_path / "python-without-zig"
    python.write_text("#!/bin/sh\nexit 1\n")  # an interpreter that cannot import ziglang
    python.chmod(0o755)
    proc = _run("--toolchain", "zig", "--python", str(python), "--into", str(tmp_path / "e"),
                "aarch64")
    assert proc.returncode == 1
    (line,) = proc.stderr.strip().splitlines()
    assert "has no ziglang package (pip install ziglang)" in line
    assert not (tmp_path / "e").exists()


def test_into_another_directory_then_up_to_date(tmp_path: Path) -> None:
    try:
        import ziglang  # noqa: F401
    except ImportError:
        pytest.skip("no ziglang in this venv (make test's set-up installs it)")
    dest = tmp_path / "engines"
    first = _run("--into", str(dest), "aarch64")
    assert first.returncode == 0, first.stderr
    assert "aarch64" in first.stdout and "built" in first.stdout
    engine = dest / "aarch64" / "rtlab-probe"
    assert engine.stat().st_size < 1 << 20 and os.access(engine, os.X_OK)
    record = json.loads((dest / "aarch64" / "rtlab-probe.json").read_text())
    assert record["arch"] == "aarch64" and record["engine_version"] == rtlab.__version__
    assert record["libc"] == "musl" and "aarch64-linux-musl" in record["toolchain"]
    assert sorted(p.name for p in (dest / "aarch64").iterdir()) == \
        ["rtlab-probe", "rtlab-probe.json"]
    again = _run("--into", str(dest), "aarch64")
    assert again.returncode == 0, again.stderr
    assert "up to date" in again.stdout and str(engine) in again.stdout
