# SPDX-License-Identifier: MIT
"""The store through the CLI, as a user meets it: `--store postgresql://...` on every
command that reads or writes runs, a real run into PostgreSQL, and what the user sees
when the URL is wrong, the server is down or the driver is missing."""

from __future__ import annotations

import json
import shlex
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import quote

import pytest

from rtlab.cli import main
from rtlab.errors import RtlabError
from rtlab.exitcodes import ExitCode
from rtlab.probes.registry import shape as probe_shape
from rtlab.results.model import load_result
from rtlab.results.store import Store
from rtlab.results.store import location as store_location
from tests.support.env import subprocess_env
from tests.support.pg_server import PgServer

# Every command with --store, with arguments that make it read a run.
READERS: list[list[str]] = [
    ["results", "list"], ["results", "show", "last"], ["export", "last"],
    ["report", "last", "-o", "r.html"], ["compare", "last", "last"],
    ["history", "--host", "h"], ["plot", "last", "-o", "p.png"], ["spikes", "last"],
    ["results", "import", "x.jsonl"],
]


def one_error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[int, str]:
    code = main(argv)
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err and lines[0].startswith("rtlab: error: ")
    return code, lines[0]


def cli(*argv: str, cwd: Path | None = None, env: dict[str, str] | None = None,
        timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rtlab", *argv], capture_output=True,
                          text=True, cwd=cwd, timeout=timeout, env=subprocess_env(env))


