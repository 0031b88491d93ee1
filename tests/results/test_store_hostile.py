# SPDX-License-Identifier: MIT
"""Hostile stores (issue 24, item 3): every command that takes --store, given something
that is not an rtlab store (an empty file, a text file, someone else's SQLite or
PostgreSQL database, a directory, a FIFO, a device, a memory-only URL), refuses it in
one line with its exit code, writes not a byte to it and creates nothing; a store is
created only by a command that stores, once its input was accepted.

The commands are found in the CLI's parsers (every subcommand with a --store option):
a new one fails `test_every_store_command_is_covered` until it is given arguments here."""

from __future__ import annotations

import argparse
import os
import sqlite3
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from rtlab.cli import build_parser, main
from rtlab.probes.registry import shape as probe_shape
from rtlab.results.importers import FORMATS
from rtlab.results.store import Store
from tests.results.test_results_store import make_result
from tests.support.devices import device_nodes
from tests.support.paths import DATA

# Each command with --store: (arguments, whether it stores). `{good}` is a store holding
# run a0000001, `{new}` a path in a directory that does not exist, `{out}`/`{png}` an
# output file's new path, `{file}` a valid peer-tool file to import, `{state}` a monitor
# state directory that does not exist. Paths are relative to the test's directory (the
# CLI cuts long quoted values in messages).
COMMANDS: dict[str, tuple[list[str], bool]] = {
    "results list": (["results", "list"], False),
    "results show": (["results", "show", "last"], False),
    "export": (["export", "last"], False),
    "report": (["report", "last", "-o", "{out}"], False),
    "plot": (["plot", "last", "-o", "{png}"], False),
    "compare": (["compare", "last", "last"], False),
    "history": (["history", "--host", "h"], False),
    "spikes": (["spikes", "last"], False),
    "results push": (["results", "push", "--to", "{new}"], False),  # --store: the source
    "results import": (["results", "import", "--format", "cyclictest-json", "{file}"], True),
    "results pull": (["results", "pull", "--from", "{good}"], True),
    "results fetch": (["results", "fetch", "--target", "nosuchboard.invalid"], True),
    "run": (["run", "--probe", "timer", "--duration", "1s", "--no-report"], True),
    "monitor": (["monitor", "--duration", "2s", "--state-dir", "{state}"], True),
    # --plan: checked, planned, nothing measured (the store is checked before anything)
    "tune": (["tune", "--plan", "--knobs", "stat-interval", "--dir", "{state}"], True),
}


def _store_commands() -> set[str]:
    """Every subcommand of the CLI that has a --store option, from its parsers."""
    found: set[str] = set()

    def walk(parser: argparse.ArgumentParser, path: list[str]) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, [*path, name])
                return
        if any("--store" in a.option_strings for a in parser._actions):
            found.add(" ".join(path))

    walk(build_parser(), [])
    return found


def test_every_store_command_is_covered() -> None:
    assert _store_commands() == set(COMMANDS)


def _fifo(p: Path) -> None:
    os.mkfifo(p)


def _foreign_sqlite(p: Path, table: str = "t") -> None:
    conn = sqlite3.connect(p)
    conn.execute(f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, name TEXT)")
    conn.execute(f"INSERT INTO {table} (name) VALUES ('theirs')")
    conn.commit()
    conn.close()


# Bad stores: how to make one at a path, and the words of its refusal.
BAD: dict[str, tuple[Callable[[Path], None], str]] = {
    "empty": (lambda p: p.write_bytes(b""), "is an empty file, not an rtlab store"),
    "text": (lambda p: p.write_text("name,value\nx,1\n"), "is not an SQLite database"),
    "foreign-sqlite": (_foreign_sqlite, "is an SQLite database that is not an rtlab store"),
    "foreign-runs": (lambda p: _foreign_sqlite(p, "runs"),
                     "is an SQLite database that is not an rtlab store (its tables: runs)"),
    "directory": (lambda p: (p / "rtlab.db").mkdir(parents=True), "is a directory"),
    "fifo": (_fifo, "is a FIFO, not a store file"),
}
MEMORY = ["sqlite://", "sqlite:///:memory:"]


def _snapshot(root: Path) -> dict[str, tuple[int, int, int, bytes | None]]:
    """Every file and directory under `root`: (type, size, mtime_ns, content of a file)."""
    seen = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            st = p.lstat()
            data = p.read_bytes() if stat.S_ISREG(st.st_mode) else None
            seen[str(p.relative_to(root))] = (stat.S_IFMT(st.st_mode), st.st_size,
                                              st.st_mtime_ns, data)
    return seen


