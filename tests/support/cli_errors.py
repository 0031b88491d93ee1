# SPDX-License-Identifier: MIT
"""How a refused `rtlab` command must look on stderr: one line, no traceback."""

from __future__ import annotations

import subprocess


def one_error_line(proc: subprocess.CompletedProcess[str]) -> str:
    """The one line `rtlab` wrote on stderr (and no traceback), for the caller's checks."""
    err = proc.stderr.strip()
    assert "Traceback" not in err, err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("rtlab"), err
    return lines[0]
