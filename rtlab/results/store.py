# SPDX-License-Identifier: MIT
"""The result store: one row per run in an SQL database (SQLite by default).

Location: `--store` (a file path or an SQLAlchemy URL), else $RTLAB_STORE,
else `${XDG_DATA_HOME:-~/.local/share}/rtlab/rtlab.db`. Raw engine output
(JSON Lines, written while a run is going) lives in `runs/` beside an SQLite
file (for a server URL: in the XDG data directory). A stored run is never
overwritten. See docs/results.md.
"""

from __future__ import annotations

import json
import os
import zlib
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rtlab.errors import RtlabError, UsageError
from rtlab.results.model import RunResult, load_result

ENV_VAR = "RTLAB_STORE"
STORE_SCHEMA_VERSION = 1


def default_data_dir(env: dict[str, str] | None = None) -> Path:
    environ = os.environ if env is None else env
    base = environ.get("XDG_DATA_HOME") or str(
        Path(environ.get("HOME", "~")).expanduser() / ".local" / "share")
    return Path(base) / "rtlab"


def resolve_location(store: str | None, env: dict[str, str] | None = None) -> str:
    """The store as given (`--store`), else $RTLAB_STORE, else the XDG default path."""
    environ = os.environ if env is None else env
    return store or environ.get(ENV_VAR) or str(default_data_dir(environ) / "rtlab.db")


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


