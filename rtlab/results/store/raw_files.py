# SPDX-License-Identifier: MIT
"""The raw files of a run kept beside its row: engine output, phase layout, trace capture
and samples, in the raw directory `runs/` (an SQLite store), or in the store's own tables
(a server database, for the runs copied into it), in compressed pieces with a digest.
"""

from __future__ import annotations

import glob
import hashlib
import os
import re
import zlib
from collections.abc import Iterable, Iterator
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rtlab.errors import RtlabError
from rtlab.results.store.schema import Database, remove_stale_parts

RAW_CHUNK_BYTES = 4 << 20  # raw files kept in a database are stored in pieces of this size
# A raw file's name relative to the raw directory: the run id, a dot, then a file name or
# a directory's (a trace capture: `ID.1-main.trace/cpu0.pages`); never `..`, never absolute
_RAW_NAME = re.compile(r"[A-Za-z0-9_-]+\.[A-Za-z0-9_.-]*(/[A-Za-z0-9_-][A-Za-z0-9_.-]*)*")


@dataclass(frozen=True)
class RawFile:
    """One raw file of a run (engine output, phase layout, trace capture and samples),
    named relative to the raw directory (`ID.jsonl`, `ID.1-main.trace/cpu0.pages`)."""

    name: str
    size: int
    in_database: bool  # kept in the store's database (copied there), else in runs/


def file_pieces(path: Path) -> Iterator[bytes]:
    """The content of the file `path`, piece by piece (bounded memory)."""
    with open(path, "rb") as f:
        while piece := f.read(RAW_CHUNK_BYTES):
            yield piece


