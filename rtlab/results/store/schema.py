# SPDX-License-Identifier: MIT
"""A store's database and rtlab's tables in it: opened without writing (someone else's
tables or another layout version refused), created at the first write (a new SQLite file
complete, then linked into place; the tables of an empty database under a lock), and
the tables added later (content digests, raw files kept in the database).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from rtlab.errors import RtlabError, UsageError
from rtlab.results.store.location import (
    NEW_PATH_HINT,
    READ_HINT,
    URL_HINT,
    check_sqlite_file,
    db_error,
    driver_error,
    first_line,
    quoted,
    reason,
)

STORE_SCHEMA_VERSION = 1
COPY_TABLES = ("run_digests", "run_files", "run_file_chunks")
RUNS_BY_HOST = "ix_runs_host_probe_created"  # added later: made at a store's next write
_SCHEMA_LOCK_KEY = 0x72746C6162  # PostgreSQL advisory lock serialising schema creation
_CREATING = threading.Lock()  # threads of one process creating a new SQLite file


class Database:
    """The database of a store (SQLAlchemy is imported only here) and its raw directory;
    `rtlab.results.store.Store` adds what is kept in it."""

    _copy_tables_ready = False
    _copy_tables_refused = False
    _host_index_checked = False

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
                             hint=URL_HINT) from None
        except ImportError as exc:  # the dialect's driver (psycopg) or its libpq
            raise driver_error(exc, display) from None
        except (ArgumentError, ValueError) as exc:
            raise UsageError(f"invalid store URL {display}: {first_line(exc)}") from None
        self._tables = tables()
        self._ready = False  # rtlab's tables and layout version are there
        if new_file is None:
            try:
                with self._guard("open"):
                    self._ready = self._inspect()
            except BaseException:
                self._engine.dispose()
                raise

    def close(self) -> None:
        """Release the connections; directories that a run's raw files created and
        that stayed empty (nothing was stored) are taken back."""
        self._engine.dispose()
        for path in self._missing_dirs:  # deepest first
            with suppress(OSError):
                path.rmdir()

    def raw_path(self, run_id: str) -> Path:
        """Where a run's raw engine output is written while it runs."""
        return self.runs_dir / f"{run_id}.jsonl"

    @contextmanager
    def _guard(self, doing: str) -> Iterator[None]:
        """Database errors become one-line RtlabErrors naming the store (never the password)."""
        from sqlalchemy.exc import SQLAlchemyError

        try:
            yield
        except SQLAlchemyError as exc:
            raise db_error(exc, doing, self.display) from exc

    def _inspect(self) -> bool:
        """Read (only) what the database holds: True for rtlab's complete tables, False
        for an empty database (the store is created at the first write); someone else's
        tables or another layout version are refused."""
        with self._engine.connect() as conn:
            names, version = _layout(conn, self._tables)
        self._check_layout(names, version)
        if names:
            self._check_columns()
        return version is not None

    def _check_layout(self, names: set[str] | None, version: str | None) -> None:
        if names and not {"runs", "store_info"} <= names:
            listed = ", ".join(sorted(names)[:4]) + (", ..." if len(names) > 4 else "")
            what = ("an SQLite database" if self._engine.dialect.name == "sqlite"
                    else "a database")
            raise UsageError(
                f"{self._name} {quoted(self.display)} is {what} that is not an rtlab store "
                f"(its tables: {listed}); nothing was written to it",
                hint=NEW_PATH_HINT if self._create else READ_HINT)
        if version is not None and version != str(STORE_SCHEMA_VERSION):
            raise RtlabError(
                f"the store {self.display} has layout version {version}; this rtlab "
                f"knows {STORE_SCHEMA_VERSION}", hint="upgrade rtlab")

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
                             f"rtlab store: {reason(exc)}",
                             hint="give rtlab its own database (or SQLite file)") from exc

    def _readable(self) -> bool:
        """Whether the store has rtlab's tables to read; a store created by another
        process since this one was opened is found (a new one holds no run)."""
        if self._ready:
            return True
        if self._new_file is not None and not self._new_file.exists():
            return False
        if self._new_file is not None:
            check_sqlite_file(self._new_file, self._name, self.display, self._create)
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
                names, version = _layout(conn, self._tables)
                self._check_layout(names, version)
                if version is None:
                    self._create_tables(conn)
            self._check_columns()
        self._ready = True

    def _create_tables(self, conn: Any) -> None:
        self._tables["metadata"].create_all(conn)
        conn.execute(self._tables["store_info"].insert().values(
            key="store_schema", value=str(STORE_SCHEMA_VERSION)))

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
            remove_stale_parts(path)
            part.unlink(missing_ok=True)
            engine = create_engine(URL.create("sqlite", database=str(part)))
            try:
                with self._guard("store"), engine.begin() as conn:
                    self._create_tables(conn)
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

    # the tables added later ---------------------------------------------------------------
    def _has_copy_tables(self, conn: Any) -> bool:
        from sqlalchemy import inspect

        if not self._copy_tables_ready:
            insp = inspect(conn)
            self._copy_tables_ready = all(insp.has_table(t) for t in COPY_TABLES)
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

    def _ensure_host_index(self) -> None:
        """The index of runs by host, probe and time, added to stores made before it at
        their first write by this rtlab (an index changes no result and no layout
        version); a database user who may not create it still stores runs."""
        if self._host_index_checked:
            return
        from sqlalchemy import inspect

        self._host_index_checked = True
        with self._guard("store"):
            with self._engine.connect() as conn:
                names = {ix["name"] for ix in inspect(conn).get_indexes("runs")}
            if RUNS_BY_HOST in names:
                return
            index = next(ix for ix in self._tables["runs"].indexes if ix.name == RUNS_BY_HOST)
            try:
                with self._schema_transaction() as conn:
                    index.create(conn, checkfirst=True)
            except RtlabError as exc:
                if "permission denied" not in exc.message.lower():
                    raise

    def _ensure_copy_tables(self) -> None:
        """The tables of content digests and raw files, added to stores made before them
        (layout version 1 still: an older rtlab ignores them), at the first write."""
        with self._guard("store"):
            with self._engine.connect() as conn:
                if self._has_copy_tables(conn):
                    return
            with self._schema_transaction() as conn:
                md = self._tables["metadata"]
                md.create_all(conn, tables=[md.tables[t] for t in COPY_TABLES])
            self._copy_tables_ready = True