class Store:
    """Open with `Store.open(location)`; SQLAlchemy is imported only here."""

    def __init__(self, url: str, runs_dir: Path, display: str) -> None:
        from sqlalchemy import create_engine

        self.url = url
        self.runs_dir = runs_dir
        self.display = display
        self._engine = create_engine(url)
        self._tables = _tables()
        try:
            self._tables["metadata"].create_all(self._engine)
            self._check_store_version()
        except RtlabError:
            raise
        except Exception as exc:  # sqlalchemy.exc.SQLAlchemyError and driver errors
            raise RtlabError(f"cannot open the result store {display}: {exc}") from exc

    def _check_store_version(self) -> None:
        from sqlalchemy import select

        info = self._tables["store_info"]
        with self._engine.begin() as conn:
            value = conn.execute(
                select(info.c.value).where(info.c.key == "store_schema")).scalar()
            if value is None:
                conn.execute(info.insert().values(key="store_schema",
                                                  value=str(STORE_SCHEMA_VERSION)))
            elif value != str(STORE_SCHEMA_VERSION):
                raise RtlabError(
                    f"the store {self.display} has layout version {value}; this rtlab "
                    f"knows {STORE_SCHEMA_VERSION}", hint="upgrade rtlab")

    @classmethod
    def open(cls, location: str | None = None) -> Store:
        loc = resolve_location(location)
        if "://" in loc:
            return cls(loc, default_data_dir() / "runs", loc)
        path = Path(loc).expanduser()
        if path.exists() and path.is_dir():
            path = path / "rtlab.db"
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise RtlabError(
                f"cannot create the store directory {path.parent}: {exc.strerror}") from exc
        return cls(f"sqlite:///{path.resolve()}", path.resolve().parent / "runs", str(path))

    def close(self) -> None:
        self._engine.dispose()

    # raw output ---------------------------------------------------------------------
    def raw_path(self, run_id: str) -> Path:
        return self.runs_dir / f"{run_id}.jsonl"

    def new_id(self) -> str:
        from rtlab.results.model import new_run_id

        for _ in range(100):
            run_id = new_run_id()
            if not self.exists(run_id) and not self.raw_path(run_id).exists():
                return run_id
        raise RtlabError("cannot find a free run id")  # pragma: no cover

    # writing ------------------------------------------------------------------------
    def exists(self, run_id: str) -> bool:
        from sqlalchemy import select

        runs = self._tables["runs"]
        with self._engine.connect() as conn:
            return conn.execute(select(runs.c.id).where(runs.c.id == run_id)).first() is not None

    def add(self, result: RunResult) -> None:
        """Store a run. Refuses to overwrite an existing run with the same id."""
        from sqlalchemy.exc import IntegrityError

        if self.exists(result.run_id):
            raise RtlabError(f"run {result.run_id} is already stored in {self.display}; "
                             "stored runs are never overwritten")
        row = _row_values(result)
        text = json.dumps(result.to_dict(packed=True), separators=(",", ":"))
        blob = zlib.compress(text.encode(), 6)
        try:
            with self._engine.begin() as conn:
                conn.execute(self._tables["runs"].insert().values(**row, result_z=blob))
        except IntegrityError as exc:
            raise RtlabError(f"run {result.run_id} is already stored; not overwritten") from exc

    # reading ------------------------------------------------------------------------
    def list(self, limit: int | None = 20) -> list[RunRow]:
        """Newest first."""
        from sqlalchemy import select

        runs = self._tables["runs"]
        cols = [runs.c[name] for name in RunRow.__dataclass_fields__]
        query = select(*cols).order_by(runs.c.created.desc(), runs.c.seq.desc())
        if limit is not None:
            query = query.limit(limit)
        with self._engine.connect() as conn:
            return [RunRow(**dict(r._mapping)) for r in conn.execute(query)]

    def resolve(self, ref: str) -> str:
        """Run id from a unique id prefix or `last`."""
        from sqlalchemy import select

        runs = self._tables["runs"]
        if ref == "last":
            rows = self.list(limit=1)
            if not rows:
                raise UsageError(f"no runs stored in {self.display}", hint="run `rtlab run` first")
            return rows[0].id
        if not ref or not all(c.isalnum() or c in "-_" for c in ref):
            raise UsageError(f"invalid run id {ref!r}")
        with self._engine.connect() as conn:
            ids = [r[0] for r in conn.execute(
                select(runs.c.id).where(runs.c.id.like(f"{ref}%")).limit(6))]
        if ref in ids:
            return ref
        if not ids:
            raise UsageError(f"no stored run matches {ref!r}", hint="see `rtlab results list`")
        if len(ids) > 1:
            shown = ", ".join(ids[:5])
            raise UsageError(f"run id prefix {ref!r} is ambiguous ({shown})",
                             hint="give more characters")
        return ids[0]

    def get(self, ref: str) -> RunResult:
        from sqlalchemy import select

        run_id = self.resolve(ref)
        runs = self._tables["runs"]
        with self._engine.connect() as conn:
            blob = conn.execute(select(runs.c.result_z).where(runs.c.id == run_id)).scalar_one()
        try:
            data = json.loads(zlib.decompress(blob))
        except (zlib.error, ValueError) as exc:
            raise RtlabError(f"stored run {run_id} is damaged: {exc}") from exc
        return load_result(data)


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
    )

    md = MetaData()
    runs = Table(
        "runs", md,
        Column("seq", Integer, primary_key=True, autoincrement=True),
        Column("id", String(32), nullable=False, unique=True, index=True),
        Column("created", DateTime(timezone=True), nullable=False, index=True),
        Column("host", String(255)),
        Column("kernel_release", String(255)),
        Column("preempt", String(32)),
        Column("probe", String(64), nullable=False),
        Column("scenario", String(255)),
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
    return {"metadata": md, "runs": runs, "store_info": info}


def _row_values(result: RunResult) -> dict[str, Any]:
    merged = result.merged()
    summary = merged.summary((99.0, 99.99))
    system = result.system
    host = result.provenance.get("host", {})
    created = host.get("start_wall")
    try:
        created_dt = datetime.fromisoformat(created) if created else datetime.now(UTC)
    except ValueError:
        created_dt = datetime.now(UTC)
    return {
        "id": result.run_id,
        "created": created_dt,
        "host": system.get("hostname") or host.get("hostname"),
        "kernel_release": system.get("release"),
        "preempt": system.get("preempt"),
        "probe": result.probe,
        "scenario": result.scenario.get("name"),
        "scenario_hash": result.scenario.get("hash"),
        "status": result.status,
        "partial": result.partial,
        "rt_valid": result.rt_valid,
        "duration_ns": result.elapsed_ns,
        "samples": merged.samples,
        "worst_max_ns": merged.max_ns,
        "p99_ns": summary.p(99.0),
        "p9999_ns": summary.p(99.99),
        "result_version": result.version,
    }
