# SPDX-License-Identifier: MIT
"""The result store: one row per run in an SQL database (SQLite by default, PostgreSQL).

Location: `--store` (a file path or a database URL), else $RTLAB_STORE, else
`${XDG_DATA_HOME:-~/.local/share}/rtlab/rtlab.db`. Raw engine output (JSON Lines,
written while a run is going) lives in `runs/` beside an SQLite file (for a server
URL: in the XDG data directory). A stored run is never overwritten. Several
processes may write to one store at once: each run is one transaction, the schema
is created under a lock. See docs/results.md.

Runs are copied between two stores (`rtlab results push|pull`, policy in
rtlab.results.sync) through `select`, `digests`, `stored`, `raw_files`, `read_raw` and
`add_copy`: one transaction per run; a server database keeps the raw files of the runs
copied into it in its own tables.

Opening a store changes nothing (`Store.open`): a location that is not an rtlab store
(an empty file, any other file, someone else's database, a FIFO, a device, a
memory-only database) is refused in one line before a byte is written to it. A new
SQLite file and the tables of an empty database are created at the first write (a run
stored), never by opening, so a command that fails before it stores leaves nothing; the
commands that only read open the store read-only.

SQLAlchemy and the database driver are imported only when a store is opened; a
`postgresql://` URL uses psycopg 3 (`pip install 'rtlab[postgres]'`).
"""

from __future__ import annotations

import glob
import hashlib
import json
import logging
import os
import re
import shlex
import stat
import threading
import zlib
from collections.abc import Callable, Collection, Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, fields, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

from rtlab.errors import RtlabError, UsageError
from rtlab.fileio import PATH_SHOWN, PSEUDO_FS, fs_type, kind_of
from rtlab.results.model import RunResult, load_result, new_run_id
from rtlab.results.validate import first_problem
from rtlab.textfmt import shown

# SQLAlchemy's pool logs what fails in its own clean-up (a connection that cannot be
# closed after an interrupt) with a traceback, which logging's last resort would print:
# rtlab reports database errors itself, as one line
logging.getLogger("sqlalchemy").addHandler(logging.NullHandler())

ENV_VAR = "RTLAB_STORE"
STORE_SCHEMA_VERSION = 1
RAW_CHUNK_BYTES = 4 << 20  # raw files kept in a database are stored in pieces of this size
_IN_BATCH = 500  # ids per `IN (...)` query
_COPY_TABLES = ("run_digests", "run_files", "run_file_chunks")
# A raw file's name relative to the raw directory: the run id, a dot, then a file name or
# a directory's (a trace capture: `ID.1-main.trace/cpu0.pages`); never `..`, never absolute
_RAW_NAME = re.compile(r"[A-Za-z0-9_-]+\.[A-Za-z0-9_.-]*(/[A-Za-z0-9_-][A-Za-z0-9_.-]*)*")
CONNECT_TIMEOUT_S = 10  # a server that does not answer: fail instead of hanging
# How long an SQLite writer waits for another process's write transaction (sqlite3's
# default is 5 s; several monitors and pushes into one file can queue for longer).
SQLITE_BUSY_TIMEOUT_S = 60
_SCHEMA_LOCK_KEY = 0x72746C6162  # PostgreSQL advisory lock serialising schema creation
_DRIVER_HINT = ("install it into rtlab's environment: pip install 'psycopg>=3.1' "
                "(scripts/setup.sh does that), or use a SQLite file")
_SQLITE_MAGIC = b"SQLite format 3\x00"  # the first 16 bytes of every SQLite database
_NEW_PATH_HINT = ("name a new path (rtlab creates the store when it first stores a run), "
                  "or remove the file if it is not needed")
_OTHER_PATH_HINT = "name a file path (rtlab creates the store when it first stores a run)"
_READ_HINT = "give the path of an rtlab store, or the URL of its database"
_CREATING = threading.Lock()  # threads of one process creating a new SQLite file
_LIBPQ_HINT = ("install libpq: apt-get install libpq5 (scripts/setup.sh does that), "
               "or pip install 'psycopg[binary]'")


def _path(text: str) -> str:
    """A store path or URL as a message quotes it (cut only when very long)."""
    return shown(text, PATH_SHOWN)


def default_data_dir(env: dict[str, str] | None = None) -> Path:
    environ = os.environ if env is None else env
    base = environ.get("XDG_DATA_HOME") or str(
        Path(environ.get("HOME", "~")).expanduser() / ".local" / "share")
    return Path(base) / "rtlab"


def resolve_location(store: str | None, env: dict[str, str] | None = None) -> str:
    """The store as given (`--store`), else $RTLAB_STORE, else the XDG default path."""
    environ = os.environ if env is None else env
    return store or environ.get(ENV_VAR) or str(default_data_dir(environ) / "rtlab.db")


