# SPDX-License-Identifier: MIT
"""The result model's versioning and the store's guarantees, on SQLite and on a real
PostgreSQL server (`store_loc` runs each store test on both; tests/results/conftest.py)."""

from __future__ import annotations

import json
import subprocess
import sys
import zlib
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from rtlab.errors import RtlabError, UsageError
from rtlab.exitcodes import ExitCode
from rtlab.probes.registry import shape as probe_shape
from rtlab.report import EXPORTERS, verdict
from rtlab.results.histogram import LogLinHistogram
from rtlab.results.model import RESULT_SCHEMA_VERSION, Channel, Phase, RunResult, load_result
from rtlab.results.store import Store, resolve_location
from rtlab.results.windows import WindowMaxima
from rtlab.runner import import_jsonl
from tests.support.env import subprocess_env


def make_result(run_id: str = "abcd1234", *, partial: bool = False,
                rt_valid: bool | None = True, n: int = 1000,
                start: str = "2026-01-01T00:00:00+00:00", host: str | None = None,
                preempt: str | None = None, release: str = "6.1") -> RunResult:
    values = [10_000 + i for i in range(n)]
    ch = Channel(name="cpu1", cpu=1, samples=n, min_ns=values[0], max_ns=2_410_000,
                 sum_ns=sum(values), max_at_ns=3 * 10**9,
                 hist=LogLinHistogram.from_values([*values[:-1], 2_410_000]))
    system = {"release": release, "hostname": host, "preempt": preempt}
    return RunResult(run_id=run_id, status="partial" if partial else "completed",
                     probe="timer", phases=[Phase("main", [ch], 10**10)], partial=partial,
                     rt_valid=rt_valid, scenario={"name": "quick", "hash": "0" * 64},
                     notes=["engine killed by signal 9"] if partial else [],
                     provenance={"engine": {"system": system},
                                 "host": {"start_wall": start}})


