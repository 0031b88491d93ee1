# SPDX-License-Identifier: MIT
"""`Store.open`: a store opened from its location, after what is there was checked;
nothing is created or changed by opening."""

from __future__ import annotations

import os
import stat
from contextlib import suppress
from pathlib import Path

from rtlab.errors import UsageError
from rtlab.results.store.copying import Copying
from rtlab.results.store.location import (
    SQLITE_BUSY_TIMEOUT_S,
    NoStoreError,
    StoreUnreachableError,
    check_creatable,
    check_sqlite_file,
    default_data_dir,
    engine_url,
    location_name,
    mask_password,
    resolve_location,
    sqlite_file_of,
)


class Store(Copying):
    """Open with `Store.open(location)`; SQLAlchemy is imported only then."""

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
        from urllib.parse import quote

        from sqlalchemy.engine import URL

        with suppress(OSError):  # what is wrong with it: check_sqlite_file says
            if stat.S_ISDIR(os.stat(path).st_mode):
                path = path / "rtlab.db"
        display = display or str(path)
        exists = check_sqlite_file(path, name, display, create)
        if not exists:
            if not create:
                raise NoStoreError(f"no stored run: there is no result store at {path} "
                                   f"({name})", hint="give the store with --store or "
                                   "$RTLAB_STORE, or store a run first (rtlab run, rtlab "
                                   "results import)")
            check_creatable(path, name, display)
        resolved = path.resolve()
        # SQLite URI file names: `ro` for the commands that only read, `rw` (never
        # creates a file) for the others; a new file is made at the first write
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
            return cls._open_file(sqlite_file_of(url, name, display), create, name, display)
        if not create and "options" not in url.query:  # the commands that only read
            engine_args["connect_args"]["options"] = "-c default_transaction_read_only=on"
        return cls(url, default_data_dir() / "runs", display, engine_args, create=create,
                   name=name)


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