@pytest.fixture
def place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """A working directory with a good store, a file to import; no $RTLAB_STORE."""
    monkeypatch.delenv("RTLAB_STORE", raising=False)
    monkeypatch.delenv("RTLAB_LAB_STORE", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    monkeypatch.chdir(tmp_path)
    store = Store.open("good/rtlab.db")
    store.add(make_result("a0000001"), probe_shape)
    store.close()
    yield {"good": "good/rtlab.db", "new": "new/s.db", "out": "out.html", "png": "out.png",
           "file": str(DATA / "cyclictest.json"), "state": "state"}


def _argv(command: str, place: dict[str, str]) -> list[str]:
    return [a.format(**place) for a in COMMANDS[command][0]]


def _refused(capsys: pytest.CaptureFixture[str], argv: list[str], code: int = 2) -> str:
    """Run the CLI; the one line it printed on stderr (checked: the exit code, one line,
    no traceback)."""
    got = main(argv)
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert got == code, (argv, captured.err)
    assert len(lines) == 1 and lines[0].startswith("rtlab: error: "), captured.err
    assert "Traceback" not in captured.err + captured.out
    return lines[0]


@pytest.mark.parametrize("kind", sorted(BAD))
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_not_a_store_is_refused_untouched(command: str, kind: str, place: dict[str, str],
                                          tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    """Read or store: one line naming --store and the path, exit 2, the file's bytes and
    mtime as they were, nothing created anywhere in the working directory."""
    bad = Path("bad")
    make, words = BAD[kind]
    make(bad)
    before = _snapshot(tmp_path)
    line = _refused(capsys, [*_argv(command, place), "--store", str(bad)])
    assert words in line and f"--store '{bad}" in line, line
    assert ("name a new path" in line or "name a file path" in line) == COMMANDS[command][1]
    assert _snapshot(tmp_path) == before


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_device_is_never_opened_for_writing(command: str, place: dict[str, str],
                                            tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """The null device as the store (the test's own node as root, never the machine's
    /dev/null): refused, and still the same device node (not replaced by a file, as a
    rename over it would)."""
    null = device_nodes(tmp_path)["null"]
    before = os.stat(null)
    listing = _snapshot(tmp_path)
    line = _refused(capsys, [*_argv(command, place), "--store", null])
    assert f"'{null}' is a character device, not a store file" in line
    after = os.stat(null)
    assert stat.S_ISCHR(after.st_mode) and (after.st_ino, after.st_rdev) == (
        before.st_ino, before.st_rdev)
    assert _snapshot(tmp_path) == listing


@pytest.mark.parametrize("url", MEMORY)
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_memory_only_store_is_refused(command: str, url: str, place: dict[str, str],
                                      tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    """A store in memory keeps nothing ("imported" into it was a lie) and holds nothing."""
    listing = _snapshot(tmp_path)
    line = _refused(capsys, [*_argv(command, place), "--store", url])
    assert f"--store '{url}' is a memory-only database" in line
    assert _snapshot(tmp_path) == listing


@pytest.mark.parametrize("command", ["results list", "results import", "run"])
def test_environment_variable_is_named(command: str, place: dict[str, str], tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    """$RTLAB_STORE follows the rules of --store, and the message names it."""
    bad = Path("empty.db")
    bad.write_bytes(b"")
    for value, words in ((str(bad), "is an empty file"), ("sqlite://", "is a memory-only")):
        monkeypatch.setenv("RTLAB_STORE", value)
        listing = _snapshot(tmp_path)
        line = _refused(capsys, _argv(command, place))
        assert f"$RTLAB_STORE '{value}' {words}" in line, line
        assert _snapshot(tmp_path) == listing


def test_push_and_pull_name_the_other_store(place: dict[str, str], tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """--to and --from are named in their refusal, and are left as they were."""
    bad = Path("empty.db")
    bad.write_bytes(b"")
    listing = _snapshot(tmp_path)
    line = _refused(capsys, ["results", "push", "--store", place["good"], "--to", str(bad)])
    assert f"--to '{bad}' is an empty file" in line and "name a new path" in line
    line = _refused(capsys, ["results", "pull", "--store", place["new"], "--from", str(bad)])
    assert f"--from '{bad}' is an empty file" in line and "name a new path" not in line
    line = _refused(capsys, ["results", "push", "--store", place["good"], "--dry-run",
                             "--to", "sqlite://"])
    assert "--to 'sqlite://' is a memory-only database" in line
    assert _snapshot(tmp_path) == listing


# A new store path: created by the first run stored, by nothing else -----------------
def test_reads_of_a_new_path_create_nothing(place: dict[str, str], tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    listing = _snapshot(tmp_path)
    for command, (_, stores) in sorted(COMMANDS.items()):
        if stores or command == "results list":  # list: a missing store holds no runs
            continue
        line = _refused(capsys, [*_argv(command, place), "--store", place["new"]])
        assert "there is no result store" in line, line
    assert main(["results", "list", "--store", place["new"]]) == 0
    assert "no runs stored" in capsys.readouterr().out
    assert main(["results", "push", "--dry-run", "--store", place["good"],
                 "--to", place["new"]]) == 0
    assert "would push 1 of 1 runs" in capsys.readouterr().out
    assert _snapshot(tmp_path) == listing


@pytest.mark.parametrize("fmt", ["rtlab", *FORMATS])
def test_failed_import_leaves_no_store(fmt: str, place: dict[str, str], tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    """A file of every format that is not what it says: refused, and no store file, no
    directory for it."""
    bad = Path("garbage.txt")
    bad.write_text("this is not output of any tool\n1 2 3\n")
    listing = _snapshot(tmp_path)
    _refused(capsys, ["results", "import", "--format", fmt, str(bad), "--store",
                      place["new"]])
    assert _snapshot(tmp_path) == listing


def test_store_is_created_by_the_first_run_stored(place: dict[str, str],
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """The counterpart: an accepted import creates the store (and its directory), and
    the next command reads it."""
    new = Path(place["new"])
    assert main(["results", "import", "--format", "cyclictest-json", place["file"],
                 "--store", str(new)]) == 0
    assert new.is_file() and new.read_bytes().startswith(b"SQLite format 3\x00")
    assert [p.name for p in new.parent.iterdir()] == ["s.db"]  # no temporary left
    capsys.readouterr()
    assert main(["results", "list", "--store", str(new), "--json"]) == 0
    assert '"total": 1' in capsys.readouterr().out


def test_engine_refusing_a_run_leaves_no_store(place: dict[str, str], tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """The engine refuses the run's arguments: no store file, no runs/ directory."""
    listing = _snapshot(tmp_path)
    line = _refused(capsys, ["run", "--probe", "switch", "--probe-opt", "mechanism=nope",
                             "--duration", "1s", "--no-report", "--store", place["new"]])
    assert "the engine refused its arguments" in line
    assert _snapshot(tmp_path) == listing


def test_concurrent_creators_share_one_store(place: dict[str, str]) -> None:
    """Two Store objects opened on one new path before either stored: both runs land in
    the one file the first write created (the second write finds it complete)."""
    a, b = Store.open(place["new"]), Store.open(place["new"])
    assert a.list() == b.list() == [] and not Path(place["new"]).exists()
    a.add(make_result("b0000001"), probe_shape)
    b.add(make_result("b0000002"), probe_shape)
    assert sorted(r.id for r in a.list(None)) == ["b0000001", "b0000002"]
    a.close()
    b.close()


# PostgreSQL: an empty database is where rtlab makes its tables, at the first run stored
def _pg_tables(url: str) -> set[str]:
    from sqlalchemy import create_engine, inspect

    from rtlab.results.store import engine_url

    sa_url, args = engine_url(url)
    engine = create_engine(sa_url, **args)
    try:
        with engine.connect() as conn:
            return set(inspect(conn).get_table_names())
    finally:
        engine.dispose()


def test_postgresql_database_of_someone_else_is_refused_without_ddl(
        pg_url: str, place: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    import psycopg

    from rtlab.results.store import engine_url

    sa_url, _ = engine_url(pg_url)
    with psycopg.connect(host=sa_url.query["host"], user=sa_url.username,
                         dbname=sa_url.database, autocommit=True) as conn:
        conn.execute("CREATE TABLE invoices (id serial PRIMARY KEY, total int)")
    for command, (_, stores) in sorted(COMMANDS.items()):
        line = _refused(capsys, [*_argv(command, place), "--store", pg_url])
        assert "is a database that is not an rtlab store (its tables: invoices)" in line
        assert ("name a new path" in line) == stores, line
    assert _pg_tables(pg_url) == {"invoices"}


def test_postgresql_empty_database_gets_tables_only_from_a_stored_run(
        pg_url: str, place: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["results", "list", "--store", pg_url]) == 0
    assert "no runs stored" in capsys.readouterr().out
    _refused(capsys, ["results", "show", "last", "--store", pg_url])
    Path("garbage.txt").write_text("not cyclictest output\n")
    _refused(capsys, ["results", "import", "--format", "cyclictest-hist", "garbage.txt",
                      "--store", pg_url])
    assert main(["results", "push", "--dry-run", "--store", place["good"],
                 "--to", pg_url]) == 0
    assert _pg_tables(pg_url) == set()  # nothing read or refused made a table
    assert main(["results", "import", "--format", "cyclictest-json", place["file"],
                 "--store", pg_url]) == 0
    assert {"runs", "store_info", "run_digests"} <= _pg_tables(pg_url)


@pytest.mark.parametrize("where", ["/proc/rtlab-test.db", "/sys/kernel/rtlab-test/s.db"])
def test_no_store_on_a_kernel_pseudo_filesystem(where: str, place: dict[str, str],
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """A store to create under /proc or /sys is refused before the import's work (it
    failed at the first write, exit 1, after it)."""
    line = _refused(capsys, ["results", "import", "--format", "cyclictest-json",
                             place["file"], "--store", where])
    assert "kernel's" in line and "filesystem" in line, line
    assert not os.path.lexists(where)
