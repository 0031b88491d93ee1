# SPDX-License-Identifier: MIT
"""Storing a run together with its raw files in one step: a run copied from another
store (`rtlab results push|pull`, policy in rtlab.results.sync) and a new run with its
raw engine output. A store never holds a run without its raw files.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Callable, Iterable
from pathlib import Path

from rtlab.errors import RtlabError
from rtlab.results.model import RunResult
from rtlab.results.shape import ShapeOf
from rtlab.results.store.raw_files import RawFile, RawFiles, check_raw_name, file_pieces
from rtlab.results.store.runs import (
    RunRows,
    StoredRun,
    content_digest,
    refuse_inconsistent,
    row_common,
    row_values,
)


class Copying(RunRows, RawFiles):
    """Storing a run and its raw files in one step."""

    def add_copy(self, run: StoredRun, files: Iterable[tuple[RawFile, Callable[[],
                 Iterable[bytes]]]], shape_of: ShapeOf) -> bool:
        """Store a run copied from another store, with its raw files (`RawFile`, and a
        function returning its content), unless its id is stored already: then False, and
        nothing changed. `shape_of`: as for `add`. The run is validated like any other
        (`add`); its JSON is stored as it came, so both stores hold the same content
        (`digests`).

        A database that keeps raw files stores the run and its raw files in one
        transaction: a copy interrupted at any point leaves nothing of the run. An SQLite
        store writes the raw files (each complete, then renamed into place) before the
        transaction that stores the run, so a run it holds always has its raw files; a
        copy that fails takes back the files it wrote, one killed (kill -9) may leave raw
        files of a run the store does not hold, which the next copy of that run finds
        identical and keeps."""
        from sqlalchemy.exc import IntegrityError

        result = run.result()
        if result.run_id != run.run_id:
            raise RtlabError(f"run {run.run_id}: the stored result names run {result.run_id}")
        refuse_inconsistent(result)
        row = row_values(result, shape_of(result.probe)) | {"created": run.created}
        blob = zlib.compress(run.text, 6)
        self._ensure_schema()
        if self.exists(run.run_id):
            return False
        self._ensure_copy_tables()
        files = list(files)
        for raw, _ in files:
            check_raw_name(run.run_id, raw.name)
        created: list[Path] = []  # raw files this copy put into the raw directory
        try:
            if not self.keeps_raw_in_database:
                for raw, content in files:
                    if self._write_raw_file(run.run_id, raw.name, content()):
                        created.append(self.runs_dir / raw.name)
            with self._guard("store"), self._write_transaction() as conn:
                conn.execute(self._tables["runs"].insert().values(**row, result_z=blob))
                conn.execute(self._tables["run_digests"].insert().values(
                    id=run.run_id, sha256=run.digest))
                if self.keeps_raw_in_database:
                    for raw, content in files:
                        self._insert_raw(conn, run.run_id, raw.name, content())
        except RtlabError as exc:
            if isinstance(exc.__cause__, IntegrityError) and self.exists(run.run_id):
                # another process stored it first: raw files written here are its raw
                # files only if it has the same content
                if self.digests([run.run_id]).get(run.run_id) != run.digest:
                    self._remove_raw(created)
                return False
            self._remove_raw(created)  # the run is not stored: neither are its files
            raise
        except BaseException:
            self._remove_raw(created)
            raise
        return True

    def add_with_raw(self, result: RunResult, raw: Path, shape_of: ShapeOf) -> bool:
        """Store a new run together with its raw engine output (`ID.jsonl`), as
        `add_copy` does: kept in the database when the store keeps raw files there (a
        lab's PostgreSQL), else written into the raw directory before the run's
        transaction, so a stored run always has its raw file. False, and nothing changed,
        when the id is stored already."""
        text = json.dumps(result.to_dict(packed=True), separators=(",", ":")).encode()
        run = StoredRun(result.run_id, row_common(result)["created"], text,
                        content_digest(text))
        run.__dict__["_result"] = result  # no need to read back what was just written
        try:
            size = raw.stat().st_size
        except OSError as exc:
            raise RtlabError(f"cannot read the raw output {raw} of run {result.run_id}: "
                             f"{exc.strerror or exc}") from exc
        return self.add_copy(run, [(RawFile(f"{result.run_id}.jsonl", size, False),
                                    lambda: file_pieces(raw))], shape_of)
