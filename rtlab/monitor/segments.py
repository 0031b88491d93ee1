# SPDX-License-Identifier: MIT
"""A monitor segment (one engine run of one board) as a stored run.

Each segment becomes an ordinary run in the store (scenario `monitor`), with its
per-window maxima and per-window histograms, so `rtlab results`, `report`, `history`,
`compare`, `export` and `results push` work on monitored data as on any run; its
provenance says which monitor, board and segment it is and the gap before it. The run
id is fixed when the segment starts, so storing a segment again after a crash finds
it already there instead of storing it twice.
"""

from __future__ import annotations

import hashlib
import shutil
import socket
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rtlab import __version__
from rtlab.engine.jsonl import StreamCollector, UnknownSchemaError, log_notes
from rtlab.errors import RtlabError
from rtlab.exitcodes import ExitCode
from rtlab.monitor.checkpoint import Segment
from rtlab.results.model import RunResult
from rtlab.results.store import Store
from rtlab.runner.run import believable

SCENARIO = "monitor"


def segment_run_id(monitor_id: str, board: str, number: int, attempt: int = 0) -> str:
    """The run id of a board's segment number `number` (8 hex digits like every run id;
    `attempt` > 0 when an unrelated run already holds the first choice)."""
    h = hashlib.sha256(f"{monitor_id}\0{board}\0{number}\0{attempt}".encode()).hexdigest()
    return h[:8]


def segment_records(path: Path, col: StreamCollector | None = None
                    ) -> Iterator[dict[str, Any]]:
    """A segment's raw file, record by record, fed into `col` on the way (a missing file
    has none; a line cut by a crash at the end is left out, the records before it stand).
    One record at a time: a segment's snapshots each carry the whole cumulative histogram,
    and an hour of them held at once would take hundreds of megabytes."""
    col = col if col is not None else StreamCollector()
    if not path.exists():
        return
    with open(path, encoding="utf-8", errors="replace", newline="") as f:
        for line in f:
            try:
                rec = col.feed(line)
            except UnknownSchemaError as exc:
                raise RtlabError(f"{path}: {exc.message}", hint=exc.hint) from None
            if rec is not None:
                yield rec


def read_segment(path: Path) -> StreamCollector:
    """A segment's raw file as one collector (its last state, windows, logs)."""
    col = StreamCollector()
    for _ in segment_records(path, col):
        pass
    return col


def segment_result(col: StreamCollector, seg: Segment, monitor_id: str,
                   target: str | None) -> RunResult | None:
    """The run of a segment's records (None: the engine measured nothing)."""
    if col.state is None:
        return None
    engine_status = col.result.get("status") if col.result else None
    if engine_status == "completed":
        status, partial = "completed", False
    elif engine_status == "threshold":
        status, partial = "threshold", False
    elif engine_status == "error":
        status, partial = "failed", True
    else:
        status, partial = "partial", True
    header = col.header or {}
    host: dict[str, Any] = {
        "rtlab_version": __version__,
        "hostname": socket.gethostname(),
        "start_wall": _iso(header.get("start_realtime_ns")),
        "end_wall": _iso(col.result.get("end_realtime_ns")) if col.result else None,
        "command_line": ["rtlab", "monitor"],
        "transport": "ssh" if target else "local",
        "target": {"target": target} if target else None,
    }
    notes = [*log_notes(col.stream.logs)]
    if seg.status == "interrupted":
        notes.append("the monitor stopped while this segment measured (crash or kill); "
                     "its last snapshot is kept")
    if seg.gap_before_s > 0:
        notes.append(f"not measured for {seg.gap_before_s:.1f} s before this segment"
                     + (f": {seg.gap_reason}" if seg.gap_reason else ""))
    result = col.to_result(seg.run_id, status=status, partial=partial, host=host,
                           scenario={"name": SCENARIO, "hash": None}, extra_notes=notes)
    result.provenance["monitor"] = {
        "id": monitor_id, "board": seg.board, "segment": seg.file.rsplit("/", 1)[-1],
        "started": seg.started, "gap_before_s": round(seg.gap_before_s, 3),
        "gap_reason": seg.gap_reason or None,
    }
    believable(result, ExitCode.OK)
    return result


def store_segment(store: Store, raw: Path, seg: Segment, monitor_id: str,
                  target: str | None) -> str:
    """Store a segment: "stored", "already" (a crash came between storing and the
    checkpoint) or "empty" (nothing measured; nothing stored). Raises RtlabError when
    the store cannot be written (the caller keeps the segment pending)."""
    if store.exists(seg.run_id):
        old = store.get(seg.run_id)
        mon = old.provenance.get("monitor") or {}
        if mon.get("id") == monitor_id and mon.get("board") == seg.board:
            return "already"
        raise RtlabError(f"run id {seg.run_id} is held by another run")
    result = segment_result(read_segment(raw), seg, monitor_id, target)
    if result is None:
        return "empty"
    store.add(result)
    dest = store.raw_path(seg.run_id)
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(raw, dest)
    return "stored"


def _iso(ns: object) -> str | None:
    if not isinstance(ns, int) or ns <= 0:
        return None
    return datetime.fromtimestamp(ns / 1e9, UTC).isoformat()
