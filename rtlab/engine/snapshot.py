# SPDX-License-Identifier: MIT
"""Reading files of a target through its engine: `rtlab-probe sys snapshot`
(docs/sys-protocol.md). A board has no Python; what the host reads there (the
doctor's /proc and /sys, its processes, the raw files it kept) comes this way, and
nothing on the target changes.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from rtlab.errors import RtlabError

if TYPE_CHECKING:
    from rtlab.engine.transport import Transport

SNAPSHOT_TIMEOUT_S = 120.0


def snapshot(transport: Transport, patterns: Iterable[str],
             timeout_s: float = SNAPSHOT_TIMEOUT_S, *, max_file: int | None = None,
             max_total: int | None = None) -> list[dict[str, Any]]:
    """The records of `rtlab-probe sys snapshot` for these patterns on the target
    (`max_file`/`max_total`: the engine's caps per file and in all, in bytes)."""
    args = ["sys", "snapshot"]
    if max_file is not None:
        args += ["--max-file", str(max_file)]
    if max_total is not None:
        args += ["--max-total", str(max_total)]
    proc = transport.run(args, input="".join(f"{p}\n" for p in patterns),
                         timeout_s=timeout_s)
    if proc.returncode != 0:
        line = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
        raise RtlabError(f"cannot read files on {transport.target}: {line}")
    out: list[dict[str, Any]] = []
    done = False
    for raw in proc.stdout.splitlines():
        try:
            rec = json.loads(raw)
        except ValueError:
            continue
        if isinstance(rec, dict):
            done = done or rec.get("type") == "snapshot_done"
            out.append(rec)
    if not done:
        raise RtlabError(f"the file snapshot of {transport.target} ended early")
    return out


def record_bytes(rec: dict[str, Any]) -> bytes:
    """The content of a snapshot `file` record (its `text`, or its `base64`)."""
    if "base64" in rec:
        return base64.b64decode(str(rec["base64"]))
    return str(rec.get("text", "")).encode()
