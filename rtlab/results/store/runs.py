# SPDX-License-Identifier: MIT
"""The stored runs: one row per run (its queryable metadata beside the whole result as
compressed JSON), stored in one transaction and never overwritten; listed, found by id
prefix, read back, and read as stored (text and content digest) for copying.
"""

from __future__ import annotations

import hashlib
import json
import shlex
import zlib
from collections.abc import Collection, Iterator
from dataclasses import dataclass, fields, replace
from datetime import UTC, datetime
from typing import Any

from rtlab.errors import RtlabError, UsageError
from rtlab.results.model import RunResult, load_result, new_run_id
from rtlab.results.shape import ResultShape, ShapeOf
from rtlab.results.store.location import db_error
from rtlab.results.store.schema import Database
from rtlab.results.validate import first_problem
from rtlab.textfmt import shown

_IN_BATCH = 500  # ids per `IN (...)` query


@dataclass(frozen=True)
class RunRow:
    """The queryable metadata of one stored run."""

    id: str
    created: datetime
    host: str | None
    kernel_release: str | None
    preempt: str | None
    probe: str
    scenario: str | None
    status: str
    partial: bool
    rt_valid: bool | None
    duration_ns: int | None
    samples: int
    worst_max_ns: int | None
    p99_ns: int | None
    p9999_ns: int | None


@dataclass(frozen=True)
class StoredRun:
    """A stored run as its store holds it, for copying to another store: the result's JSON
    text exactly as stored and the digest of that text (equal digests: equal content)."""

    run_id: str
    created: datetime
    text: bytes
    digest: str

    def result(self) -> RunResult:
        """The result read from the text (once: a long run's takes seconds to read)."""
        cached = self.__dict__.get("_result")
        if cached is None:
            try:
                data = json.loads(self.text)
            except ValueError as exc:
                raise RtlabError(f"stored run {self.run_id} is damaged: {exc}") from exc
            cached = load_result(data)
            object.__setattr__(self, "_result", cached)
        return cached


def content_digest(text: bytes) -> str:
    """sha256 of a result's JSON text as stored: two stores hold the same run when the
    digests are equal (a copy stores the text unchanged)."""
    return hashlib.sha256(text).hexdigest()


