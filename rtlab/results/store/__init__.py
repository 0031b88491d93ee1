# SPDX-License-Identifier: MIT
"""The result store: one row per run in an SQL database (SQLite by default, PostgreSQL).

Location: `--store` (a file path or a database URL), else $RTLAB_STORE, else
`${XDG_DATA_HOME:-~/.local/share}/rtlab/rtlab.db`. Raw engine output (JSON Lines,
written while a run is going) lives in `runs/` beside an SQLite file (for a server
URL: in the XDG data directory). A stored run is never overwritten. Several
processes may write to one store at once: each run is one transaction, the schema
is created under a lock. See docs/results.md.

Opening a store changes nothing (`Store.open`): a location that is not an rtlab store
(an empty file, any other file, someone else's database, a FIFO, a device, a
memory-only database) is refused in one line before a byte is written to it. A new
SQLite file and the tables of an empty database are created at the first write (a run
stored), never by opening, so a command that fails before it stores leaves nothing; the
commands that only read open the store read-only.

Runs are copied between two stores (`rtlab results push|pull`, policy in
rtlab.results.sync) through `select`, `digests`, `stored`, `raw_files`, `read_raw` and
`add_copy`: one transaction per run; a server database keeps the raw files of the runs
copied into it in its own tables.

SQLAlchemy and the database driver are imported only when a store is opened; a
`postgresql://` URL uses psycopg 3 (`pip install 'rtlab[postgres]'`).

One module per job: `location` (where the store is, what is refused there, the
messages of the database and its driver), `schema` (the database and rtlab's tables),
`runs` (the rows of runs), `raw_files` (a run's raw files), `copying` (a run stored with
its raw files), `opening` (`Store.open`).
"""

import logging

from rtlab.results.store.location import (
    ENV_VAR,
    NoStoreError,
    StoreUnreachableError,
    default_data_dir,
    engine_url,
    location_name,
    mask_password,
    resolve_location,
)
from rtlab.results.store.opening import Store, check_store
from rtlab.results.store.raw_files import RawFile
from rtlab.results.store.runs import RunRow, StoredRun, as_utc, content_digest
from rtlab.results.store.schema import STORE_SCHEMA_VERSION

# SQLAlchemy's pool logs what fails in its own clean-up (a connection that cannot be
# closed after an interrupt) with a traceback, which logging's last resort would print:
# rtlab reports database errors itself, as one line
logging.getLogger("sqlalchemy").addHandler(logging.NullHandler())

__all__ = ["ENV_VAR", "STORE_SCHEMA_VERSION", "NoStoreError", "RawFile", "RunRow", "Store",
           "StoreUnreachableError", "StoredRun", "as_utc", "check_store", "content_digest",
           "default_data_dir", "engine_url", "location_name", "mask_password",
           "resolve_location"]
