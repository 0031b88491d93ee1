# SPDX-License-Identifier: MIT
"""The installed wheel measures a board: rtlab from a fresh virtual environment (the
wheel of tests/wheel/wheelbuild.py, every board's engine inside), on a PATH without
any compiler, measures the lab's aarch64 board with the aarch64 engine it carries, and
a board whose architecture the installed rtlab has no engine for gets one line that
says what to do. Here, not in tests/wheel/, to use the lab's session board."""

from __future__ import annotations

import hashlib
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cli_errors import one_error_line
from tests.support.store_reading import stored_dicts
from tests.wheel.wheelbuild import built, clean_env, fresh_venv, no_compiler_path

from .boards import Board

pytestmark = pytest.mark.slow

ENGINE_DIR = "/tmp/rtlab-wheel-test"


@pytest.fixture(scope="module")
def wheel_rtlab() -> Iterator[tuple[Path, str, Path]]:
    """(bin/ of a fresh venv with the wheel, a PATH without compilers, its package dir),
    in a directory that an unprivileged user may read too (pytest's are root's only)."""
    root = Path(tempfile.mkdtemp(prefix="rtlab-wheel-on-board."))
    try:
        root.chmod(0o755)
        path = no_compiler_path(root)
        bindir = fresh_venv(root, built().wheel, path)
        out = subprocess.run([str(bindir / "python"), "-c",
                              "import rtlab, os; print(os.path.dirname(rtlab.__file__))"],
                             capture_output=True, text=True, env=clean_env(path), check=True,
                             cwd=root)  # not the clone's directory: its rtlab would be found
        pkg = Path(out.stdout.strip())
        assert pkg.is_relative_to(root), pkg
        yield bindir, f"{bindir}:{path}", pkg
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _rtlab(wheel_rtlab: tuple[Path, str, Path], board: Board, tmp: Path,
           *args: str) -> subprocess.CompletedProcess[str]:
    bindir, path, _pkg = wheel_rtlab
    env = clean_env(path, RTLAB_SSH_CONFIG=str(board.ssh_config),
                    XDG_DATA_HOME=str(tmp / "xdg"), COLUMNS="200")
    return subprocess.run([str(bindir / "rtlab"), *args], capture_output=True, text=True,
                          env=env, cwd=tmp, timeout=600, check=False)


def test_wheel_measures_the_aarch64_board(wheel_rtlab: tuple[Path, str, Path],
                                         arm64_board: Board, tmp_path: Path) -> None:
    _bindir, path, pkg = wheel_rtlab
    assert shutil.which("cc", path=path) is None and shutil.which("zig", path=path) is None
    engine = pkg / "engines" / "aarch64" / "rtlab-probe"
    digest = hashlib.sha256(engine.read_bytes()).hexdigest()
    try:
        proc = _rtlab(wheel_rtlab, arm64_board, tmp_path, "run", "--probe", "timer",
                      "--duration", "2s", "--interval", "1ms", "--no-report", "--target",
                      arm64_board.alias, "--engine-dir", ENGINE_DIR,
                      "--store", str(tmp_path / "store.db"))
        assert proc.returncode == 0, proc.stderr
        (run,) = stored_dicts(tmp_path / "store.db")
        target = run["provenance"]["host"]["target"]
        assert target["machine"] == "aarch64" and target["engine_arch"] == "aarch64"
        ch = run["phases"][0]["channels"]
        assert ch and all(c["samples"] > 0 for c in ch)
        # the binary that ran is the wheel's (content-addressed on the board), musl-built
        info = _rtlab(wheel_rtlab, arm64_board, tmp_path, "board", "info", "--target",
                      arm64_board.alias, "--engine-dir", ENGINE_DIR)
        assert info.returncode == 0, info.stderr
        assert f"{ENGINE_DIR}/rtlab-probe-{digest[:16]}" in info.stdout
        assert "musl" in info.stdout and str(engine) in info.stdout
        assert "already there" in info.stdout
    finally:
        arm64_board.sh(f"rm -rf {ENGINE_DIR}")


def test_wheel_without_the_boards_engine_says_what_to_do(wheel_rtlab: tuple[Path, str, Path],
                                                        arm64_board: Board,
                                                        tmp_path: Path) -> None:
    _bindir, _path, pkg = wheel_rtlab
    have = pkg / "engines" / "aarch64"
    away = pkg / "engines" / ".aarch64-away"
    os.rename(have, away)
    try:
        proc = _rtlab(wheel_rtlab, arm64_board, tmp_path, "board", "info", "--target",
                      arm64_board.alias, "--engine-dir", ENGINE_DIR)
    finally:
        os.rename(away, have)
    assert proc.returncode == 1, proc.stderr
    line = one_error_line(proc)
    assert "no aarch64 engine for board architecture aarch64" in line
    assert "pipx install" in line and "scripts/cross-build.sh aarch64" in line
    assert "builds there: x86_64, armhf, ppc64, ppc" in line
    assert arm64_board.sh(f"test -e {ENGINE_DIR}").returncode != 0, "nothing was copied"


def test_wheel_measures_without_root_on_the_host(wheel_rtlab: tuple[Path, str, Path],
                                                arm64_board: Board) -> None:
    """The host side needs no root: the board's engine (root there) does the rest."""
    bindir, path, _pkg = wheel_rtlab
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("setpriv (util-linux) is not installed")
        user = pwd.getpwnam("nobody")
        run_as = ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}",
                  "--clear-groups", "--"]
    else:
        user = pwd.getpwuid(os.geteuid())
        run_as = []
    home = Path(tempfile.mkdtemp(prefix="rtlab-wheel-nonroot."))
    try:
        # the board's client key and host key, as that user's own files
        cfg = arm64_board.ssh_config.read_text()
        key = home / "id"
        shutil.copyfile(arm64_board.image.client_key, key)
        known = home / "known_hosts"
        shutil.copyfile(arm64_board.known_hosts, known)
        cfg = cfg.replace(f'"{arm64_board.image.client_key}"', f'"{key}"')
        cfg = cfg.replace(f'"{arm64_board.known_hosts}"', f'"{known}"')
        (home / "ssh_config").write_text(cfg)
        for p in (home, key, known, home / "ssh_config"):
            os.chown(p, user.pw_uid, user.pw_gid)
        key.chmod(0o600)
        env = clean_env(path, RTLAB_SSH_CONFIG=str(home / "ssh_config"), HOME=str(home),
                        XDG_DATA_HOME=str(home / "xdg"), COLUMNS="200")
        proc = subprocess.run([*run_as, str(bindir / "rtlab"), "run", "--probe", "timer",
                               "--duration", "2s", "--interval", "1ms", "--no-report",
                               "--target", arm64_board.alias, "--engine-dir", ENGINE_DIR,
                               "--store", str(home / "store.db")],
                              capture_output=True, text=True, env=env, cwd=home, timeout=600,
                              check=False)
        assert proc.returncode == 0, proc.stderr
        (run,) = stored_dicts(home / "store.db")
        assert run["provenance"]["host"]["target"]["engine_arch"] == "aarch64"
        assert (home / "store.db").stat().st_uid == user.pw_uid
    finally:
        arm64_board.sh(f"rm -rf {ENGINE_DIR}")
        shutil.rmtree(home, ignore_errors=True)