class RawFiles(Database):
    """Listing, reading and writing a run's raw files."""

    @property
    def keeps_raw_in_database(self) -> bool:
        """Where copied raw files go: a server database keeps them in its tables (every
        machine reaches them); an SQLite store in its raw directory beside the file."""
        return self._engine.dialect.name != "sqlite"

    def raw_files(self, run_id: str) -> list[RawFile]:
        """The raw files of a run: those kept in the database (copied there), then those in
        the raw directory (`ID.*`, files and the files of directories such as a trace
        capture) that the database does not hold."""
        from sqlalchemy import select

        found: dict[str, RawFile] = {}
        files = self._tables["run_files"]
        if self._readable():
            with self._guard("read"), self._engine.connect() as conn:
                if self._has_copy_tables(conn):
                    for r in conn.execute(select(files.c.name, files.c.size)
                                          .where(files.c.run_id == run_id)
                                          .order_by(files.c.name)):
                        found[r.name] = RawFile(r.name, int(r.size), True)
        for path in sorted(self.runs_dir.glob(f"{glob.escape(run_id)}.*")):
            inner = sorted(p for p in path.rglob("*")) if path.is_dir() else [path]
            for p in inner:
                name = p.relative_to(self.runs_dir).as_posix()
                if (p.is_file() and not p.is_symlink() and name not in found
                        and _RAW_NAME.fullmatch(name)):
                    found[name] = RawFile(name, p.stat().st_size, False)
        return sorted(found.values(), key=lambda f: f.name)

    def read_raw(self, run_id: str, raw: RawFile) -> Iterator[bytes]:
        """The content of one of `raw_files(run_id)`, piece by piece (bounded memory); a
        file kept in the database is checked against its digest."""
        if not raw.in_database:
            try:
                yield from file_pieces(self.runs_dir / raw.name)
            except OSError as exc:
                raise RtlabError(f"cannot read the raw file {self.runs_dir / raw.name} of run "
                                 f"{run_id}: {exc.strerror or exc}") from exc
            return
        from sqlalchemy import select

        files, chunks = self._tables["run_files"], self._tables["run_file_chunks"]
        with self._guard("read"), self._engine.connect() as conn:
            want = conn.execute(select(files.c.sha256, files.c.chunks).where(
                files.c.run_id == run_id, files.c.name == raw.name)).one()
            digest = hashlib.sha256()
            for index in range(want.chunks):  # one piece in memory at a time
                data = conn.execute(select(chunks.c.data).where(
                    chunks.c.run_id == run_id, chunks.c.name == raw.name,
                    chunks.c.chunk == index)).scalar()
                piece = zlib.decompress(data) if data is not None else b""
                digest.update(piece)
                yield piece
        if digest.hexdigest() != want.sha256:
            raise RtlabError(f"the raw file {raw.name} of run {run_id} in {self.display} is "
                             "damaged (its content does not match its digest)")

    def _remove_raw(self, paths: list[Path]) -> None:
        for path in paths:
            with suppress(OSError):
                path.unlink(missing_ok=True)
                if path.parent != self.runs_dir:  # a capture directory
                    path.parent.rmdir()

    def _insert_raw(self, conn: Any, run_id: str, name: str, content: Iterable[bytes]) -> None:
        chunks = self._tables["run_file_chunks"]
        digest, size, index = hashlib.sha256(), 0, 0
        for piece in _pieces(content):
            digest.update(piece)
            size += len(piece)
            conn.execute(chunks.insert().values(run_id=run_id, name=name, chunk=index,
                                                data=zlib.compress(piece, 6)))
            index += 1
        conn.execute(self._tables["run_files"].insert().values(
            run_id=run_id, name=name, size=size, sha256=digest.hexdigest(), chunks=index))

    def _write_raw_file(self, run_id: str, name: str, content: Iterable[bytes]) -> bool:
        """Write a raw file into the raw directory: complete under a hidden name, then
        renamed. A file of that name that holds the same content, or the beginning of it
        (the copy of a run whose own writing stopped), is kept or completed; one with
        other content is never replaced. True when the file was not there before."""
        dest = self.runs_dir / name
        part = dest.with_name(f".{dest.name}.{os.getpid()}.part")
        try:
            dest.parent.mkdir(parents=True, exist_ok=True)
            remove_stale_parts(dest)
            with open(part, "wb") as out:
                for piece in content:
                    out.write(piece)
            existed = dest.exists()
            if existed:
                if not _is_prefix(dest, part):
                    raise RtlabError(
                        f"run {run_id} not copied: its raw file {dest} is already there with "
                        "other content (a different run with the same id?)",
                        hint="move that file away if it is not needed")
                if dest.stat().st_size == part.stat().st_size:
                    return False
            os.replace(part, dest)
            return not existed
        except OSError as exc:
            raise RtlabError(f"cannot write the raw file {dest} of run {run_id}: "
                             f"{exc.strerror or exc}") from exc
        finally:
            part.unlink(missing_ok=True)


def check_raw_name(run_id: str, name: str) -> None:
    """A raw file name from another store stays inside the raw directory and names its
    own run: never absolute, never `..`, always `ID.`..."""
    if not (name.startswith(f"{run_id}.") and _RAW_NAME.fullmatch(name)):
        raise RtlabError(f"run {run_id}: refusing the raw file name {name!r} (not a raw file "
                         "of this run)")


def _pieces(content: Iterable[bytes]) -> Iterator[bytes]:
    """`content` in pieces of RAW_CHUNK_BYTES (the last one shorter; none when empty)."""
    buf = bytearray()
    for data in content:
        buf += data
        while len(buf) >= RAW_CHUNK_BYTES:
            yield bytes(buf[:RAW_CHUNK_BYTES])
            del buf[:RAW_CHUNK_BYTES]
    if buf:
        yield bytes(buf)


def _is_prefix(path: Path, of: Path) -> bool:
    """Whether the file `path` holds the beginning of (or all of) the file `of`."""
    with open(path, "rb") as a, open(of, "rb") as b:
        while block := a.read(1 << 20):
            if b.read(len(block)) != block:
                return False
    return True
