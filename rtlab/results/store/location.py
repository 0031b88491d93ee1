# SPDX-License-Identifier: MIT
"""Where a store is, and what is refused there: the location (`--store`, $RTLAB_STORE,
the XDG default), the SQLAlchemy URL of a database URL, the check of what is at a file
path before SQLite opens it (never a byte written), and the one-line messages of the
database and its driver.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from rtlab.errors import RtlabError, UsageError
from rtlab.fileio import PATH_SHOWN, kind_of, new_place
from rtlab.textfmt import shown

ENV_VAR = "RTLAB_STORE"
CONNECT_TIMEOUT_S = 10  # a server that does not answer: fail instead of hanging
# How long an SQLite writer waits for another process's write transaction (sqlite3's
# default is 5 s; several monitors and pushes into one file can queue for longer).
SQLITE_BUSY_TIMEOUT_S = 60
_DRIVER_HINT = ("install it into rtlab's environment: pip install 'psycopg>=3.1' "
                "(scripts/setup.sh does that), or use a SQLite file")
_SQLITE_MAGIC = b"SQLite format 3\x00"  # the first 16 bytes of every SQLite database
NEW_PATH_HINT = ("name a new path (rtlab creates the store when it first stores a run), "
                 "or remove the file if it is not needed")
_OTHER_PATH_HINT = "name a file path (rtlab creates the store when it first stores a run)"
READ_HINT = "give the path of an rtlab store, or the URL of its database"
_LIBPQ_HINT = ("install libpq: apt-get install libpq5 (scripts/setup.sh does that), "
               "or pip install 'psycopg[binary]'")
URL_HINT = "give a file path (SQLite) or postgresql://USER@HOST/DB"


class NoStoreError(UsageError):
    """A command that only reads was given a store file that does not exist."""


class StoreUnreachableError(RtlabError):
    """The database server does not answer (it may later): exit 1."""


def quoted(text: str) -> str:
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


# URLs ---------------------------------------------------------------------------------
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
        raise UsageError(f"invalid store URL {mask_password(loc)}: {first_line(exc)}",
                         hint=URL_HINT) from None
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


def sqlite_file_of(url: Any, name: str, display: str) -> Path:
    """The file of a `sqlite:///FILE` store URL; a memory-only database (what is stored
    vanishes with the command, and it holds nothing to read) and options are refused."""
    if url.database in (None, "", ":memory:") or url.query.get("mode") == "memory":
        raise UsageError(
            f"{name} {quoted(display)} is a memory-only database: runs stored there "
            "vanish when the command ends, and it holds none to read",
            hint="give a file path (SQLite) or a server URL (postgresql://...)")
    if url.query:
        raise UsageError(f"{name} {quoted(display)}: a sqlite:/// store URL takes no "
                         f"options ({', '.join(sorted(url.query))})",
                         hint="give sqlite:///FILE or the file path")
    return Path(url.database).expanduser()


# errors of the database and its driver -------------------------------------------------
def first_line(exc: BaseException | str) -> str:
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    return re.sub(r"\s+", " ", lines[0]) if lines else type(exc).__name__


def reason(exc: BaseException) -> str:
    """The driver's own message, first line, without SQLAlchemy's decorations."""
    orig = getattr(exc, "orig", None)
    return first_line(orig if orig is not None else exc)


def db_error(exc: BaseException, doing: str, display: str) -> RtlabError:
    """One line saying what failed and how to fix it (exit code 1: the database's state)."""
    why = reason(exc)
    low = why.lower()
    what = {"open": "cannot open", "read": "cannot read", "store": "cannot write to"}[doing]
    message = f"{what} the result store {mask_password(display)}: {why}"
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


def driver_error(exc: ImportError, display: str) -> UsageError:
    text = first_line(exc)
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


# what is at a file path ----------------------------------------------------------------
def check_sqlite_file(path: Path, name: str, display: str, create: bool) -> bool:
    """Whether an SQLite store file is at `path` (False: nothing is there); anything else
    there is refused in one line (UsageError): a directory, FIFO, device or socket, a
    dangling symbolic link, an empty file, a file that is not an SQLite database. Never
    opens anything but a regular file, and that read-only and without blocking."""
    given = f"{name} {quoted(display)}"
    hint = NEW_PATH_HINT if create else READ_HINT
    try:
        st = os.stat(path)
    except FileNotFoundError:
        if os.path.islink(path):
            raise UsageError(f"{given} is a symbolic link to nothing "
                             f"({quoted(os.readlink(path))})",
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
                         hint=_OTHER_PATH_HINT if create else READ_HINT)
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
                         hint=_OTHER_PATH_HINT if create else READ_HINT)
    if head != _SQLITE_MAGIC:
        raise UsageError(f"{given} is not an SQLite database (an rtlab store is one); "
                         "nothing was written to it", hint=hint)
    return True


def _file_kind(mode: int) -> str | None:
    """What a file that is not a regular file is, for a message (None: regular)."""
    return None if stat.S_ISREG(mode) else kind_of(mode)


def check_creatable(path: Path, name: str, display: str) -> None:
    """A new store file can be made at `path` (which does not exist) later: its nearest
    existing ancestor is a directory this process may write into, on a real filesystem
    (checked now, before any work). No permission is exit 1, the rest exit 2."""
    given = f"{name} {quoted(display)} cannot be created"
    try:
        place = new_place(path)
    except OSError as exc:  # a symbolic link loop, no permission to look: not usable
        raise UsageError(f"{given}: {exc.filename} is not a directory",
                         hint="give a path in a directory") from None
    if place.not_directory is not None:
        raise UsageError(f"{given}: {place.existing} is not a directory",
                         hint="give a path in a directory")
    if place.pseudo_fs is not None:  # /proc, /sys, cgroupfs...: not a place for data
        raise UsageError(f"{given}: {place.existing} is on the kernel's {place.pseudo_fs} "
                         "filesystem", hint="give a path in a directory")
    if not place.writable:
        raise RtlabError(f"{given}: no permission to write in {place.existing}",
                         hint="give a path in a directory you may write to")
