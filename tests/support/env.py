# SPDX-License-Identifier: MIT
"""The fake engine wrapper and the environment of `python -m rtlab` subprocesses."""

from __future__ import annotations

import os
import shlex
import stat
import sys
from pathlib import Path

from tests.support.paths import FAKE, REPO

__all__ = ["FAKE", "REPO", "subprocess_env", "write_wrapper"]


def write_wrapper(directory: Path) -> Path:
    """An executable `rtlab-probe` that runs the fake engine with this Python."""
    path = directory / "rtlab-probe"
    path.write_text(
        f"#!/bin/sh\nexec {shlex.quote(sys.executable)} {shlex.quote(str(FAKE))} \"$@\"\n"
    )
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def subprocess_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The current environment with this checkout first on PYTHONPATH."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra or {})
    return env