def as_utc(value: datetime) -> datetime:
    """Timezone-aware UTC: SQLite returns naive UTC, PostgreSQL the session's zone."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class RunRows(Database):
    """Storing and reading the rows of runs."""

    def new_id(self) -> str:
        for _ in range(100):
            run_id = new_run_id()
            if not self.exists(run_id) and not self.raw_path(run_id).exists():
                return run_id
        raise RtlabError("cannot find a free run id")  # pragma: no cover

    def exists(self, run_id: str) -> bool:
        from sqlalchemy import select

        if not self._readable():
            return False
        runs = self._tables["runs"]
        with self._guard("read"), self._engine.connect() as conn:
            return conn.execute(select(runs.c.id).where(runs.c.id == run_id)).first() is not None

    def add(self, result: RunResult, shape_of: ShapeOf) -> None:
        """Store a run (one transaction); `shape_of` gives its probe's result shape (the
        summary columns are its headline's: rtlab.probes.registry.shape). Refuses to
        overwrite a run with the same id, also when another process stores it at the same
        moment."""
        from sqlalchemy.exc import IntegrityError, SQLAlchemyError

        refused = RtlabError(f"run {result.run_id} is already stored in {self.display}; "
                             "stored runs are never overwritten")
        refuse_inconsistent(result)
        row = row_values(result, shape_of(result.probe))
        text = json.dumps(result.to_dict(packed=True), separators=(",", ":"))
        blob = zlib.compress(text.encode(), 6)
        try:
            self._ensure_schema()
            self._ensure_host_index()
            if self.exists(result.run_id):
                raise refused
            digests = self._copy_tables_or_none()
            with self._engine.begin() as conn:
                conn.execute(self._tables["runs"].insert().values(**row, result_z=blob))
                if digests:
                    conn.execute(self._tables["run_digests"].insert().values(
                        id=result.run_id, sha256=content_digest(text.encode())))
        except IntegrityError as exc:
            if self.exists(result.run_id):
                raise refused from exc
            raise self._not_stored(result, exc) from exc
        except SQLAlchemyError as exc:
            raise self._not_stored(result, exc) from exc
        except RtlabError as exc:
            if exc is refused:
                raise
            raise self._not_stored(result, exc) from exc

    def _not_stored(self, result: RunResult, exc: Exception) -> RtlabError:
        """The store failed while saving a run: say where its raw output still is."""
        from sqlalchemy.exc import SQLAlchemyError

        err = (db_error(exc, "store", self.display) if isinstance(exc, SQLAlchemyError)
               else exc if isinstance(exc, RtlabError) else RtlabError(str(exc)))
        raw = self.raw_path(result.run_id)
        again = f"rtlab results import {shlex.quote(str(raw))} --store {shlex.quote(self.display)}"
        where = (f"; the raw output is kept in {raw} (`{again}` when the store works again)"
                 if raw.exists() else "")
        return RtlabError(f"run {result.run_id} was NOT stored: {err.message}{where}",
                          hint=err.hint)

    def count(self) -> int:
        """How many runs the store holds (without reading their rows)."""
        from sqlalchemy import func, select

        if not self._readable():
            return 0
        with self._guard("read"), self._engine.connect() as conn:
            return int(conn.execute(select(func.count()).select_from(
                self._tables["runs"])).scalar_one())

    def list(self, limit: int | None = 20) -> list[RunRow]:
        """Newest first. `created` is timezone-aware UTC whatever the database returns."""
        from sqlalchemy import select

        runs = self._tables["runs"]
        cols = [runs.c[f.name] for f in fields(RunRow)]
        query = select(*cols).order_by(runs.c.created.desc(), runs.c.seq.desc())
        if not self._readable():
            return []
        if limit is not None:
            query = query.limit(limit)
        with self._guard("read"), self._engine.connect() as conn:
            rows = [RunRow(**dict(r._mapping)) for r in conn.execute(query)]
        return [replace(r, created=as_utc(r.created)) for r in rows]

    def resolve(self, ref: str) -> str:
        """Run id from a unique id prefix or `last` (case-sensitive on every database)."""
        from sqlalchemy import func, select

        runs = self._tables["runs"]
        if ref == "last":
            rows = self.list(limit=1)
            if not rows:
                raise UsageError(f"no runs stored in {self.display}", hint="run `rtlab run` first")
            return rows[0].id
        if not ref or not all(c.isalnum() or c in "-_" for c in ref):
            raise UsageError(f"invalid run id {shown(ref)}")
        # substr, not LIKE: `_` is a LIKE wildcard and SQLite's LIKE ignores case. A whole
        # id is looked up first, through the index (a prefix reads every row's id: 40 ms
        # per run in a lab's store of 438,000, for each run a command reads)
        prefix = func.substr(runs.c.id, 1, len(ref)) == ref
        ids: list[str] = []
        if self._readable():
            with self._guard("read"), self._engine.connect() as conn:
                if conn.execute(select(runs.c.id).where(runs.c.id == ref)).first():
                    return ref
                ids = [r[0] for r in conn.execute(select(runs.c.id).where(prefix).limit(6))]
        if ref in ids:
            return ref
        if not ids:
            raise UsageError(f"no stored run matches {ref!r}", hint="see `rtlab results list`")
        if len(ids) > 1:
            some = ", ".join(ids[:5])
            raise UsageError(f"run id prefix {ref!r} is ambiguous ({some})",
                             hint="give more characters")
        return ids[0]

    def get(self, ref: str) -> RunResult:
        from sqlalchemy import select

        run_id = self.resolve(ref)
        runs = self._tables["runs"]
        with self._guard("read"), self._engine.connect() as conn:
            blob = conn.execute(select(runs.c.result_z).where(runs.c.id == run_id)).scalar_one()
        try:
            data = json.loads(zlib.decompress(blob))
        except (zlib.error, ValueError) as exc:
            raise RtlabError(f"stored run {run_id} is damaged: {exc}") from exc
        return load_result(data)

    # what copying between stores reads (rtlab.results.sync) -------------------------------
    def _of(self, query: Any, hosts: Collection[str], probes: Collection[str]) -> Any:
        """`query` narrowed to these hosts and probes (none given: all)."""
        runs = self._tables["runs"]
        if hosts:
            query = query.where(runs.c.host.in_(sorted(hosts)))
        if probes:
            query = query.where(runs.c.probe.in_(sorted(probes)))
        return query

    def select(self, *, ids: Collection[str] | None = None, hosts: Collection[str] = (),
               probes: Collection[str] = (), since: datetime | None = None,
               until: datetime | None = None) -> list[RunRow]:
        """The stored runs matching every given criterion, oldest first (`since`: started
        at or after it; `until`: started before it)."""
        from sqlalchemy import select

        runs = self._tables["runs"]
        cols = [runs.c[f.name] for f in fields(RunRow)]
        query = select(*cols).order_by(runs.c.created, runs.c.seq)
        query = self._of(query, hosts, probes)
        if since is not None:
            query = query.where(runs.c.created >= self._as_column_time(since))
        if until is not None:
            query = query.where(runs.c.created < self._as_column_time(until))
        rows: list[RunRow] = []
        if not self._readable():
            return rows
        with self._guard("read"), self._engine.connect() as conn:
            for batch in [None] if ids is None else _batches(sorted(set(ids))):
                q = query if batch is None else query.where(runs.c.id.in_(batch))
                rows += [RunRow(**dict(r._mapping)) for r in conn.execute(q)]
        rows = [replace(r, created=as_utc(r.created)) for r in rows]
        if ids is not None:
            rows.sort(key=lambda r: r.created)
        return rows

    def _as_column_time(self, when: datetime) -> datetime:
        when = as_utc(when)
        if self._engine.dialect.name == "sqlite":  # stored as naive UTC text
            when = when.replace(tzinfo=None)
        return when

    def longest_ns(self, *, hosts: Collection[str] = (), probes: Collection[str] = ()
                   ) -> int | None:
        """The longest `duration_ns` of the matching runs (None: no run, or none with a
        known duration), so that a query for the runs overlapping a time can be bounded
        on the start time, which the store indexes."""
        from sqlalchemy import func, select

        runs = self._tables["runs"]
        query = select(func.max(runs.c.duration_ns))
        query = self._of(query, hosts, probes)
        if not self._readable():
            return None
        with self._guard("read"), self._engine.connect() as conn:
            value = conn.execute(query).scalar()
        return None if value is None else int(value)

    def unknown_durations(self, *, hosts: Collection[str] = (), probes: Collection[str] = ()
                          ) -> bool:
        """Whether a matching run has no known duration (an invalid run's)."""
        from sqlalchemy import select

        runs = self._tables["runs"]
        query = select(runs.c.seq).where(runs.c.duration_ns.is_(None)).limit(1)
        query = self._of(query, hosts, probes)
        if not self._readable():
            return False
        with self._guard("read"), self._engine.connect() as conn:
            return conn.execute(query).first() is not None

    def digests(self, ids: Collection[str]) -> dict[str, str]:
        """The content digest (`content_digest` of the result as stored) of each of `ids`
        that is stored; runs stored by an rtlab without digests get theirs computed."""
        from sqlalchemy import select

        runs, digests = self._tables["runs"], self._tables["run_digests"]
        found: dict[str, str] = {}
        if not self._readable():
            return found
        with self._guard("read"), self._engine.connect() as conn:
            has_digests = self._has_copy_tables(conn)
            for batch in _batches(sorted(set(ids))):
                stored = {r[0] for r in conn.execute(select(runs.c.id)
                                                     .where(runs.c.id.in_(batch)))}
                if has_digests and stored:
                    found.update((r[0], r[1]) for r in conn.execute(
                        select(digests.c.id, digests.c.sha256)
                        .where(digests.c.id.in_(sorted(stored)))))
                for run_id in sorted(stored - found.keys()):
                    blob = conn.execute(select(runs.c.result_z)
                                        .where(runs.c.id == run_id)).scalar_one()
                    found[run_id] = content_digest(_decompress(run_id, blob))
        return found

    def stored(self, run_id: str) -> StoredRun:
        """A stored run exactly as stored (its JSON text), for copying to another store."""
        from sqlalchemy import select

        runs = self._tables["runs"]
        row = None
        if self._readable():
            with self._guard("read"), self._engine.connect() as conn:
                row = conn.execute(select(runs.c.created, runs.c.result_z)
                                   .where(runs.c.id == run_id)).first()
        if row is None:
            raise UsageError(f"no stored run {run_id!r} in {self.display}")
        text = _decompress(run_id, row.result_z)
        return StoredRun(run_id, as_utc(row.created), text, content_digest(text))


def _decompress(run_id: str, blob: bytes) -> bytes:
    try:
        return zlib.decompress(blob)
    except zlib.error as exc:
        raise RtlabError(f"stored run {run_id} is damaged: {exc}") from exc


def _batches(ids: list[str]) -> Iterator[list[str]]:
    for i in range(0, len(ids), _IN_BATCH):
        yield ids[i:i + _IN_BATCH]


def refuse_inconsistent(result: RunResult) -> None:
    """The last guard: a result whose numbers contradict each other is stored only as
    `invalid` (callers check first: imports refuse it, live runs mark it)."""

    if result.status != "invalid":
        why = first_problem(result)
        if why is not None:
            raise RtlabError(f"run {result.run_id} not stored: its numbers contradict each "
                             f"other ({why})")


def row_values(result: RunResult, shape: ResultShape) -> dict[str, Any]:
    """The `runs` row of a result (but its `result_z`); `shape`: its probe's result shape,
    whose headline channels give the summary columns."""
    if result.status == "invalid":  # no summary column from numbers that failed validation
        return row_common(result) | {"duration_ns": None, "samples": 0, "worst_max_ns": None,
                                     "p99_ns": None, "p9999_ns": None}
    merged = result.merged(shape)
    summary = merged.summary((99.0, 99.99))
    return row_common(result) | {
        "duration_ns": result.elapsed_ns,
        "samples": merged.samples,
        "worst_max_ns": merged.max_ns,
        "p99_ns": summary.p(99.0),
        "p9999_ns": summary.p(99.99),
    }


def row_common(result: RunResult) -> dict[str, Any]:
    """The columns of a result's row that do not come from its numbers."""
    system = result.system
    host = result.provenance.get("host", {})
    created = host.get("start_wall")
    try:
        created_dt = datetime.fromisoformat(created) if created else datetime.now(UTC)
    except (TypeError, ValueError):
        created_dt = datetime.now(UTC)
    # UTC always: SQLite's DATETIME drops the offset, PostgreSQL reads a naive time in the
    # session's time zone. A time without an offset is UTC (rtlab writes UTC).
    return {
        "id": result.run_id,
        "created": as_utc(created_dt),
        "host": system.get("hostname") or host.get("hostname"),
        "kernel_release": system.get("release"),
        "preempt": system.get("preempt"),
        "probe": result.probe,
        "scenario": result.scenario.get("name"),
        "scenario_hash": result.scenario.get("hash"),
        "status": result.status,
        "partial": result.partial,
        "rt_valid": result.rt_valid,
        "result_version": result.version,
    }
