# SPDX-License-Identifier: MIT
"""A throw-away PostgreSQL server for the tests.

`PgServer.start()` runs initdb into a fresh temporary directory and starts the server
with pg_ctl, listening only on a Unix socket in that directory (no TCP). The server
binaries are Debian's (`/usr/lib/postgresql/<version>/bin`, package `postgresql`,
installed by scripts/setup.sh). PostgreSQL refuses to run as root, so under root the
server runs as the `postgres` user (runuser); otherwise as the current user.

`stop()` stops it and removes the directory. A watchdog process whose stdin is a pipe
from this process does the same when the test process dies without cleaning up
(kill -9): nothing is left running either way.
"""

from __future__ import annotations

import os
import pwd
import re
import shlex
import shutil
import subprocess
import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path

BIN_GLOB = "/usr/lib/postgresql/*/bin"
# An unusual session time zone (UTC+12:45 / +13:45): any timestamp the store does not
# normalise to UTC shows up in the tests.
SERVER_TIMEZONE = "Pacific/Chatham"


def find_bindir() -> Path | None:
    """The newest installed server's bin directory (initdb, pg_ctl, postgres)."""
    found = []
    for d in Path("/").glob(BIN_GLOB.lstrip("/")):
        m = re.fullmatch(r"\d+(\.\d+)?", d.parent.name)
        if m and all((d / tool).is_file() for tool in ("initdb", "pg_ctl", "postgres")):
            found.append((float(d.parent.name), d))
    return max(found)[1] if found else None


def unavailable_reason() -> str | None:
    """Why no server can be started here, or None."""
    try:
        import psycopg  # noqa: F401
    except ImportError as exc:
        return (f"the PostgreSQL driver psycopg cannot be imported ({exc}); scripts/setup.sh "
                "installs it (the `postgres` extra) and libpq5")
    if find_bindir() is None:
        return ("PostgreSQL server binaries not found under /usr/lib/postgresql/*/bin "
                "(scripts/setup.sh installs the Debian package `postgresql` when run as root)")
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root but there is no `postgres` user to run the server as"
        if shutil.which("runuser") is None:
            return "running as root but `runuser` (util-linux) is missing"
    return None


@dataclass
class PgServer:
    bindir: Path
    base: Path  # data directory, socket, log; removed by stop()
    user: str = "rtlab"  # the database superuser initdb creates
    _watchdog: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def socket_dir(self) -> Path:
        return self.base

    @property
    def data(self) -> Path:
        return self.base / "data"

    @property
    def log(self) -> Path:
        return self.base / "server.log"

    @staticmethod
    def _as_owner(cmd: list[str]) -> list[str]:
        return ["runuser", "-u", "postgres", "--", *cmd] if os.geteuid() == 0 else cmd

    def _run(self, cmd: list[str]) -> None:
        proc = subprocess.run(self._as_owner(cmd), cwd=self.base, capture_output=True,
                              text=True, timeout=120, check=False)
        if proc.returncode != 0:
            log = self.log.read_text(errors="replace")[-2000:] if self.log.exists() else ""
            raise RuntimeError(f"{shlex.join(cmd)} failed ({proc.returncode}): "
                               f"{proc.stderr.strip()} {proc.stdout.strip()} {log}")

    @classmethod
    def start(cls) -> PgServer:
        bindir = find_bindir()
        assert bindir is not None, unavailable_reason()
        # Under /tmp, not pytest's tmp_path: its parents are root-only (0700), and the
        # socket path must stay short (108 bytes).
        base = Path(tempfile.mkdtemp(prefix="rtlab-pg-"))
        server = cls(bindir, base)
        if os.geteuid() == 0:
            pw = pwd.getpwnam("postgres")
            os.chown(base, pw.pw_uid, pw.pw_gid)
        os.chmod(base, 0o700)
        server._start_watchdog()
        try:
            server._run([str(bindir / "initdb"), "-D", str(server.data), "-U", server.user,
                         "--auth=trust", "--no-sync", "-E", "UTF8", "--no-locale"])
            server.start_server()
        except BaseException:
            server.stop()
            raise
        return server

    def _start_watchdog(self) -> None:
        """Stops the server and removes `base` once our end of its stdin pipe closes."""
        pg_ctl = shlex.join(self._as_owner([str(self.bindir / "pg_ctl"), "-D", str(self.data),
                                            "-m", "immediate", "-w", "stop"]))
        script = (f"cat >/dev/null; if [ -f {shlex.quote(str(self.data / 'postmaster.pid'))} ]; "
                  f"then {pg_ctl} >/dev/null 2>&1; fi; rm -rf {shlex.quote(str(self.base))}")
        self._watchdog = subprocess.Popen(["sh", "-c", script], stdin=subprocess.PIPE,
                                          cwd="/", start_new_session=True)

    def stop(self) -> None:
        """Stop the server (immediately) and remove its directory."""
        if self._watchdog is not None and self._watchdog.stdin is not None:
            self._watchdog.stdin.close()
            self._watchdog.wait(timeout=120)
        shutil.rmtree(self.base, ignore_errors=True)

    def url(self, database: str = "postgres", *, driver: str = "postgresql") -> str:
        """A libpq-style URL reaching `database` through the Unix socket."""
        return f"{driver}://{self.user}@/{database}?host={self.socket_dir}"

    def create_database(self, prefix: str = "rtlab_t") -> str:
        """A new empty database; returns its name."""
        import psycopg

        name = f"{prefix}_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(host=str(self.socket_dir), user=self.user, dbname="postgres",
                             autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return name

    def start_server(self) -> None:
        """(Re)start the server on the existing data directory."""
        opts = (f"-c listen_addresses='' -c unix_socket_directories='{self.base}' "
                f"-c unix_socket_permissions=0700 -c fsync=off -c full_page_writes=off "
                f"-c synchronous_commit=off -c timezone='{SERVER_TIMEZONE}'")
        self._run([str(self.bindir / "pg_ctl"), "-D", str(self.data), "-l", str(self.log),
                   "-w", "-t", "60", "-o", opts, "start"])

    def stop_server(self) -> None:
        """Stop the server but keep its data (to test a store whose server went down)."""
        self._run([str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w",
                   "stop"])