def _layout(conn: Any, known: dict[str, Any]) -> tuple[set[str], str | None]:
    """The names of the database's tables (none: an empty database) and rtlab's layout
    version (None when rtlab's tables or the version row are not there). Only reads."""
    from sqlalchemy import inspect, select

    names = set(inspect(conn).get_table_names())
    if not {"runs", "store_info"} <= names:
        return names, None
    info = known["store_info"]
    value = conn.execute(select(info.c.value).where(info.c.key == "store_schema")).scalar()
    return names, None if value is None else str(value)


def _missing_dirs(path: Path) -> list[Path]:
    """`path` and its ancestors that do not exist, deepest first."""
    missing = []
    while not os.path.lexists(path) and path != path.parent:
        missing.append(path)
        path = path.parent
    return missing


def remove_stale_parts(dest: Path) -> None:
    """The hidden `.NAME.PID.part` files of `dest` that a writer killed with kill -9 left
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


def tables() -> dict[str, Any]:
    """rtlab's tables (SQLAlchemy metadata), by name, and the metadata as `metadata`."""
    from sqlalchemy import (
        BigInteger,
        Boolean,
        Column,
        DateTime,
        Index,
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
    # one board's runs by time (`rtlab history --day`, sync --host): without it a query
    # for one host of a lab's store reads every host's rows (a year of 50 boards' hourly
    # monitor segments: 438,000)
    Index(RUNS_BY_HOST, runs.c.host, runs.c.probe, runs.c.created)
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
