# SPDX-License-Identifier: MIT
"""`rtlab results fetch --target B`: bring home the runs a board kept.

Every engine started on a board writes its output to the board too (`--tee`, in
`DIR/runs/`, DIR the engine directory), so a run whose host was killed or whose
SSH connection dropped is still complete up to its last line there. Fetching
copies each kept file into the store's raw directory (unless the host already has
it whole) and imports every run that is not stored yet, like `rtlab results import`;
stored runs are never overwritten. The files are read by the board's engine
(`sys snapshot`). A traced run's captures (`ID.N-PHASE.trace/` and the `.trace.pN` parts
of a probe split in parts) and samples come home with it and are attributed at import;
they are removed from the board once the run is stored, and nothing else there changes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rtlab.engine.snapshot import record_bytes, snapshot
from rtlab.errors import RtlabError
from rtlab.results.store import Store
from rtlab.runner.importer import import_jsonl
from rtlab.runner.tracing import fetch_capture, remove_on_board

_RAW = re.compile(r"(?P<id>[0-9A-Za-z_-]+)(\.[0-9]+-[A-Za-z0-9_.-]+)?\.jsonl\Z")
_TRACE = re.compile(r"[0-9A-Za-z_-]+\.[0-9]+-[A-Za-z0-9_.-]+\.trace(\.p[0-9]+)?\Z")
MAX_FILE = 1 << 30  # a kept raw file of a long run can be large


@dataclass
class FetchReport:
    imported: list[str] = field(default_factory=list)
    already: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)
    copied: list[str] = field(default_factory=list)


def fetch_runs(transport: Any, store: Store, command_line: list[str] | None = None
               ) -> FetchReport:
    """Copy the board's kept raw files into the store and import the runs not stored."""

    runs_dir = transport.board.runs_dir
    recs = snapshot(transport, [f"{runs_dir}/*.jsonl"], timeout_s=600.0, max_file=MAX_FILE,
                    max_total=64 * MAX_FILE)
    files = [r for r in recs if r.get("type") == "file"]
    bad = [r for r in recs if r.get("type") == "error"]
    if bad:
        raise RtlabError(f"cannot read {bad[0].get('path')} on {transport.target}: "
                         f"{bad[0].get('error')}")
    report = FetchReport()
    by_run: dict[str, list[Path]] = {}
    dest_dir = store.runs_dir
    dest_dir.mkdir(parents=True, exist_ok=True)
    for rec in files:
        name = str(rec["path"]).rsplit("/", 1)[-1]
        m = _RAW.match(name)
        if m is None:
            continue
        if rec.get("truncated"):
            report.failed.append((name, "too large to fetch"))
            continue
        run_id = m.group("id")
        if store.exists(run_id):
            if run_id not in report.already:
                report.already.append(run_id)
            continue
        data = record_bytes(rec)
        dest = dest_dir / name
        if not dest.exists() or dest.stat().st_size < len(data):
            dest.write_bytes(data)  # the board's copy goes on where the host's stopped
            report.copied.append(name)
        by_run.setdefault(run_id, []).append(dest)
    for run_id, paths in sorted(by_run.items()):
        first = min(paths, key=lambda p: (p.name.count("."), p.name))
        fetched = _fetch_traces(transport, runs_dir, run_id, dest_dir, report)
        try:
            import_jsonl(first, store, command_line, transport=transport)
            report.imported.append(run_id)
        except RtlabError as exc:
            report.failed.append((run_id, exc.message))
            continue
        for path in fetched:  # home and stored: the board's runs directory is often RAM
            remove_on_board(transport, path)
    return report


def _fetch_traces(transport: Any, runs_dir: str, run_id: str, dest_dir: Path,
                  report: FetchReport) -> list[str]:
    """Copy one run's trace captures, samples and gap lists from the board into
    `dest_dir`, where the import finds them beside the raw files (bounded reads); the
    board's paths copied. What cannot be copied stays on the board and is reported."""
    recs = snapshot(transport, [f"{runs_dir}/{run_id}.*.trace*/meta.json",
                                f"{runs_dir}/{run_id}.*.samples",
                                f"{runs_dir}/{run_id}.*.gaps.json"],
                    timeout_s=600.0, max_file=MAX_FILE, max_total=64 * MAX_FILE)
    fetched: list[str] = []
    for rec in recs:
        path = str(rec.get("path", ""))
        if rec.get("type") == "error":
            report.failed.append((path.rsplit("/", 1)[-1] or run_id,
                                  f"cannot read on {transport.target}: {rec.get('error')}"))
            continue
        if rec.get("type") != "file":
            continue
        if path.endswith("/meta.json"):  # a capture directory: all its files
            path = path.removesuffix("/meta.json")
            name = path.rsplit("/", 1)[-1]
            if _TRACE.fullmatch(name) is None or not name.startswith(run_id + "."):
                continue
            try:
                fetch_capture(transport, path, dest_dir / name, remove=False)
            except RtlabError as exc:
                report.failed.append((name, f"trace capture not fetched: {exc.message}"))
                continue
        else:
            name = path.rsplit("/", 1)[-1]
            if rec.get("truncated"):
                report.failed.append((name, "too large to fetch"))
                continue
            (dest_dir / name).write_bytes(record_bytes(rec))
        report.copied.append(name)
        fetched.append(path)
    return fetched
