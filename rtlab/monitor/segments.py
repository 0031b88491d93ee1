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
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rtlab import __version__
from rtlab.engine.jsonl import StreamCollector, UnknownSchemaError, log_notes
from rtlab.errors import RtlabError
from rtlab.exitcodes import ExitCode
from rtlab.monitor import flight
from rtlab.monitor.checkpoint import Segment
from rtlab.probes.registry import shape as probe_shape
from rtlab.results.model import RunResult
from rtlab.results.store import Store
from rtlab.runner.importer import stored_status, wall_iso
from rtlab.runner.outcome import judge

SCENARIO = "monitor"


def segment_run_id(monitor_id: str, board: str, number: int) -> str:
    """The run id of a board's segment number `number` (8 hex digits like every run id)."""
    return hashlib.sha256(f"{monitor_id}\0{board}\0{number}".encode()).hexdigest()[:8]


def next_run_id(run_id: str) -> str:
    """The id to try when an unrelated run holds `run_id`: derived from it, so a store
    attempt repeated after a crash walks the same ids and finds its run again."""
    return hashlib.sha256(f"{run_id}\0next".encode()).hexdigest()[:8]


MAX_ID_TRIES = 8


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
                   target: str | None, run_id: str | None = None) -> RunResult | None:
    """The run of a segment's records (None: the engine measured nothing), under
    `run_id` (default: the segment's)."""
    if col.state is None:
        return None
    status, partial = stored_status(col)
    header = col.header or {}
    host: dict[str, Any] = {
        "rtlab_version": __version__,
        "hostname": socket.gethostname(),
        "start_wall": wall_iso(header.get("start_realtime_ns")),
        "end_wall": wall_iso(col.result.get("end_realtime_ns")) if col.result else None,
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
    result = col.to_result(run_id or seg.run_id, status=status, partial=partial, host=host,
                           scenario={"name": SCENARIO, "hash": None}, extra_notes=notes)
    result.provenance["monitor"] = {
        "id": monitor_id, "board": seg.board, "segment": _segment_name(seg),
        "started": seg.started, "gap_before_s": round(seg.gap_before_s, 3),
        "gap_reason": seg.gap_reason or None,
    }
    judge(result, ExitCode.OK).apply(result)
    return result


def _is_this_segment(store: Store, run_id: str, seg: Segment, monitor_id: str) -> bool:
    mon = store.get(run_id).provenance.get("monitor") or {}
    return (mon.get("id") == monitor_id and mon.get("board") == seg.board
            and mon.get("segment") == _segment_name(seg))


def store_segment(store: Store, raw: Path, seg: Segment, monitor_id: str,
                  target: str | None, virtualized: bool | None = None) -> tuple[str, str]:
    """Store a segment with its raw output: ("stored" | "already" | "empty", run id).
    "already": a crash came between storing and the checkpoint; "empty": nothing
    measured, nothing stored. The run id is the segment's, or when an unrelated run holds
    that, the next of `next_run_id`'s. The run and its raw file are stored together
    (`Store.add_with_raw`): a stored segment always has its raw output. Raises
    RtlabError when the store cannot be written (the caller keeps the segment pending)."""
    run_id = seg.run_id
    for _ in range(MAX_ID_TRIES):
        if store.exists(run_id):
            if _is_this_segment(store, run_id, seg, monitor_id):
                return "already", run_id
            run_id = next_run_id(run_id)
            continue
        col = read_segment(raw)
        result = segment_result(col, seg, monitor_id, target, run_id)
        if result is None:
            return "empty", run_id
        flight.attach(result, raw, store.runs_dir, col.header or {}, virtualized)
        if store.add_with_raw(result, raw, probe_shape):
            return "stored", run_id
        # stored meanwhile under this id (by whom: the next turn looks)
    raise RtlabError(f"segment {seg.run_id} of {seg.board}: {MAX_ID_TRIES} run ids in a "
                     "row are held by other runs")


def _segment_name(seg: Segment) -> str:
    return seg.file.rsplit("/", 1)[-1]

