# SPDX-License-Identifier: MIT
"""Finding the rtlab-probe binary on this machine."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from rtlab.errors import RtlabError

PROBE_NAME = "rtlab-probe"
ENV_VAR = "RTLAB_PROBE"


def find_probe(env: dict[str, str] | None = None) -> Path:
    """$RTLAB_PROBE, else beside the running Python (a venv's bin/), else PATH."""
    environ = os.environ if env is None else env
    explicit = environ.get(ENV_VAR)
    if explicit:
        path = Path(explicit)
        if not path.is_file() or not os.access(path, os.X_OK):
            raise RtlabError(
                f"{ENV_VAR}={explicit} is not an executable file",
                hint=f"point {ENV_VAR} at a built {PROBE_NAME} or unset it",
            )
        return path
    beside = Path(sys.executable).parent / PROBE_NAME
    if beside.is_file() and os.access(beside, os.X_OK):
        return beside
    found = shutil.which(PROBE_NAME, path=environ.get("PATH"))
    if found:
        return Path(found)
    raise RtlabError(
        f"{PROBE_NAME} not found (looked at ${ENV_VAR}, beside {sys.executable} and on PATH)",
        hint=f"run `make setup` to build and install it, or set {ENV_VAR}",
    )