def location_name(store: str | None, env: dict[str, str] | None = None) -> str:
    """How a message names where the store came from: `--store`, `$RTLAB_STORE` or the
    default store (as `resolve_location` chose)."""
    environ = os.environ if env is None else env
    return "--store" if store else f"${ENV_VAR}" if environ.get(ENV_VAR) else "the default store"


class NoStoreError(UsageError):
    """A command that only reads was given a store file that does not exist."""


class StoreUnreachableError(RtlabError):
    """The database server does not answer (it may later): exit 1."""


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


@dataclass(frozen=True)
class RawFile:
    """One raw file of a run (engine output, phase layout, trace capture and samples),
    named relative to the raw directory (`ID.jsonl`, `ID.1-main.trace/cpu0.pages`)."""

    name: str
    size: int
    in_database: bool  # kept in the store's database (copied there), else in runs/


def content_digest(text: bytes) -> str:
    """sha256 of a result's JSON text as stored: two stores hold the same run when the
    digests are equal (a copy stores the text unchanged)."""
    return hashlib.sha256(text).hexdigest()


class Store:
    """Open with `Store.open(location)`; SQLAlchemy is imported only here."""

    def __init__(self, url: Any, runs_dir: Path, display: str,
                 engine_args: dict[str, Any] | None = None, *, create: bool = True,
                 name: str = "--store", identity: str | None = None,
                 new_file: Path | None = None) -> None:
        """`url`: an SQLAlchemy URL (string or object); `display`: how messages name it;
        `name`: where it came from (`--store`, `$RTLAB_STORE`, ...); `create`: a command
        that stores (else one that only reads); `new_file`: the SQLite file that does not
        exist yet (created at the first write). Opening only reads: a database that is
        not an rtlab store is refused before anything is written to it."""
        from sqlalchemy import create_engine
        from sqlalchemy.exc import ArgumentError, NoSuchModuleError

        self.url = url
        self.runs_dir = runs_dir
        self.display = display
        self.identity = identity or str(url)  # two Store objects of one store: equal
        self._name = name
        self._create = create
        self._new_file = new_file
        # directories that a run's raw files may create and that `close` takes back when
        # they stayed empty (nothing was stored)
        self._missing_dirs = _missing_dirs(runs_dir) if create else []
        try:
            self._engine = create_engine(url, **(engine_args or {}))
        except NoSuchModuleError:
            scheme = str(url).split("://", 1)[0]
            raise UsageError(f"unknown database type {scheme!r} in the store URL {display}",
                             hint="give a file path (SQLite) or postgresql://USER@HOST/DB"
                             ) from None
        except ImportError as exc:  # the dialect's driver (psycopg) or its libpq
            raise _driver_error(exc, display) from None
        except (ArgumentError, ValueError) as exc:
            raise UsageError(f"invalid store URL {display}: {_first_line(exc)}") from None
        self._tables = _tables()
        self._ready = False  # rtlab's tables and layout version are there
        if new_file is None:
            try:
                with self._guard("open"):
                    self._ready = self._inspect()
            except BaseException:
                self._engine.dispose()
                raise

    @contextmanager
    def _guard(self, doing: str) -> Iterator[None]:
        """Database errors become one-line RtlabErrors naming the store (never the password)."""
        from sqlalchemy.exc import SQLAlchemyError

        try:
            yield
        except SQLAlchemyError as exc:
            raise _db_error(exc, doing, self.display) from exc

    def _inspect(self) -> bool:
        """Read (only) what the database holds: True for rtlab's complete tables, False
        for an empty database (the store is created at the first write); someone else's
        tables or another layout version are refused."""
        with self._engine.connect() as conn:
            tables, version = _layout(conn, self._tables)
        self._check_layout(tables, version)
        if tables:
            self._check_columns()
        return version is not None

    def _check_layout(self, tables: set[str] | None, version: str | None) -> None:
        if tables and not {"runs", "store_info"} <= tables:
            names = ", ".join(sorted(tables)[:4]) + (", ..." if len(tables) > 4 else "")
            what = ("an SQLite database" if self._engine.dialect.name == "sqlite"
                    else "a database")
            raise UsageError(
                f"{self._name} {_path(self.display)} is {what} that is not an rtlab store "
                f"(its tables: {names}); nothing was written to it",
                hint=_NEW_PATH_HINT if self._create else _READ_HINT)
        if version is not None and version != str(STORE_SCHEMA_VERSION):
            raise RtlabError(
                f"the store {self.display} has layout version {version}; this rtlab "
                f"knows {STORE_SCHEMA_VERSION}", hint="upgrade rtlab")

    def _readable(self) -> bool:
        """Whether the store has rtlab's tables to read; a store created by another
        process since this one was opened is found (a new one holds no run)."""
        if self._ready:
            return True
        if self._new_file is not None and not self._new_file.exists():
            return False
        if self._new_file is not None:
            _check_sqlite_file(self._new_file, self._name, self.display, self._create)
        with self._guard("read"):
            self._ready = self._inspect()
        return self._ready

    def _ensure_schema(self) -> None:
        """Before the first write: create the SQLite file (complete, then linked into
        place) or the tables of an empty database (under the schema lock, so
        concurrent first writers are safe), after checking again what is there."""
        if self._ready:
            return
        if self._new_file is not None:
            self._create_file(self._new_file)
        with self._guard("store"):
            if self._inspect():  # complete (created now, or by another process)
                self._ready = True
                return
            with self._schema_transaction() as conn:
                tables, version = _layout(conn, self._tables)
                self._check_layout(tables, version)
                if version is None:
                    self._tables["metadata"].create_all(conn)
                    conn.execute(self._tables["store_info"].insert().values(
                        key="store_schema", value=str(STORE_SCHEMA_VERSION)))
            self._check_columns()
        self._ready = True

    def _create_file(self, path: Path) -> None:
        """A new SQLite store file with rtlab's tables, written beside `path` under a
        hidden name and linked into place: another process never sees a half-made
        store, and of two creating it at once one wins and both use it."""
        from sqlalchemy import create_engine
        from sqlalchemy.engine import URL

        with _CREATING:
            if path.exists():
                return
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise RtlabError(f"cannot create the store directory {path.parent}: "
                                 f"{exc.strerror or exc}") from exc
            part = path.with_name(f".{path.name}.{os.getpid()}.part")
            _remove_stale_parts(path)
            part.unlink(missing_ok=True)
            engine = create_engine(URL.create("sqlite", database=str(part)))
            try:
                with self._guard("store"), engine.begin() as conn:
                    self._tables["metadata"].create_all(conn)
                    conn.execute(self._tables["store_info"].insert().values(
                        key="store_schema", value=str(STORE_SCHEMA_VERSION)))
                engine.dispose()
                try:
                    os.link(part, path)
                except FileExistsError:
                    pass  # another process created it first: that one is used
                except OSError:  # a file system without hard links
                    if not path.exists():
                        os.rename(part, path)
            except OSError as exc:
                raise RtlabError(f"cannot create the store {path}: "
                                 f"{exc.strerror or exc}") from exc
            finally:
                engine.dispose()
                part.unlink(missing_ok=True)

    @contextmanager
    def _schema_transaction(self) -> Iterator[Any]:
        """One transaction that holds the store's schema lock until it commits."""
        from sqlalchemy import text

        dialect = self._engine.dialect.name
        with self._engine.connect() as conn:
            if dialect == "sqlite":  # the file's write lock, taken now (waits when busy)
                conn.exec_driver_sql("BEGIN IMMEDIATE")
            elif dialect == "postgresql":  # DDL is transactional there
                conn.execute(text("SELECT pg_advisory_xact_lock(:key)"),
                             {"key": _SCHEMA_LOCK_KEY})
            yield conn
            conn.commit()

    def _check_columns(self) -> None:
        """A database whose `runs` table is not rtlab's is refused, not half-used."""
        from sqlalchemy import select
        from sqlalchemy.exc import DBAPIError, OperationalError

        runs = self._tables["runs"]
        try:
            with self._engine.connect() as conn:
                conn.execute(select(*runs.c).limit(0)).all()
        except DBAPIError as exc:
            # SQLite reports a missing column as OperationalError, PostgreSQL as
            # ProgrammingError; a PostgreSQL OperationalError is the connection's
            if exc.connection_invalidated or (self._engine.dialect.name != "sqlite"
                                              and isinstance(exc, OperationalError)):
                raise
            raise UsageError(f"the database {self.display} has a table `runs` that is not an "
                             f"rtlab store: {_reason(exc)}",
                             hint="give rtlab its own database (or SQLite file)") from exc

    @classmethod
    def open(cls, location: str | None = None, *, create: bool = True,
             name: str | None = None) -> Store:
        """The store at `location` (--store, $RTLAB_STORE, else the default file); `name`:
        how messages name the location when it is not --store/$RTLAB_STORE.

        Nothing is created or changed by opening. `create=True` (the commands that
        store): a new path is accepted (the file and its directory are created when the
        first run is stored); `create=False` (the commands that only read): an SQLite file
        that does not exist is a NoStoreError, and the store is opened read-only. Refused
        in one line either way: an existing file that is not an rtlab store (empty,
        not SQLite, someone else's database), a directory, FIFO, device or socket, a
        memory-only database."""
        if location is not None and not location.strip():
            raise UsageError(f"{name or '--store'} is empty",
                             hint="give a file path (SQLite) or a database URL")
        loc = resolve_location(location)
        name = name or location_name(location)
        if "://" in loc:
            return cls._open_url(loc, create, name)
        return cls._open_file(Path(loc).expanduser(), create, name, None)

    @classmethod
    def _open_file(cls, path: Path, create: bool, name: str, display: str | None) -> Store:
        """An SQLite store file: checked (read-only) before SQLite opens it."""
        from sqlalchemy.engine import URL

        with suppress(OSError):  # what is wrong with it: _check_sqlite_file says
            if stat.S_ISDIR(os.stat(path).st_mode):
                path = path / "rtlab.db"
        display = display or str(path)
        exists = _check_sqlite_file(path, name, display, create)
        if not exists:
            if not create:
                raise NoStoreError(f"no stored run: there is no result store at {path} "
                                   f"({name})", hint="give the store with --store or "
                                   "$RTLAB_STORE, or store a run first (rtlab run, rtlab "
                                   "results import)")
            _check_creatable(path, name, display)
        resolved = path.resolve()
        # SQLite URI file names: `ro` for the commands that only read, `rw` (never
        # creates a file) for the others; a new file is made by _create_file
        url = URL.create("sqlite", database="file:" + quote(str(resolved), safe="/"),
                         query={"uri": "true", "mode": "rw" if create else "ro"})
        return cls(url, resolved.parent / "runs", display,
                   {"connect_args": {"timeout": SQLITE_BUSY_TIMEOUT_S}}, create=create,
                   name=name, identity=f"sqlite:{resolved}",
                   new_file=None if exists else resolved)

    @classmethod
    def _open_url(cls, loc: str, create: bool, name: str) -> Store:
        url, engine_args = engine_url(loc)
        display = mask_password(loc)
        if url.get_backend_name() == "sqlite":
            if url.database in (None, "", ":memory:") or url.query.get("mode") == "memory":
                raise UsageError(
                    f"{name} {_path(display)} is a memory-only database: runs stored there "
                    "vanish when the command ends, and it holds none to read",
                    hint="give a file path (SQLite) or a server URL (postgresql://...)")
            if url.query:
                raise UsageError(f"{name} {_path(display)}: a sqlite:/// store URL takes no "
                                 f"options ({', '.join(sorted(url.query))})",
                                 hint="give sqlite:///FILE or the file path")
            return cls._open_file(Path(url.database).expanduser(), create, name, display)
        if not create and "options" not in url.query:  # the commands that only read
            engine_args["connect_args"]["options"] = "-c default_transaction_read_only=on"
        return cls(url, default_data_dir() / "runs", display, engine_args, create=create,
                   name=name)

    def close(self) -> None:
        """Release the connections; directories that a run's raw files created and
        that stayed empty (nothing was stored) are taken back."""
        self._engine.dispose()
        for path in self._missing_dirs:  # deepest first
            with suppress(OSError):
                path.rmdir()

    # raw output ---------------------------------------------------------------------
    def raw_path(self, run_id: str) -> Path:
        return self.runs_dir / f"{run_id}.jsonl"

    def new_id(self) -> str:

        for _ in range(100):
            run_id = new_run_id()
            if not self.exists(run_id) and not self.raw_path(run_id).exists():
                return run_id
        raise RtlabError("cannot find a free run id")  # pragma: no cover

    # writing ------------------------------------------------------------------------
    def exists(self, run_id: str) -> bool:
        from sqlalchemy import select

        if not self._readable():
            return False
        runs = self._tables["runs"]
        with self._guard("read"), self._engine.connect() as conn:
            return conn.execute(select(runs.c.id).where(runs.c.id == run_id)).first() is not None

    def add(self, result: RunResult) -> None:
        """Store a run (one transaction). Refuses to overwrite a run with the same id, also
        when another process stores it at the same moment."""
        from sqlalchemy.exc import IntegrityError, SQLAlchemyError

        refused = RtlabError(f"run {result.run_id} is already stored in {self.display}; "
                             "stored runs are never overwritten")
        _refuse_inconsistent(result)
        row = _row_values(result)
        text = json.dumps(result.to_dict(packed=True), separators=(",", ":"))
        blob = zlib.compress(text.encode(), 6)
        try:
            self._ensure_schema()
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

        err = (_db_error(exc, "store", self.display) if isinstance(exc, SQLAlchemyError)
               else exc if isinstance(exc, RtlabError) else RtlabError(str(exc)))
        raw = self.raw_path(result.run_id)
        again = f"rtlab results import {shlex.quote(str(raw))} --store {shlex.quote(self.display)}"
        where = (f"; the raw output is kept in {raw} (`{again}` when the store works again)"
                 if raw.exists() else "")
        return RtlabError(f"run {result.run_id} was NOT stored: {err.message}{where}",
                          hint=err.hint)

    # reading ------------------------------------------------------------------------
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
        # substr, not LIKE: `_` is a LIKE wildcard and SQLite's LIKE ignores case
        prefix = func.substr(runs.c.id, 1, len(ref)) == ref
        ids: list[str] = []
        if self._readable():
            with self._guard("read"), self._engine.connect() as conn:
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

    # copying between stores (rtlab.results.sync) ----------------------------------------
    @property
    def keeps_raw_in_database(self) -> bool:
        """Where copied raw files go: a server database keeps them in its tables (every
        machine reaches them); an SQLite store in its raw directory beside the file."""
        return self._engine.dialect.name != "sqlite"

    def select(self, *, ids: Collection[str] | None = None, hosts: Collection[str] = (),
               probes: Collection[str] = (), since: datetime | None = None) -> list[RunRow]:
        """The stored runs matching every given criterion, oldest first (`since`: started
        at or after it)."""
        from sqlalchemy import select

        runs = self._tables["runs"]
        cols = [runs.c[f.name] for f in fields(RunRow)]
        query = select(*cols).order_by(runs.c.created, runs.c.seq)
        if hosts:
            query = query.where(runs.c.host.in_(sorted(hosts)))
        if probes:
            query = query.where(runs.c.probe.in_(sorted(probes)))
        if since is not None:
            since = as_utc(since)
            if self._engine.dialect.name == "sqlite":  # stored as naive UTC text
                since = since.replace(tzinfo=None)
            query = query.where(runs.c.created >= since)
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
                with open(self.runs_dir / raw.name, "rb") as f:
                    while piece := f.read(RAW_CHUNK_BYTES):
                        yield piece
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

    def add_copy(self, run: StoredRun, files: Iterable[tuple[RawFile, Callable[[],
                 Iterable[bytes]]]]) -> bool:
        """Store a run copied from another store, with its raw files (`RawFile`, and a
        function returning its content), unless its id is stored already: then False, and
        nothing changed. The run is validated like any other (`add`); its JSON is stored
        as it came, so both stores hold the same content (`digests`).

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
        _refuse_inconsistent(result)
        row = _row_values(result) | {"created": run.created}
        blob = zlib.compress(run.text, 6)
        self._ensure_schema()
        if self.exists(run.run_id):
            return False
        self._ensure_copy_tables()
        files = list(files)
        for raw, _ in files:
            _check_raw_name(run.run_id, raw.name)
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

    def add_with_raw(self, result: RunResult, raw: Path) -> bool:
        """Store a new run together with its raw engine output (`ID.jsonl`), as
        `add_copy` does: kept in the database when the store keeps raw files there (a
        lab's PostgreSQL), else written into the raw directory before the run's
        transaction, so a stored run always has its raw file. False, and nothing changed,
        when the id is stored already."""
        text = json.dumps(result.to_dict(packed=True), separators=(",", ":")).encode()
        run = StoredRun(result.run_id, _row_common(result)["created"], text,
                        content_digest(text))
        run.__dict__["_result"] = result  # no need to read back what was just written
        try:
            size = raw.stat().st_size
        except OSError as exc:
            raise RtlabError(f"cannot read the raw output {raw} of run {result.run_id}: "
                             f"{exc.strerror or exc}") from exc

        def content() -> Iterator[bytes]:
            with open(raw, "rb") as f:
                while piece := f.read(RAW_CHUNK_BYTES):
                    yield piece

        return self.add_copy(run, [(RawFile(f"{result.run_id}.jsonl", size, False), content)])

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
            _remove_stale_parts(dest)
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

    @contextmanager
    def _write_transaction(self) -> Iterator[Any]:
        """One write transaction; SQLite takes its write lock at the start (waiting for
        other writers), so it never fails half-way for a lock another process holds."""
        with self._engine.connect() as conn:
            if self._engine.dialect.name == "sqlite":
                conn.exec_driver_sql("BEGIN IMMEDIATE")
            else:
                conn.begin()
            yield conn
            conn.commit()

    _copy_tables_ready = False
    _copy_tables_refused = False

    def _has_copy_tables(self, conn: Any) -> bool:
        from sqlalchemy import inspect

        if not self._copy_tables_ready:
            insp = inspect(conn)
            self._copy_tables_ready = all(insp.has_table(t) for t in _COPY_TABLES)
        return self._copy_tables_ready

    def _copy_tables_or_none(self) -> bool:
        """`_ensure_copy_tables` for storing a run: a database user who may insert runs
        but not create tables (a lab database set up by its owner) still stores runs
        (their digests are then computed when asked)."""
        if self._copy_tables_refused:
            return False
        try:
            self._ensure_copy_tables()
        except RtlabError as exc:  # not allowed: do not ask again; else the insert will say
            self._copy_tables_refused = "permission denied" in exc.message.lower()
            return False
        return True

    def _ensure_copy_tables(self) -> None:
        """The tables of content digests and raw files, added to stores made before them
        (layout version 1 still: an older rtlab ignores them), at the first write."""
        with self._guard("store"):
            with self._engine.connect() as conn:
                if self._has_copy_tables(conn):
                    return
            with self._schema_transaction() as conn:
                md = self._tables["metadata"]
                md.create_all(conn, tables=[md.tables[t] for t in _COPY_TABLES])
            self._copy_tables_ready = True


def check_store(location: str | None) -> str | None:
    """For a command that stores only later (`rtlab monitor`): the store is opened and
    closed now, so that one that can never be written (not an rtlab store, a memory-only
    database, a FIFO, ...) is refused before anything is measured; nothing is created. A
    server that does not answer now may later: its one-line reason is returned."""
    try:
        Store.open(location).close()
    except StoreUnreachableError as exc:
        return exc.one_line()
    return None


# URLs and errors ----------------------------------------------------------------------
def mask_password(loc: str) -> str:
    """`loc` with the password of a URL replaced by ***, for messages and display."""
    return re.sub(r"^([^:/?#]+://[^/?#@:]*:)[^/?#@]*@", r"\1***@", loc)


def engine_url(loc: str) -> tuple[Any, dict[str, Any]]:
    """The SQLAlchemy URL and `create_engine` arguments for a store URL.

    PostgreSQL: `postgresql://` and `postgres://` (libpq's spellings) use psycopg 3; a
    Unix-socket directory may be given libpq-style as `?host=/run/postgresql` or as a
    percent-encoded host (`postgresql://%2Frun%2Fpostgresql/rtlab`); connecting gives up
    after CONNECT_TIMEOUT_S unless the URL sets `connect_timeout`. A server's pooled
    connection is checked before use: `rtlab run` opens the store when it starts and
    stores the run hours later, when the server may have restarted or dropped it.
    """
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        url = make_url(loc)
    except (ArgumentError, ValueError) as exc:
        raise UsageError(f"invalid store URL {mask_password(loc)}: {_first_line(exc)}",
                         hint="give a file path (SQLite) or postgresql://USER@HOST/DB") from None
    connect_args: dict[str, Any] = {}
    engine_args: dict[str, Any] = {"connect_args": connect_args}
    if url.get_backend_name() == "sqlite":
        connect_args["timeout"] = SQLITE_BUSY_TIMEOUT_S
    else:
        engine_args["pool_pre_ping"] = True
    if url.drivername in ("postgresql", "postgres"):
        url = url.set(drivername="postgresql+psycopg")
    if url.drivername.startswith("postgresql"):
        if url.host and unquote(url.host).startswith("/"):
            url = url.set(host=None).update_query_dict({"host": unquote(url.host)})
        if "connect_timeout" not in url.query:
            connect_args["connect_timeout"] = CONNECT_TIMEOUT_S
    return url, engine_args


def _first_line(exc: BaseException | str) -> str:
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    return re.sub(r"\s+", " ", lines[0]) if lines else type(exc).__name__


def _reason(exc: BaseException) -> str:
    """The driver's own message, first line, without SQLAlchemy's decorations."""
    orig = getattr(exc, "orig", None)
    return _first_line(orig if orig is not None else exc)


def _db_error(exc: BaseException, doing: str, display: str) -> RtlabError:
    """One line saying what failed and how to fix it (exit code 1: the database's state)."""
    reason = _reason(exc)
    low = reason.lower()
    what = {"open": "cannot open", "read": "cannot read", "store": "cannot write to"}[doing]
    message = f"{what} the result store {mask_password(display)}: {reason}"
    if "does not exist" in low and "database" in low:
        hint = "create the database (e.g. createdb -O USER NAME) or fix the URL"
    elif ("role" in low and "does not exist" in low) or "authentication failed" in low \
            or "no password supplied" in low:
        hint = "check the user name and password in the URL"
    elif "permission denied" in low:
        hint = ("give the database user its own database: createdb -O USER NAME; "
                "see docs/results.md")
    elif "invalid connection option" in low or "invalid dsn" in low:
        return UsageError(message, hint="see docs/results.md for the URL forms")
    elif "unable to open database" in low:  # SQLite: the file or its directory
        hint = ("the store file must be a writable file on a disk file system, in a "
                "directory that exists")
    elif any(s in low for s in ("no such file", "connection refused", "timeout",
                                "could not translate host", "connection is bad",
                                "server closed", "terminating connection", "connection failed",
                                "consuming input failed")):
        return StoreUnreachableError(message, hint="is the database server running, and is "
                                     "the URL right? see docs/results.md")
    else:
        hint = None
    return RtlabError(message, hint=hint)


def _driver_error(exc: ImportError, display: str) -> UsageError:
    text = _first_line(exc)
    if getattr(exc, "name", None) == "psycopg":
        return UsageError(f"the store {display} needs the PostgreSQL driver psycopg, which is "
                          "not installed", hint=_DRIVER_HINT)
    if getattr(exc, "name", None) == "psycopg2":
        return UsageError(f"the store {display} asks for psycopg2, which is not installed",
                          hint="pip install psycopg2-binary, or write postgresql:// to use "
                          "psycopg 3 (rtlab's PostgreSQL driver)")
    if "pq wrapper" in text or "libpq" in text:
        return UsageError(f"the PostgreSQL driver psycopg cannot load libpq for {display}: "
                          f"{text.rstrip('.')}", hint=_LIBPQ_HINT)
    return UsageError(f"the database driver for {display} is not installed ({text})",
                      hint="install it, or give a file path (SQLite)")


def as_utc(value: datetime) -> datetime:
    """Timezone-aware UTC: SQLite returns naive UTC, PostgreSQL the session's zone."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _layout(conn: Any, tables: dict[str, Any]) -> tuple[set[str], str | None]:
    """The names of the database's tables (none: an empty database) and rtlab's layout
    version (None when rtlab's tables or the version row are not there). Only reads."""
    from sqlalchemy import inspect, select

    names = set(inspect(conn).get_table_names())
    if not {"runs", "store_info"} <= names:
        return names, None
    info = tables["store_info"]
    value = conn.execute(select(info.c.value).where(info.c.key == "store_schema")).scalar()
    return names, None if value is None else str(value)


def _check_sqlite_file(path: Path, name: str, display: str, create: bool) -> bool:
    """Whether an SQLite store file is at `path` (False: nothing is there); anything else
    there is refused in one line (UsageError): a directory, FIFO, device or socket, a
    dangling symbolic link, an empty file, a file that is not an SQLite database. Never
    opens anything but a regular file, and that read-only and without blocking."""
    given = f"{name} {_path(display)}"
    hint = _NEW_PATH_HINT if create else _READ_HINT
    try:
        st = os.stat(path)
    except FileNotFoundError:
        if os.path.islink(path):
            raise UsageError(f"{given} is a symbolic link to nothing "
                             f"({_path(os.readlink(path))})",
                             hint="give the store file itself") from None
        return False
    except NotADirectoryError:
        raise UsageError(f"{given} cannot be a file: a part of its path is a file, not a "
                         "directory", hint="give a path in a directory") from None
    except OSError as exc:  # a symbolic link loop, a name too long, no permission
        raise UsageError(f"{given}: {exc.strerror or exc}") from None
    kind = _file_kind(st.st_mode)
    if kind is not None:
        raise UsageError(f"{given} is {kind}, not a store file",
                         hint=_OTHER_PATH_HINT if create else _READ_HINT)
    if st.st_size == 0:
        raise UsageError(f"{given} is an empty file, not an rtlab store; nothing was "
                         "written to it", hint=hint)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        raise RtlabError(f"cannot read the store {display}: {exc.strerror or exc}") from None
    try:
        kind = _file_kind(os.fstat(fd).st_mode)  # replaced since the stat
        head = b"" if kind is not None else os.read(fd, len(_SQLITE_MAGIC))
    except OSError as exc:
        raise RtlabError(f"cannot read the store {display}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if kind is not None:
        raise UsageError(f"{given} is {kind}, not a store file",
                         hint=_OTHER_PATH_HINT if create else _READ_HINT)
    if head != _SQLITE_MAGIC:
        raise UsageError(f"{given} is not an SQLite database (an rtlab store is one); "
                         "nothing was written to it", hint=hint)
    return True


def _file_kind(mode: int) -> str | None:
    """What a file that is not a regular file is, for a message (None: regular)."""
    return None if stat.S_ISREG(mode) else kind_of(mode)


def _check_creatable(path: Path, name: str, display: str) -> None:
    """A new store file can be made at `path` later: its nearest existing ancestor is a
    directory this process may write into (checked now, before any work)."""
    ancestor = path.parent
    while not os.path.lexists(ancestor) and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise UsageError(f"{name} {_path(display)} cannot be created: {ancestor} is not a "
                         "directory", hint="give a path in a directory")
    fs = fs_type(ancestor.resolve())
    if fs in PSEUDO_FS:  # /proc, /sys, cgroupfs...: kernel interfaces, not a place for data
        raise UsageError(f"{name} {_path(display)} cannot be created: {ancestor} is on the "
                         f"kernel's {fs} filesystem", hint="give a path in a directory")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise RtlabError(f"{name} {_path(display)} cannot be created: no permission to "
                         f"write in {ancestor}", hint="give a path in a directory you may "
                         "write to")


def _missing_dirs(path: Path) -> list[Path]:
    """`path` and its ancestors that do not exist, deepest first."""
    missing = []
    while not os.path.lexists(path) and path != path.parent:
        missing.append(path)
        path = path.parent
    return missing


def _decompress(run_id: str, blob: bytes) -> bytes:
    try:
        return zlib.decompress(blob)
    except zlib.error as exc:
        raise RtlabError(f"stored run {run_id} is damaged: {exc}") from exc


def _batches(ids: list[str]) -> Iterator[list[str]]:
    for i in range(0, len(ids), _IN_BATCH):
        yield ids[i:i + _IN_BATCH]


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


def _remove_stale_parts(dest: Path) -> None:
    """The hidden `.NAME.PID.part` files of `dest` that a copier killed with kill -9 left
    (its process is gone; a living one is still writing). Matched by name, not by a
    glob: a glob compiles a pattern per run, which fills `re`'s cache in a long-running
    monitor that stores a segment every hour."""
    prefix = f".{dest.name}."
    try:
        names = [e.name for e in os.scandir(dest.parent)]
    except OSError:
        return
    for name in names:
        if not (name.startswith(prefix) and name.endswith(".part")):
            continue
        pid = name[len(prefix):-len(".part")]
        if not pid.isdigit():
            continue
        part = dest.parent / name
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            part.unlink(missing_ok=True)
        except PermissionError:  # another user's living process
            pass


def _is_prefix(path: Path, of: Path) -> bool:
    """Whether the file `path` holds the beginning of (or all of) the file `of`."""
    with open(path, "rb") as a, open(of, "rb") as b:
        while block := a.read(1 << 20):
            if b.read(len(block)) != block:
                return False
    return True


def _check_raw_name(run_id: str, name: str) -> None:
    """A raw file name from another store stays inside the raw directory and names its
    own run: never absolute, never `..`, always `ID.`..."""
    if not (name.startswith(f"{run_id}.") and _RAW_NAME.fullmatch(name)):
        raise RtlabError(f"run {run_id}: refusing the raw file name {name!r} (not a raw file "
                         "of this run)")


def _tables() -> dict[str, Any]:
    from sqlalchemy import (
        BigInteger,
        Boolean,
        Column,
        DateTime,
        Integer,
        LargeBinary,
        MetaData,
        String,
        Table,
        Text,
    )

    # Free-form text (host, kernel, preemption model, scenario: partly given by the user)
    # is unbounded: PostgreSQL enforces VARCHAR lengths, SQLite never did.
    md = MetaData()
    runs = Table(
        "runs", md,
        Column("seq", Integer, primary_key=True, autoincrement=True),
        Column("id", String(32), nullable=False, unique=True, index=True),
        Column("created", DateTime(timezone=True), nullable=False, index=True),
        Column("host", Text),
        Column("kernel_release", Text),
        Column("preempt", Text),
        Column("probe", Text, nullable=False),
        Column("scenario", Text),
        Column("scenario_hash", String(64)),
        Column("status", String(16), nullable=False),
        Column("partial", Boolean, nullable=False),
        Column("rt_valid", Boolean),
        Column("duration_ns", BigInteger),
        Column("samples", BigInteger, nullable=False),
        Column("worst_max_ns", BigInteger),
        Column("p99_ns", BigInteger),
        Column("p9999_ns", BigInteger),
        Column("result_version", Integer, nullable=False),
        Column("result_z", LargeBinary, nullable=False),
    )
    info = Table(
        "store_info", md,
        Column("key", String(64), primary_key=True),
        Column("value", String(255)),
    )
    # Added later (layout version 1 still: created at the first write, ignored by an
    # older rtlab): each run's content digest, and raw files kept in the database
    digests = Table(
        "run_digests", md,
        Column("id", String(32), primary_key=True),
        Column("sha256", String(64), nullable=False),
    )
    files = Table(
        "run_files", md,
        Column("run_id", String(32), primary_key=True),
        Column("name", Text, primary_key=True),
        Column("size", BigInteger, nullable=False),
        Column("sha256", String(64), nullable=False),
        Column("chunks", Integer, nullable=False),
    )
    chunks = Table(
        "run_file_chunks", md,
        Column("run_id", String(32), primary_key=True),
        Column("name", Text, primary_key=True),
        Column("chunk", Integer, primary_key=True, autoincrement=False),
        Column("data", LargeBinary, nullable=False),
    )
    return {"metadata": md, "runs": runs, "store_info": info, "run_digests": digests,
            "run_files": files, "run_file_chunks": chunks}


def _refuse_inconsistent(result: RunResult) -> None:
    """The last guard: a result whose numbers contradict each other is stored only as
    `invalid` (callers check first: imports refuse it, live runs mark it)."""

    if result.status != "invalid":
        why = first_problem(result)
        if why is not None:
            raise RtlabError(f"run {result.run_id} not stored: its numbers contradict each "
                             f"other ({why})")


def _row_values(result: RunResult) -> dict[str, Any]:
    if result.status == "invalid":  # no summary column from numbers that failed validation
        return _row_common(result) | {"duration_ns": None, "samples": 0, "worst_max_ns": None,
                                      "p99_ns": None, "p9999_ns": None}
    merged = result.merged()
    summary = merged.summary((99.0, 99.99))
    return _row_common(result) | {
        "duration_ns": result.elapsed_ns,
        "samples": merged.samples,
        "worst_max_ns": merged.max_ns,
        "p99_ns": summary.p(99.0),
        "p9999_ns": summary.p(99.99),
    }


def _row_common(result: RunResult) -> dict[str, Any]:
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