@pytest.fixture(scope="session")
def real_jsonl(probe_bin: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One second of real engine output (timer on CPU0, SCHED_OTHER: no root needed)."""
    path = tmp_path_factory.mktemp("real") / "engine-output.jsonl"
    with path.open("w") as out:
        proc = subprocess.run([probe_bin, "timer", "--cpus", "0", "--duration", "1s",
                               "--policy", "other", "--window", "10ms"],
                              stdout=out, stderr=subprocess.PIPE, text=True, timeout=60,
                              check=False)
    assert proc.returncode == 0, proc.stderr
    return path


def test_roundtrip_and_unknown_version_refused() -> None:
    r = make_result()
    d = json.loads(json.dumps(r.to_dict()))
    assert d["version"] == RESULT_SCHEMA_VERSION == 1
    again = load_result(d)
    assert again.to_dict() == r.to_dict()
    with pytest.raises(RtlabError, match="result version 99 is not supported"):
        load_result({**d, "version": 99})
    with pytest.raises(RtlabError, match="no integer 'version'"):
        load_result({"run_id": "x"})
    with pytest.raises(RtlabError, match="malformed"):
        load_result({"version": 1, "run_id": "x"})


def test_real_result_round_trip(store_loc: str, real_jsonl: Path, tmp_path: Path) -> None:
    store = Store.open(store_loc)
    imported = import_jsonl(real_jsonl, store, ["rtlab", "results", "import"])
    store.close()
    again = Store.open(store_loc)  # a new connection: nothing cached
    got = again.get(imported.run_id)
    assert got.to_dict() == imported.to_dict()
    (ch,) = [c for _, c in got.channels()]
    # real data, window maxima included; a loaded machine delays SCHED_OTHER wake-ups, so
    # periods are missed (counted), but every one of the 1000 periods is accounted for
    assert ch.samples > 0 and ch.samples + ch.missed >= 900 and len(ch.windows) > 50
    (row,) = again.list()
    merged = imported.merged(probe_shape(imported.probe))
    assert (row.id, row.probe, row.status, row.partial) == (imported.run_id, "timer",
                                                            "completed", False)
    assert row.samples == merged.samples and row.worst_max_ns == merged.max_ns
    assert row.p99_ns == merged.summary((99.0,)).p(99.0) and row.p9999_ns is None
    assert row.kernel_release == imported.system["release"]
    assert row.created == datetime.fromisoformat(imported.provenance["host"]["start_wall"])
    assert row.created.tzinfo is not None and row.created.utcoffset().total_seconds() == 0
    # the raw copy: beside the SQLite file, in the XDG data directory for a server URL
    runs = (Path(store_loc).parent if "://" not in store_loc
            else tmp_path / "xdg" / "rtlab") / "runs"
    assert again.runs_dir == runs
    assert again.raw_path(row.id).read_bytes() == real_jsonl.read_bytes()


def test_large_result_round_trip(store_loc: str) -> None:
    """Megabytes in the binary column (PostgreSQL bytea): a week-long run's windows."""
    rng = np.random.default_rng(7)
    n = 1_500_000
    windows = WindowMaxima(np.arange(n), rng.integers(1_000, 10**8, n), rng.integers(1, 9, n))
    r = make_result("b16b0001")
    # a consistent channel around the windows: every sample at 1 us but one at the top
    total, top = int(windows.samples.sum()), int(windows.max_ns.max())
    hist = LogLinHistogram()
    hist.add(1_000, total - 1)
    hist.add(top)
    r.phases[0].channels[0] = Channel(name="cpu1", cpu=1, samples=total, min_ns=1_000,
                                      max_ns=top, sum_ns=1_000 * (total - 1) + top,
                                      hist=hist, windows=windows, window_ns=10**7)
    store = Store.open(store_loc)
    store.add(r, probe_shape)
    blob_len = len(zlib.compress(json.dumps(r.to_dict(packed=True)).encode(), 6))
    assert blob_len > 4 * 2**20  # random maxima do not compress: a real large value
    got = store.get("b16b0001")
    assert got.phases[0].channels[0].windows == windows
    assert got.to_dict(packed=True) == r.to_dict(packed=True)


def test_cli_refuses_unknown_version_json(store_loc: str,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    # a stored blob from the future: `results show` says so in one line, exit 1
    store = Store.open(store_loc)
    store.add(make_result("feed0001"), probe_shape)
    from sqlalchemy import update

    future = json.dumps({**make_result("feed0001").to_dict(), "version": 7}).encode()
    with store._engine.begin() as conn:
        conn.execute(update(store._tables["runs"]).values(result_z=zlib.compress(future)))
    from rtlab.cli import main

    assert main(["results", "show", "feed0001"]) == ExitCode.ERROR
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "result version 7 is not supported" in err[0]
    with store._engine.begin() as conn:
        conn.execute(update(store._tables["runs"]).values(result_z=b"not zlib"))
    with pytest.raises(RtlabError, match="stored run feed0001 is damaged"):
        store.get("feed0001")


def test_store_never_overwrites_and_resolves_prefixes(store_loc: str) -> None:
    store = Store.open(store_loc)
    store.add(make_result("abcd1234"), probe_shape)
    store.add(make_result("abce9999"), probe_shape)
    with pytest.raises(RtlabError, match="never overwritten"):
        store.add(make_result("abcd1234", partial=True), probe_shape)
    assert store.get("abcd1234").status == "completed"  # the first one is kept
    assert store.resolve("abcd") == "abcd1234"
    with pytest.raises(UsageError, match="ambiguous"):
        store.resolve("abc")
    with pytest.raises(UsageError, match="no stored run"):
        store.resolve("ffff")
    with pytest.raises(UsageError, match="invalid run id"):
        store.resolve("a%")
    # regression: `_` was a LIKE wildcard, and SQLite's LIKE ignores case (PostgreSQL's not)
    with pytest.raises(UsageError, match="no stored run"):
        store.resolve("abc_")
    with pytest.raises(UsageError, match="no stored run"):
        store.resolve("ABCD")
    assert store.get("last").run_id in ("abcd1234", "abce9999")
    rows = store.list()
    assert rows[0].worst_max_ns == 2_410_000 and rows[0].kernel_release == "6.1"


def test_list_order_limit_and_sql_queries(store_loc: str) -> None:
    """list() is newest first (ties: last stored first); the metadata columns are plain
    SQL columns that can be queried directly (docs/results.md)."""
    from sqlalchemy import select

    store = Store.open(store_loc)
    specs = [("00000001", "2026-01-03T00:00:00+00:00", "boardA", False),
             ("00000002", "2026-01-01T00:00:00+00:00", "boardA", True),
             ("00000003", "2026-01-02T00:00:00+00:00", "boardB", False),
             ("00000004", "2026-01-02T00:00:00+00:00", "boardA", True)]
    for run_id, start, host, partial in specs:
        store.add(make_result(run_id, start=start, host=host, partial=partial), probe_shape)
    assert [r.id for r in store.list()] == ["00000001", "00000004", "00000003", "00000002"]
    assert [r.id for r in store.list(2)] == ["00000001", "00000004"]
    assert len(store.list(None)) == 4
    runs = store._tables["runs"]
    query = (select(runs.c.id).where(runs.c.host == "boardA", runs.c.partial.is_(True),
                                     runs.c.p99_ns < 20_000).order_by(runs.c.created))
    with store._engine.connect() as conn:
        assert [r[0] for r in conn.execute(query)] == ["00000002", "00000004"]


def test_created_is_utc_whatever_the_offset(store_loc: str,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """Regression: SQLite dropped a start time's UTC offset; PostgreSQL returned times in
    the session's time zone (the test server's is Pacific/Chatham, UTC+13:45)."""
    store = Store.open(store_loc)
    store.add(make_result("0ffe0001", start="2026-03-01T14:05:00+01:00"), probe_shape)
    store.add(make_result("0ffe0002", start="2026-03-01T13:06:00"), probe_shape)  # no offset: UTC
    rows = {r.id: r.created for r in store.list()}
    assert rows == {"0ffe0001": datetime(2026, 3, 1, 13, 5, tzinfo=UTC),
                    "0ffe0002": datetime(2026, 3, 1, 13, 6, tzinfo=UTC)}
    assert [r.id for r in store.list()] == ["0ffe0002", "0ffe0001"]
    from rtlab.cli import main

    assert main(["results", "list"]) == 0
    out = capsys.readouterr().out
    assert "2026-03-01 13:05:00" in out and "2026-03-01 13:06:00" in out


def test_long_free_text_is_stored(store_loc: str) -> None:
    """Regression: host, kernel, preemption model and probe were VARCHAR(32..255), which
    PostgreSQL enforces (SQLite does not): a long --preempt given at import failed there."""
    store = Store.open(store_loc)
    long = "PREEMPT_RT+threadirqs+" + "x" * 300
    store.add(make_result("1009e001", host="h" * 300, preempt=long, release="6.6." + "9" * 300),
              probe_shape)
    (row,) = store.list()
    assert row.preempt == long and row.host == "h" * 300 and len(row.kernel_release) == 304


def test_partial_run(store_loc: str) -> None:
    store = Store.open(store_loc)
    store.add(make_result("9a9a0001", partial=True, rt_valid=None), probe_shape)
    (row,) = store.list()
    assert row.status == "partial" and row.partial is True and row.rt_valid is None
    got = store.get("9a9a")
    assert got.partial and got.notes == ["engine killed by signal 9"]


_WRITER = """
import sys, time
from pathlib import Path
sys.path.insert(0, {tests!r})
from test_results_store import make_result
from rtlab.errors import RtlabError
from rtlab.probes.registry import shape as probe_shape
from rtlab.results.store import Store
go = Path({go!r})
print("ready", flush=True)
while not go.exists():
    time.sleep(0.001)
store = Store.open({loc!r})  # all writers open the store at once
for run_id in sys.argv[1:]:
    try:
        store.add(make_result(run_id), probe_shape)
        print("stored", run_id, flush=True)
    except RtlabError as exc:
        print("refused", run_id, exc.one_line(), flush=True)
"""


def _writers(loc: str, tmp_path: Path, id_lists: list[list[str]]) -> list[str]:
    """One process per id list; all open `loc` at the same moment, then store their ids."""
    go = tmp_path / "go"
    go.unlink(missing_ok=True)
    script = _WRITER.format(tests=str(Path(__file__).parent), go=str(go), loc=loc)
    procs = [subprocess.Popen([sys.executable, "-c", script, *ids], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=subprocess_env())
             for ids in id_lists]
    for p in procs:  # every interpreter is at the barrier
        assert p.stdout is not None and p.stdout.readline() == "ready\n"
    go.touch()
    lines = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        lines += out.splitlines()
    return lines


def test_concurrent_first_open(store_loc: str, tmp_path: Path,
                               request: pytest.FixtureRequest) -> None:
    """Regression: processes opening one empty store at the same moment raced to create
    the tables ("table runs already exists", pg_type unique violation); now the schema is
    created under a lock (SQLite: BEGIN IMMEDIATE; PostgreSQL: an advisory lock)."""
    for round_ in range(4):  # the race was lost in about 1 of 7 opens: repeat
        loc = (str(tmp_path / f"s{round_}.db") if "://" not in store_loc
               else request.getfixturevalue("pg_server").url(
                   request.getfixturevalue("pg_server").create_database()))
        ids = [[f"{round_:02x}{w:06x}"] for w in range(4)]
        assert sorted(_writers(loc, tmp_path, ids)) == sorted(f"stored {i}" for (i,) in ids)


def test_concurrent_writers(store_loc: str, tmp_path: Path) -> None:
    """4 processes store 10 runs each into one store; then 4 processes race to store the
    same run id: exactly one wins, the others are refused with the same message."""
    ids = [[f"{w:02x}{i:06x}" for i in range(10)] for w in range(4)]
    lines = _writers(store_loc, tmp_path, ids)
    assert sorted(lines) == sorted(f"stored {i}" for group in ids for i in group)
    store = Store.open(store_loc)
    assert sorted(r.id for r in store.list(None)) == sorted(i for g in ids for i in g)
    lines = _writers(store_loc, tmp_path, [["dddd0001"]] * 4)
    assert sum(line.startswith("stored dddd0001") for line in lines) == 1, lines
    refused = [line for line in lines if line.startswith("refused")]
    assert len(refused) == 3 and all("never overwritten" in line for line in refused)
    assert len(store.list(None)) == 41


def test_store_layout_version_checked(store_loc: str,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    from sqlalchemy import delete, update

    store = Store.open(store_loc)
    store._ensure_schema()  # rtlab's tables (opening creates none)
    info = store._tables["store_info"]
    with store._engine.begin() as conn:
        conn.execute(update(info).values(value="2"))
    store.close()
    with pytest.raises(RtlabError, match="has layout version 2; this rtlab knows 1"):
        Store.open(store_loc)
    from rtlab.cli import main

    assert main(["results", "list"]) == ExitCode.ERROR
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "layout version 2" in err[0] and "upgrade rtlab" in err[0]
    # a store whose version row is missing gets it back (as an empty store would)
    with store._engine.begin() as conn:
        conn.execute(delete(info))
    Store.open(store_loc).add(make_result(), probe_shape)
    with store._engine.connect() as conn:
        assert conn.execute(info.select()).all() == [("store_schema", "1")]


def test_foreign_runs_table_refused(store_loc: str) -> None:
    from sqlalchemy import create_engine, text

    from rtlab.results.store import engine_url

    if "://" in store_loc:
        url = engine_url(store_loc)[0]
    else:
        Path(store_loc).parent.mkdir(parents=True)
        url = f"sqlite:///{store_loc}"
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE runs (id INTEGER PRIMARY KEY, name TEXT)"))
    engine.dispose()
    before = _tables_of(url)
    for create in (False, True):  # refused without a table added (a read or a write)
        with pytest.raises(UsageError, match=r"is (an SQLite|a) database that is not an "
                           r"rtlab store \(its tables: runs\); nothing was written"):
            Store.open(store_loc, create=create)
        assert _tables_of(url) == before == {"runs"}


def _tables_of(url: object) -> set[str]:
    from sqlalchemy import create_engine, inspect

    engine = create_engine(url)  # type: ignore[call-overload]
    try:
        with engine.connect() as conn:
            return set(inspect(conn).get_table_names())
    finally:
        engine.dispose()


def test_store_location_precedence(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path)}
    assert resolve_location(None, env) == str(tmp_path / ".local/share/rtlab/rtlab.db")
    env["XDG_DATA_HOME"] = str(tmp_path / "x")
    assert resolve_location(None, env) == str(tmp_path / "x/rtlab/rtlab.db")
    env["RTLAB_STORE"] = "/elsewhere.db"
    assert resolve_location(None, env) == "/elsewhere.db"
    assert resolve_location("cli.db", env) == "cli.db"


def test_sqlite_url_keeps_raw_output_beside_the_file(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    store = Store.open(f"sqlite:///{tmp_path}/s.db")
    assert store.raw_path("x") == tmp_path / "runs" / "x.jsonl"
    assert not (tmp_path / "s.db").exists()  # created by the first run stored
    for memory in ("sqlite://", "sqlite:///:memory:"):  # nothing would be kept there
        with pytest.raises(UsageError, match="is a memory-only database"):
            Store.open(memory)


def test_verdict_flags() -> None:
    text = verdict(make_result())
    assert text.startswith("worst wake-up latency 2.41 ms on CPU1 at 3.0 s")
    assert "rtlab doctor" in text  # an isolated spike far above p99
    bad = verdict(make_result(partial=True, rt_valid=False))
    assert bad.startswith("[PARTIAL] [NOT real-time valid] ")


def test_exporters_share_one_interface() -> None:
    r = make_result()
    assert set(EXPORTERS) == {"json", "csv", "csv-hist", "markdown", "junit", "cyclictest-hist",
                              "cyclictest-json"}
    for exporter in EXPORTERS.values():
        data = exporter.serialize(r)
        assert isinstance(data, bytes) and data
    assert load_result(json.loads(EXPORTERS["json"].serialize(r))).run_id == r.run_id
    md = EXPORTERS["markdown"].serialize(r).decode()
    assert "| CPU1 | 1000 |" in md and "n/a" in md  # p99.99 with 1000 samples is n/a


def test_stale_part_files_of_a_killed_copier_are_removed_a_living_ones_kept(
        tmp_path: Path) -> None:
    """Only `.NAME.PID.part` of `dest` whose process is gone goes; a living writer's part,
    another run's part and a name that merely looks alike stay."""
    import os

    from rtlab.results.store.schema import remove_stale_parts

    dest = tmp_path / "0000abcd.jsonl"
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    names = {f".{dest.name}.{dead.pid}.part": False,  # killed copier: removed
             f".{dest.name}.{os.getpid()}.part": True,  # a living writer
             f".0000abce.jsonl.{dead.pid}.part": True,  # another run's
             f".{dest.name}.x{dead.pid}.part": True,  # not a pid
             f".{dest.name}.{dead.pid}.partial": True}
    for n in names:
        (tmp_path / n).write_bytes(b"x")
    remove_stale_parts(dest)
    assert {n: (tmp_path / n).exists() for n in names} == names
    remove_stale_parts(tmp_path / "missing" / "x.jsonl")  # no directory: nothing to do
