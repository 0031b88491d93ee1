# SPDX-License-Identifier: MIT
"""Fixtures of the namespace-board tests: a board reached over real SSH, and a helper
that runs the real `rtlab` CLI against it."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from .nsboard import NsBoard, available, ns_board

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent


@pytest.fixture(scope="module")
def board(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NsBoard]:
    why = available()
    if why:
        pytest.skip(why)
    with ns_board(tmp_path_factory.mktemp("nsboard")) as b:
        yield b


@pytest.fixture
def cli(board: NsBoard, tmp_path: Path, probe_bin: str):  # type: ignore[no-untyped-def]
    """cli(*args, timeout=...) -> CompletedProcess: `python -m rtlab ARGS` with the
    board's ssh_config, a private store and engine dir."""
    engine_dir = tmp_path / "board-engine"

    def run(*args: str, timeout: float = 120, env: dict[str, str] | None = None,
            store: bool = True) -> subprocess.CompletedProcess[str]:
        e = {**os.environ, "RTLAB_PROBE": probe_bin, "RTLAB_SSH_CONFIG": str(board.ssh_config),
             "RTLAB_ENGINE_DIR": str(engine_dir), "PYTHONPATH": str(REPO),
             "XDG_DATA_HOME": str(tmp_path / "xdg"), "COLUMNS": "200", **(env or {})}
        extra = ["--store", str(tmp_path / "store.db")] if store else []
        return subprocess.run([sys.executable, "-m", "rtlab", *args, *extra],
                              capture_output=True, text=True, env=e, timeout=timeout,
                              check=False)

    run.engine_dir = engine_dir  # type: ignore[attr-defined]
    run.store = tmp_path / "store.db"  # type: ignore[attr-defined]
    return run