@pytest.fixture
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("RTLAB_STORE", raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_server_down_every_command(isolated: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """No server on the socket: every command says so in one line, exit 1, and never
    shows the URL's password."""
    url = f"postgresql://rtlab:sekrit@/rtlab?host={isolated}"
    (isolated / "x.jsonl").write_text("")
    for argv in READERS:
        code, line = one_error(capsys, [*argv, "--store", url])
        assert code == ExitCode.ERROR, (argv, line)
        assert "cannot open the result store postgresql://rtlab:***@/rtlab" in line, line
        assert "No such file or directory" in line and "is the database server running" \
            in line and "sekrit" not in line, line


@pytest.mark.parametrize(("url", "code", "says"), [
    ("postgresql://rtlab:sekrit@127.0.0.1:1/rtlab", 1, "Connection refused"),
    ("postgresql://rtlab:sekrit@[::1/rtlab", 2, "invalid store URL"),
    ("mysqlx://rtlab@h/rtlab", 2, "unknown database type 'mysqlx'"),
    ("postgresql+psycopg://rtlab@/rtlab?host=/nonexistent&sslmod=x", 2,
     'invalid connection option "sslmod"'),
])
def test_wrong_url(isolated: Path, capsys: pytest.CaptureFixture[str], url: str, code: int,
                   says: str) -> None:
    got, line = one_error(capsys, ["results", "list", "--store", url])
    assert got == code and says in line and "sekrit" not in line, line


def test_wrong_database_or_user(pg_server: PgServer, isolated: Path,
                                capsys: pytest.CaptureFixture[str]) -> None:
    code, line = one_error(capsys, ["results", "list", "--store", pg_server.url("nosuchdb")])
    assert code == 1 and 'database "nosuchdb" does not exist' in line and "createdb" in line
    url = pg_server.url("postgres").replace("rtlab@", "nobody@")
    code, line = one_error(capsys, ["results", "list", "--store", url])
    assert code == 1 and 'role "nobody" does not exist' in line and "user name" in line


def test_driver_missing(isolated: Path, capsys: pytest.CaptureFixture[str],
                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Without psycopg a postgresql:// store is a usage error with the fix (exit 2); SQLite
    stores work as before (the driver is imported only for a PostgreSQL URL)."""
    monkeypatch.setitem(sys.modules, "psycopg", None)  # `import psycopg` fails
    code, line = one_error(capsys, ["results", "list", "--store", "postgresql:///rtlab"])
    assert code == ExitCode.USAGE
    assert "needs the PostgreSQL driver psycopg, which is not installed" in line
    assert "pip install 'psycopg>=3.1'" in line
    assert main(["results", "list", "--store", str(isolated / "s.db")]) == 0
    assert "no runs stored" in capsys.readouterr().out


def test_libpq_missing(isolated: Path) -> None:
    """psycopg's pure-Python implementation without the system's libpq: exit 2, the fix."""
    code = ("import ctypes.util, sys\nctypes.util.find_library = lambda name: None\n"
            "from rtlab.cli import main\n"
            "sys.exit(main(['results', 'list', '--store', 'postgresql:///rtlab']))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=subprocess_env({"PSYCOPG_IMPL": "python"}), timeout=60)
    assert proc.returncode == ExitCode.USAGE, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert "cannot load libpq" in line and "apt-get install libpq5" in line


def test_psycopg2_not_installed(isolated: Path, capsys: pytest.CaptureFixture[str],
                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg2", None)
    code, line = one_error(capsys, ["results", "list", "--store",
                                    "postgresql+psycopg2://rtlab@/rtlab"])
    assert code == ExitCode.USAGE and "asks for psycopg2" in line and "postgresql://" in line


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A TCP port on 127.0.0.1 that accepts connections and never answers."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(srv.accept()[0])
            except OSError:
                continue

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    yield srv.getsockname()[1]
    stop.set()
    t.join()
    for s in held:
        s.close()
    srv.close()


def test_unresponsive_server_times_out(isolated: Path, silent_server: int,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """libpq waits forever by default; the store gives up after CONNECT_TIMEOUT_S."""
    monkeypatch.setattr(store_location, "CONNECT_TIMEOUT_S", 2)
    t0 = time.monotonic()
    with pytest.raises(RtlabError, match="timeout expired") as info:
        Store.open(f"postgresql://rtlab@127.0.0.1:{silent_server}/rtlab")
    assert 1.5 < time.monotonic() - t0 < 30
    assert info.value.code == ExitCode.ERROR and "server running" in info.value.one_line()


def test_url_forms_reach_one_database(pg_server: PgServer, isolated: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    """libpq's spellings: ?host=/socket/dir, the socket directory percent-encoded as the
    host, postgres://, an explicit +psycopg driver; a password is never displayed."""
    from tests.results.test_results_store import make_result

    db = pg_server.create_database()
    sock = str(pg_server.socket_dir)
    forms = [f"postgresql://rtlab@/{db}?host={sock}",
             f"postgresql://rtlab@{quote(sock, safe='')}/{db}",
             f"postgres://rtlab:sekrit@/{db}?host={sock}",
             f"postgresql+psycopg://rtlab@/{db}?host={sock}"]
    for i, url in enumerate(forms):
        Store.open(url).add(make_result(f"f0f0000{i}"), probe_shape)
    for url in forms:
        assert sorted(r.id for r in Store.open(url).list()) == [f"f0f0000{i}" for i in range(4)]
    assert Store.open(forms[2]).display == f"postgres://rtlab:***@/{db}?host={sock}"
    assert main(["results", "list", "--store", forms[2]]) == 0
    out = capsys.readouterr().out
    assert "f0f00002" in out and "sekrit" not in out and "rtlab:***@" in out


@pytest.mark.root
def test_real_runs_into_postgresql(probe_bin: str, require_root: None, pg_server: PgServer,
                                   pg_url: str, isolated: Path) -> None:
    """`rtlab run` with the real engine into PostgreSQL, then every reader from it."""
    env = {"RTLAB_PROBE": probe_bin}
    first = cli("run", "--duration", "2s", "--no-progress", "--store", pg_url, cwd=isolated,
                env=env)
    assert first.returncode == 0, first.stderr
    assert f"stored in {pg_url}" in first.stdout and "worst wake-up latency" in first.stdout
    # the second through $RTLAB_STORE, as a user would set it once
    second = cli("run", "--duration", "2s", "--cpus", "0", "--no-progress", "--no-report",
                 cwd=isolated, env={**env, "RTLAB_STORE": pg_url})
    assert second.returncode == 0, second.stderr
    store = Store.open(pg_url)
    rows = store.list()
    assert len(rows) == 2 and {r.status for r in rows} == {"completed"}
    new, old = rows
    assert new.created > old.created and new.created.utcoffset().total_seconds() == 0
    # the report of a server store goes to the current directory, raw output to XDG
    assert (isolated / f"rtlab-report-{old.id}.html").stat().st_size > 10_000
    runs = isolated / "xdg" / "rtlab" / "runs"
    raw = (runs / f"{old.id}.jsonl").read_text()
    assert raw.startswith('{"type":"header"') and '{"type":"result"' in raw
    assert (runs / f"{new.id}.jsonl").exists()

    listed = cli("results", "list", "--store", pg_url)
    assert listed.returncode == 0 and old.id in listed.stdout and new.id in listed.stdout
    shown = cli("results", "show", old.id[:5], "--store", pg_url)
    assert shown.returncode == 0 and f"run {old.id}: completed" in shown.stdout
    exported = cli("export", "last", "--format", "json", "--store", pg_url)
    assert exported.returncode == 0
    assert load_result(json.loads(exported.stdout)).to_dict() == store.get(new.id).to_dict()
    report = cli("report", old.id, new.id, "-o", str(isolated / "both.html"), "--store", pg_url)
    assert report.returncode == 0, report.stderr
    html = (isolated / "both.html").read_text()
    assert old.id in html and new.id in html
    compared = cli("compare", old.id, new.id, "--store", pg_url)
    assert compared.returncode == 0, compared.stderr
    assert old.id in compared.stdout and new.id in compared.stdout
    history = cli("history", "--host", str(new.host), "--store", pg_url)
    assert history.returncode == 0, history.stderr
    assert str(new.kernel_release) in history.stdout and "baseline" in history.stdout
    plot = cli("plot", "last", "-o", str(isolated / "p.png"), "--store", pg_url)
    assert plot.returncode == 0 and (isolated / "p.png").stat().st_size > 1000, plot.stderr
    spikes = cli("spikes", "last", "--store", pg_url)
    assert spikes.returncode == 1 and "was not recorded with tracing" in spikes.stderr


def test_server_restarts_between_open_and_store(pg_server: PgServer, isolated: Path) -> None:
    """Regression: `rtlab run` opens the store when it starts and stores the run at the
    end; a server restart in between left a dead pooled connection and the run was not
    stored. Pooled connections are now checked before use."""
    from tests.results.test_results_store import make_result

    server = PgServer.start()  # a private server: this test restarts it
    try:
        store = Store.open(server.url(server.create_database()))
        assert store.list() == [] and not store.exists("5e5e0001")
        server.stop_server()
        server.start_server()
        store.add(make_result("5e5e0001"), probe_shape)
        assert [r.id for r in store.list()] == ["5e5e0001"]
    finally:
        server.stop()


def test_server_stops_during_a_run(fake_probe: Callable[..., Path], pg_server: PgServer,
                                   isolated: Path) -> None:
    """The server goes away while a run measures: the run ends with exit 1 and one line
    naming the raw output; once the server is back, importing that file stores the run."""
    server = PgServer.start()  # a private server: this test stops it
    try:
        db = server.create_database()
        url = server.url(db)
        fake_probe("normal", period=0.1)
        proc = subprocess.Popen(
            [sys.executable, "-m", "rtlab", "run", "--duration", "40s", "--cpus", "0",
             "--no-progress", "--no-report", "--store", url],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=isolated,
            env=subprocess_env())
        runs = isolated / "xdg" / "rtlab" / "runs"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # measuring: snapshots arrive
            files = list(runs.glob("????????.jsonl")) if runs.exists() else []
            if files and files[0].read_text().count('"snapshot"') >= 2:
                break
            time.sleep(0.05)
        server.stop_server()
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == ExitCode.ERROR, (out, err)
        (line,) = err.strip().splitlines()
        (raw,) = [p for p in runs.glob("*.jsonl") if len(p.stem) == 8]  # the first phase
        assert f"run {raw.stem} was NOT stored" in line and str(raw) in line, line
        again = f"rtlab results import {raw} --store {shlex.quote(url)}"
        assert again in line and "Traceback" not in err
        server.start_server()
        imported = cli("results", "import", str(raw), "--store", url)
        assert imported.returncode == 0, imported.stderr
        (row,) = Store.open(url).list()
        assert row.id == raw.stem and row.samples > 0
    finally:
        server.stop()
    assert not server.base.exists()
