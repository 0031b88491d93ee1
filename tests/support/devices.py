# SPDX-License-Identifier: MIT
"""Device nodes for tests that give rtlab a device where it wants a file.

As root, a test makes its own nodes of the null, full and zero devices (same numbers,
same kind of file) in its temporary directory: a regression that writes over a device
then replaces the test's node, never the machine's /dev/null (a run of the hostile
suite against an rtlab without the fix did that). Without root (no mknod) the real
ones are used, which a process without root cannot replace."""

from __future__ import annotations

import os
import stat
from pathlib import Path

MINORS = {"null": 3, "full": 7, "zero": 5}  # major 1 (mem) on Linux


def device_nodes(d: Path) -> dict[str, str]:
    """name ("null", "full", "zero") -> a character device node to hand to rtlab."""
    out = {}
    for name, minor in MINORS.items():
        node = d / f"dev-{name}"
        try:
            os.mknod(node, 0o666 | stat.S_IFCHR, os.makedev(1, minor))
            out[name] = str(node)
        except PermissionError:
            out[name] = f"/dev/{name}"
    return out
