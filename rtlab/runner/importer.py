# SPDX-License-Identifier: MIT
"""`rtlab results import FILE.jsonl`: store a raw engine output file after the fact.

This recovers a run whose host process died (the raw stream is written to the
store's runs/ directory line by line while measuring) or a probe run by hand
(`rtlab-probe timer ... > out.jsonl`).
"""

from __future__ import annotations

import re
import shutil
import socket
import sys
from pathlib import Path

from rtlab import __version__
from rtlab.engine.jsonl import StreamCollector
from rtlab.errors import RtlabError, UsageError
from rtlab.results.model import RunResult
from rtlab.results.store import Store

_ID_RE = re.compile(r"[0-9a-f]{8}")


def import_jsonl(path: Path, store: Store, command_line: list[str] | None = None) -> RunResult:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from exc
    col = StreamCollector()
    for line in data.decode("utf-8", errors="replace").splitlines(keepends=True):
        col.feed(line)  # UnknownSchemaError propagates: refuse what we cannot read
    if col.state is None:
        raise UsageError(f"{path} holds no engine snapshot or result: nothing to import"
                         + (f" ({col.stream.corrupt_lines} corrupt lines)"
                            if col.stream.corrupt_lines else ""))
    # Reuse the id of a raw file from the store's runs/ directory (a lost run).
    run_id = path.stem if _ID_RE.fullmatch(path.stem) else None
    if run_id is not None and store.exists(run_id):
        raise RtlabError(f"run {run_id} is already stored; stored runs are never overwritten")
    run_id = run_id or store.new_id()
    engine_status = col.result.get("status") if col.result else None
    if engine_status == "completed":
        status, partial = "completed", False
    elif engine_status == "threshold":
        status, partial = "threshold", False
    elif engine_status == "error":
        status, partial = "failed", True
    else:
        status, partial = "partial", True
    system = (col.header or {}).get("system") or {}
    start_ns = (col.header or {}).get("start_realtime_ns")
    end_ns = col.result.get("end_realtime_ns") if col.result else None
    host = {
        "rtlab_version": __version__,
        "hostname": system.get("hostname") or socket.gethostname(),
        "start_wall": _iso(start_ns),
        "end_wall": _iso(end_ns),
        "command_line": command_line if command_line is not None else list(sys.argv),
        "transport": None,
        "imported_from": str(path),
    }
    result = col.to_result(run_id, status=status, partial=partial, host=host,
                           extra_notes=[f"imported from {path.name}"])
    store.add(result)
    dest = store.raw_path(run_id)
    if path.resolve() != dest.resolve() and not dest.exists():
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, dest)
    return result


def _iso(ns: object) -> str | None:
    if not isinstance(ns, int) or isinstance(ns, bool) or ns <= 0:
        return None
    from datetime import UTC, datetime

    return datetime.fromtimestamp(ns / 1e9, UTC).isoformat(timespec="milliseconds")
