# SPDX-License-Identifier: MIT
"""`rtlab results push` and `pull` (rtlab.results.sync) between SQLite stores and a real
PostgreSQL server that the tests start (the helper pg_server.py of the store tests):
no duplicates, raw files travel with their run, conflicts and invalid runs, selection,
dry runs, bad input, a push killed or cut off half-way, and several processes pushing
overlapping sets into one store at once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import zlib
from pathlib import Path

import pytest

from rtlab.cli import main
from rtlab.exitcodes import ExitCode
from rtlab.probes.registry import shape as probe_shape
from rtlab.results.histogram import LogLinHistogram
from rtlab.results.model import Channel, Phase, RunResult
from rtlab.results.store import Store, content_digest
from tests.support.paths import REPO
from tests.support.pg_server import PgServer, unavailable_reason

# fixtures -------------------------------------------------------------------------------


# pg_server: the session's PostgreSQL test server (tests/results/conftest.py)


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("RTLAB_STORE", raising=False)
    monkeypatch.delenv("RTLAB_LAB_STORE", raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def new_store(kind: str, tmp_path: Path, request: pytest.FixtureRequest,
              name: str = "dest") -> str:
    """The location of an empty store: an SQLite file, or a new PostgreSQL database."""
    if kind == "sqlite":
        return str(tmp_path / name / "rtlab.db")
    server: PgServer = request.getfixturevalue("pg_server")
    return server.url(server.create_database())


@pytest.fixture(params=["sqlite", "postgresql"])
def dest(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return new_store(request.param, tmp_path, request)


# runs -------------------------------------------------------------------------------------


def make_run(run_id: str, *, host: str = "board7", probe: str = "timer",
             start: str = "2026-11-01T10:00:00+00:00", note: str | None = None,
             n: int = 500) -> RunResult:
    """A small valid run; the same arguments give the same content in any process."""
    values = [20_000 + 37 * i for i in range(n)]
    ch = Channel(name="cpu1", cpu=1, samples=n, min_ns=values[0], max_ns=values[-1],
                 sum_ns=sum(values), max_at_ns=10**9,
                 hist=LogLinHistogram.from_values(values))
    return RunResult(run_id=run_id, status="completed", probe=probe,
                     phases=[Phase("main", [ch], 2 * 10**9)], rt_valid=True,
                     scenario={"name": "quick", "hash": "0" * 64},
                     notes=[note] if note else [],
                     provenance={"engine": {"system": {"hostname": host, "release": "6.6"}},
                                 "host": {"start_wall": start, "hostname": host}})


def raw_content(run_id: str, size: int = 3000) -> dict[str, bytes]:
    """Raw files of a run as a run writes them: engine output, a later phase's output,
    the phase layout and a trace capture directory."""
    line = (json.dumps({"type": "snapshot", "run": run_id}) + "\n").encode()
    return {f"{run_id}.jsonl": line * (size // len(line) + 1),
            f"{run_id}.2-load.jsonl": line * 3,
            f"{run_id}.layout.json": b'{"phases": []}\n',
            f"{run_id}.2-load.trace/cpu0.pages": bytes(range(256)) * 8}


def seed(loc: str, ids: list[str], *, raw: bool = True, size: int = 3000,
         **kw: object) -> Store:
    """Store runs (and their raw files in the store's raw directory)."""
    store = Store.open(loc)
    for i, run_id in enumerate(ids):
        store.add(make_run(run_id, start=f"2026-11-01T10:{i % 60:02d}:00+00:00", **kw), probe_shape)  # type: ignore[arg-type]
        if raw:
            for name, data in raw_content(run_id, size).items():
                path = store.runs_dir / name
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(data)
    return store


def raw_of(store: Store, run_id: str) -> dict[str, bytes]:
    return {f.name: b"".join(store.read_raw(run_id, f)) for f in store.raw_files(run_id)}


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, (json.loads(out) if "--json" in argv else {}), err


def env() -> dict[str, str]:
    e = dict(os.environ)
    e["PYTHONPATH"] = str(REPO) + os.pathsep + e.get("PYTHONPATH", "")
    return e


# copying --------------------------------------------------------------------------------------


def test_push_then_pull_copies_each_run_once_with_its_raw_files(
        dest: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    local = str(tmp_path / "laptop" / "rtlab.db")
    ids = ["a0000001", "a0000002", "a0000003"]
    src = seed(local, ids)
    code, doc, err = run_cli(capsys, "results", "push", "--store", local, "--to", dest,
                             "--json")
    assert code == 0, err
    assert doc["copied"] == ids and doc["already"] == [] and doc["complete"]
    assert doc["files"] == 12 and doc["bytes"] == sum(
        len(b) for i in ids for b in raw_content(i).values())
    # idempotent: the second push copies nothing
    code, doc, err = run_cli(capsys, "results", "push", "--store", local, "--to", dest,
                             "--json")
    assert code == 0 and doc["copied"] == [] and doc["already"] == ids and doc["files"] == 0
    there = Store.open(dest)
    assert [r.id for r in there.list(None)] == ids[::-1]
    assert there.digests(ids) == src.digests(ids)
    for run_id in ids:
        assert raw_of(there, run_id) == raw_content(run_id)
        assert there.get(run_id).to_dict() == src.get(run_id).to_dict()
        if "://" in dest:  # the server keeps them: every machine reaches them
            assert all(f.in_database for f in there.raw_files(run_id))
    # and back into a new laptop store: raw files land in its runs/ directory
    other = str(tmp_path / "laptop2" / "rtlab.db")
    code, doc, err = run_cli(capsys, "results", "pull", "--from", dest, "--store", other,
                             "--json")
    assert code == 0 and doc["copied"] == ids, err
    for run_id in ids:
        for name, data in raw_content(run_id).items():
            assert (tmp_path / "laptop2" / "runs" / name).read_bytes() == data
    code, doc, _ = run_cli(capsys, "results", "pull", "--from", dest, "--store", other,
                           "--json")
    assert code == 0 and doc["copied"] == [] and doc["already"] == ids
    # the text summary
    assert main(["results", "push", "--store", local, "--to", dest]) == 0
    out = capsys.readouterr().out
    assert out.startswith("pushed 0 of 3 runs to ") and "3 already there" in out


def test_selection_and_dry_run(dest: str, tmp_path: Path,
                               capsys: pytest.CaptureFixture[str]) -> None:
    local = str(tmp_path / "laptop" / "rtlab.db")
    store = Store.open(local)
    runs = {"b0000001": ("board7", "timer", "2026-10-01T00:00:00+00:00"),
            "b0000002": ("board8", "timer", "2026-10-15T00:00:00+00:00"),
            "b0000003": ("board7", "noise", "2026-11-01T00:00:00+00:00"),
            "b0000004": ("board9", "timer", "2026-11-02T00:00:00+00:00")}
    for run_id, (host, probe, start) in runs.items():
        store.add(make_run(run_id, host=host, probe=probe, start=start), probe_shape)

    def push(*args: str) -> dict:
        code, doc, err = run_cli(capsys, "results", "push", "--store", local, "--to", dest,
                                 "--json", "--dry-run", *args)
        assert code == 0, err
        return doc

    assert push()["copied"] == list(runs)
    assert push("--host", "board7")["copied"] == ["b0000001", "b0000003"]
    assert push("--host", "board7", "--host", "board9")["copied"] == [
        "b0000001", "b0000003", "b0000004"]
    assert push("--since", "2026-10-15")["copied"] == ["b0000002", "b0000003", "b0000004"]
    assert push("--since", "2026-10-31T23:00:00-02:00")["copied"] == ["b0000004"]
    assert push("--probe", "noise")["copied"] == ["b0000003"]
    assert push("b0000004", "b0000001")["copied"] == ["b0000001", "b0000004"]
    assert push("b0000002", "--host", "board7")["copied"] == []
    doc = push("last")
    assert doc["copied"] == ["b0000004"] and doc["dry_run"] and doc["selection"]["runs"] == [
        "last"]
    # a dry run changed nothing: no store file, no run
    if "://" in dest:
        assert Store.open(dest).list(None) == []
    else:
        assert not Path(dest).exists()
    code, _, err = run_cli(capsys, "results", "push", "--store", local, "--to", dest,
                           "--since", "yesterday")
    assert code == ExitCode.USAGE and "--since 'yesterday' is not an ISO 8601" in err
    code, _, err = run_cli(capsys, "results", "push", "--store", local, "--to", dest, "zzz")
    assert code == ExitCode.USAGE and "no stored run matches 'zzz'" in err


def test_same_id_other_content_is_a_conflict(dest: str, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    local = str(tmp_path / "laptop" / "rtlab.db")
    seed(local, ["c0000001", "c0000002"])
    there = Store.open(dest)
    there.add(make_run("c0000001", note="measured elsewhere"), probe_shape)
    before = there.digests(["c0000001"])
    code, doc, err = run_cli(capsys, "results", "push", "--store", local, "--to", dest,
                             "--json")
    assert code == ExitCode.ERROR
    assert doc["copied"] == ["c0000002"] and doc["already"] == []
    (conflict,) = doc["conflicts"]
    assert conflict["run"] == "c0000001" and "differs in: notes" in conflict["reason"]
    assert "never overwritten" in conflict["reason"]
    assert err.count("\n") == 1 and err.startswith("rtlab: error: ") and "c0000001" in err
    assert there.digests(["c0000001"]) == before  # untouched
    assert there.get("c0000001").notes == ["measured elsewhere"]


def test_invalid_stays_invalid_and_inconsistent_is_refused(
        dest: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from sqlalchemy import update

    local = str(tmp_path / "laptop" / "rtlab.db")
    src = Store.open(local)
    bad = make_run("d0000001")
    bad.phases[0].channels[0].samples += 1  # the histogram says otherwise
    bad.status, bad.partial = "invalid", True
    bad.notes.append("the engine's numbers failed validation: samples != histogram total")
    src.add(bad, probe_shape)
    src.add(make_run("d0000002"), probe_shape)
    # a run stored before validation existed: inconsistent, yet `completed`
    worse = make_run("d0000003")
    worse.phases[0].channels[0].samples += 1
    text = json.dumps(worse.to_dict(packed=True)).encode()
    src.add(make_run("d0000003"), probe_shape)
    runs = src._tables["runs"]
    with src._engine.begin() as conn:
        conn.execute(update(runs).where(runs.c.id == "d0000003")
                     .values(result_z=zlib.compress(text)))
    code, doc, _ = run_cli(capsys, "results", "push", "--store", local, "--to", dest,
                             "--json")
    assert code == ExitCode.ERROR
    assert doc["copied"] == ["d0000001", "d0000002"]
    (refused,) = doc["refused"]
    assert refused["run"] == "d0000003"
    assert "contradict each other" in refused["reason"] and "not marked invalid" in \
        refused["reason"]
    there = Store.open(dest)
    (row,) = [r for r in there.list(None) if r.id == "d0000001"]
    assert row.status == "invalid" and row.worst_max_ns is None and row.p99_ns is None
    assert there.get("d0000001").status == "invalid"
    assert not there.exists("d0000003")


def test_result_of_a_newer_version_is_refused(dest: str, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    from sqlalchemy import update

    local = str(tmp_path / "laptop" / "rtlab.db")
    src = seed(local, ["e0000001", "e0000002"], raw=False)
    d = make_run("e0000001").to_dict()
    d["version"] = 99
    runs = src._tables["runs"]
    with src._engine.begin() as conn:
        conn.execute(update(runs).where(runs.c.id == "e0000001")
                     .values(result_z=zlib.compress(json.dumps(d).encode())))
    code, doc, _ = run_cli(capsys, "results", "push", "--store", local, "--to", dest,
                           "--json")
    assert code == ExitCode.ERROR and doc["copied"] == ["e0000002"]
    assert doc["refused"][0]["run"] == "e0000001" and "99" in doc["refused"][0]["reason"]


def test_raw_file_names_stay_in_the_raw_directory(pg_server: PgServer, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """A server store is shared: a raw file name it holds that would leave the raw
    directory (or name another run) refuses that run; nothing is written."""
    lab = pg_server.url(pg_server.create_database())
    local = str(tmp_path / "laptop" / "rtlab.db")
    seed(local, ["f0000001", "f0000002"])
    assert main(["results", "push", "--store", local, "--to", lab]) == 0
    store = Store.open(lab)
    files, chunks = store._tables["run_files"], store._tables["run_file_chunks"]
    for name in ("../../evil", "f0000001.x/../../../evil", "f0000002.jsonl"):
        with store._engine.begin() as conn:
            conn.execute(files.insert().values(run_id="f0000001", name=name, size=1,
                                               sha256="0" * 64, chunks=1))
            conn.execute(chunks.insert().values(run_id="f0000001", name=name, chunk=0,
                                                data=zlib.compress(b"x")))
    capsys.readouterr()
    mine = str(tmp_path / "mine" / "rtlab.db")
    code, doc, _ = run_cli(capsys, "results", "pull", "--from", lab, "--store", mine,
                           "--json")
    assert code == ExitCode.ERROR and doc["copied"] == ["f0000002"]
    assert "refusing the raw file name" in doc["refused"][0]["reason"]
    assert not any(p.name == "evil" for p in tmp_path.rglob("*"))
    assert not (tmp_path / "mine" / "runs" / "f0000001.jsonl").exists()


# bad input ------------------------------------------------------------------------------------


def test_unreachable_wrong_url_missing_driver_newer_layout(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], request: pytest.FixtureRequest,
        monkeypatch: pytest.MonkeyPatch) -> None:
    local = str(tmp_path / "laptop" / "rtlab.db")
    seed(local, ["90000001"])

    def one_line(*argv: str) -> tuple[int, str]:
        code = main(list(argv))
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("rtlab: error: "), err
        return code, err[0]

    nowhere = f"postgresql://rtlab:sekrit@/rtlab?host={tmp_path}/nothing-here"
    code, line = one_line("results", "push", "--store", local, "--to", nowhere)
    assert code == ExitCode.ERROR and "cannot open the result store" in line
    assert "is the database server running" in line and "sekrit" not in line
    code, line = one_line("results", "pull", "--from", nowhere, "--store", local)
    assert code == ExitCode.ERROR and "cannot open the result store" in line
    code, line = one_line("results", "push", "--store", local, "--to",
                          "postgresql://rtlab@[::1/rtlab")
    assert code == ExitCode.USAGE and "invalid store URL" in line
    code, line = one_line("results", "push", "--store", local, "--to", "mysqlx://h/rtlab")
    assert code == ExitCode.USAGE and "unknown database type" in line
    code, line = one_line("results", "push", "--store", local)
    assert code == ExitCode.USAGE and "needs --to STORE" in line and "RTLAB_LAB_STORE" in line
    code, line = one_line("results", "push", "--store", local, "--to", local)
    assert code == ExitCode.USAGE and "both the source and the destination" in line
    code, line = one_line("results", "pull", "--from", str(tmp_path / "none.db"),
                          "--store", local)
    assert code == ExitCode.USAGE and "there is no result store" in line
    # a store of a newer layout: refused before anything is copied
    newer = new_store("postgresql", tmp_path, request)
    store = Store.open(newer)
    store._ensure_schema()  # rtlab's tables (opening creates none)
    with store._engine.begin() as conn:
        conn.execute(store._tables["store_info"].update().values(value="2"))
    code, line = one_line("results", "push", "--store", local, "--to", newer)
    assert code == ExitCode.ERROR and "layout version 2" in line and "upgrade rtlab" in line
    assert store.list(None) == []
    # the lab store from the environment; the driver missing
    monkeypatch.setenv("RTLAB_LAB_STORE", new_store("postgresql", tmp_path, request))
    monkeypatch.setitem(sys.modules, "psycopg", None)
    code, line = one_line("results", "push", "--store", local)
    assert code == ExitCode.USAGE and "needs the PostgreSQL driver psycopg" in line


def test_server_lost_half_way_then_rerun_completes(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The server goes down while a run is being copied: that run's transaction is lost
    whole, the push says how far it got (exit 1), and the same command completes it."""
    if (reason := unavailable_reason()) is not None:
        pytest.skip(reason)
    server = PgServer.start()  # our own: it is stopped in the middle
    try:
        lab = server.url(server.create_database())
        local = str(tmp_path / "laptop" / "rtlab.db")
        ids = [f"70{i:06x}" for i in range(6)]
        seed(local, ids)
        real = Store._insert_raw
        calls = []

        def failing(self: Store, conn: object, run_id: str, name: str, content: object
                    ) -> None:
            calls.append(run_id)
            real(self, conn, run_id, name, content)  # type: ignore[arg-type]
            if run_id == ids[3]:
                server.stop_server()

        monkeypatch.setattr(Store, "_insert_raw", failing)
        code, doc, err = run_cli(capsys, "results", "push", "--store", local, "--to", lab,
                                 "--json")
        assert code == ExitCode.ERROR
        assert doc["copied"] == ids[:3] and not doc["complete"] and doc["left"] == 3
        (line,) = err.strip().splitlines()
        assert "push stopped" in line and "3 runs copied, 3 left" in line
        monkeypatch.setattr(Store, "_insert_raw", real)
        server.start_server()
        there = Store.open(lab)
        assert [r.id for r in there.select()] == ids[:3]
        with there._engine.connect() as conn:  # nothing of the fourth run
            rows = conn.execute(there._tables["run_file_chunks"].select().where(
                there._tables["run_file_chunks"].c.run_id == ids[3])).all()
        assert rows == []
        code, doc, err = run_cli(capsys, "results", "push", "--store", local, "--to", lab,
                                 "--json")
        assert code == 0 and doc["copied"] == ids[3:] and doc["already"] == ids[:3], err
        for run_id in ids:
            assert raw_of(there, run_id) == raw_content(run_id)
    finally:
        server.stop()


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_killed_push_leaves_whole_runs_and_a_rerun_completes(
        kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """kill -9 in the middle of a push: every run the destination holds is whole (its
    content and every raw file), and running the push again copies exactly the rest."""
    local = str(tmp_path / "laptop" / "rtlab.db")
    ids = [f"71{i:06x}" for i in range(40)]
    src = seed(local, ids, size=400_000)
    dest = new_store(kind, tmp_path, request)
    Store.open(dest).close()
    cmd = [sys.executable, "-m", "rtlab", "results", "push", "--store", local, "--to", dest]
    proc = subprocess.Popen(cmd, env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    there = Store.open(dest)
    deadline = time.monotonic() + 60
    while len(there.select()) < 3 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    held = [r.id for r in there.select()]
    assert 3 <= len(held) < len(ids), "the push was not caught half-way"
    digests = src.digests(ids)
    assert there.digests(held) == {i: digests[i] for i in held}
    for run_id in held:
        assert raw_of(there, run_id) == raw_content(run_id, 400_000)
    if kind == "sqlite":  # as a kill during the write of a raw file leaves (pid > pid_max)
        first = next(i for i in ids if i not in held)
        (tmp_path / "dest" / "runs" / f".{first}.jsonl.999999999.part").write_bytes(b"x")
    again = subprocess.run([*cmd, "--json"], env=env(), capture_output=True, text=True,
                           timeout=300, check=False)
    assert again.returncode == 0, again.stderr
    doc = json.loads(again.stdout)
    assert doc["already"] == held and doc["copied"] == [i for i in ids if i not in held]
    assert there.digests(ids) == digests
    for run_id in ids:
        assert raw_of(there, run_id) == raw_content(run_id, 400_000)
    if kind == "sqlite":  # the rerun removed a half-written file the killed push left
        assert not list((tmp_path / "dest" / "runs").rglob(".*.part"))


# concurrent writers -------------------------------------------------------------------------

_WORKER = """
import sys, time
from pathlib import Path
sys.path.insert(0, {repo!r})
from tests.results.test_push_pull import make_run, seed
from rtlab.cli import main
from rtlab.probes.registry import shape as probe_shape
from rtlab.results.store import Store
w, dest, go, shared, own, direct = sys.argv[1], sys.argv[2], Path(sys.argv[3]), \\
    sys.argv[4].split(","), sys.argv[5].split(","), sys.argv[6].split(",")
local = str(Path(go).parent / f"laptop{{w}}" / "rtlab.db")
seed(local, shared + own)  # the same shared runs (same content) in every laptop
print("ready", flush=True)
while not go.exists():
    time.sleep(0.001)
there = Store.open(dest)
codes = []
for i, run_id in enumerate(direct):  # as a monitor stores into the lab while people push
    there.add(make_run(run_id, host=f"monitor{{w}}"), probe_shape)
    codes.append(main(["results", "push", "--store", local, "--to", dest]))
codes.append(main(["results", "push", "--store", local, "--to", dest]))
print("codes", *codes, flush=True)
"""


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_concurrent_writers_and_pushers(kind: str, tmp_path: Path,
                                        request: pytest.FixtureRequest) -> None:
    """N processes at once, each storing runs straight into one store (as monitors do)
    and pushing its own laptop's runs into it, all laptops holding the same shared runs:
    every run ends up there exactly once, with its raw files, and no process fails.
    RTLAB_TEST_PUSHERS=N sets the number of processes (default 4)."""
    n = int(os.environ.get("RTLAB_TEST_PUSHERS", "4"))
    dest = new_store(kind, tmp_path, request)
    go = tmp_path / "go"
    shared = [f"5{i:07x}" for i in range(12)]
    script = _WORKER.format(repo=str(REPO))
    procs, own_all, direct_all = [], [], []
    for w in range(n):
        own = [f"6{w:02x}{i:05x}" for i in range(8)]
        direct = [f"8{w:02x}{i:05x}" for i in range(4)]
        own_all += own
        direct_all += direct
        procs.append(subprocess.Popen(
            [sys.executable, "-c", script, str(w), dest, str(go), ",".join(shared),
             ",".join(own), ",".join(direct)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env()))
    for p in procs:
        assert p.stdout is not None and p.stdout.readline() == "ready\n"
    t0 = time.monotonic()
    go.touch()
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        assert out.splitlines()[-1] == "codes" + " 0" * 5, (out, err)
        assert "rtlab: error" not in err, err
    elapsed = time.monotonic() - t0
    there = Store.open(dest)
    stored = [r.id for r in there.list(None)]
    expected = sorted(shared + own_all + direct_all)
    assert sorted(stored) == expected  # each exactly once, none lost
    assert len(set(stored)) == len(stored)
    for run_id in shared + own_all:
        assert raw_of(there, run_id) == raw_content(run_id)
    digests = there.digests(shared)
    assert digests == {i: content_digest(Store.open(
        str(tmp_path / "laptop0" / "rtlab.db")).stored(i).text) for i in shared}
    print(f"{kind}: {n} processes, {len(expected)} runs, {elapsed:.1f} s")


def test_a_run_stored_meanwhile_by_another_process_is_already_there(
        dest: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Between looking (not there) and storing, another process stored the same run:
    the insert loses the race, the transaction is dropped whole (raw files too), and the
    run counts as already there (same content) or a conflict (other content)."""
    local = str(tmp_path / "laptop" / "rtlab.db")
    seed(local, ["a1000001", "a1000002"])
    Store.open(dest).close()
    real_digests = Store.digests
    real_exists = Store.exists

    asked: set[str] = set()

    def missing_once(self: Store, run_id: str) -> bool:
        """add_copy looks before its transaction: the first look misses the other's run"""
        if self.display != local and run_id not in asked:
            asked.add(run_id)
            return False
        return real_exists(self, run_id)

    def racing_digests(self: Store, ids: object) -> dict[str, str]:
        if self.display != local and not getattr(racing_digests, "done", False):
            racing_digests.done = True  # type: ignore[attr-defined]
            # what the other process stores right after we looked
            other = Store.open(dest)
            asked.update(("a1000001", "a1000002"))
            other.add(make_run("a1000001", start="2026-11-01T10:00:00+00:00"), probe_shape)
            other.add(make_run("a1000002", note="another board's run"), probe_shape)
            asked.clear()
            return {}
        return real_digests(self, ids)  # type: ignore[arg-type]

    real_add_copy = Store.add_copy
    lost: list[tuple[str, bool]] = []

    def spy(self: Store, run: object, files: object, shape_of: object) -> bool:
        stored = real_add_copy(self, run, files, shape_of)  # type: ignore[arg-type]
        lost.append((run.run_id, stored))  # type: ignore[attr-defined]
        return stored

    monkeypatch.setattr(Store, "digests", racing_digests)
    monkeypatch.setattr(Store, "exists", missing_once)
    monkeypatch.setattr(Store, "add_copy", spy)
    code, doc, _ = run_cli(capsys, "results", "push", "--store", local, "--to", dest,
                           "--json")
    assert code == ExitCode.ERROR
    assert doc["copied"] == [] and doc["already"] == ["a1000001"]
    assert [c["run"] for c in doc["conflicts"]] == ["a1000002"]
    assert lost == [("a1000001", False), ("a1000002", False)]  # the insert lost the race
    assert asked == {"a1000001", "a1000002"}
    monkeypatch.undo()
    there = Store.open(dest)
    assert there.get("a1000002").notes == ["another board's run"]
    if "://" in dest:  # the losing transaction stored no raw file
        assert there.raw_files("a1000001") == []
    else:  # the loser's raw files are kept beside a run of the same content only
        assert raw_of(there, "a1000001") == raw_content("a1000001")
        assert there.raw_files("a1000002") == []


def _push_interrupted(tmp_path: Path, request: pytest.FixtureRequest, prefix: str,
                      sig: signal.Signals, times: int = 1
                      ) -> tuple[list[str], Store, list[str], str, str, int]:
    """40 runs pushed to a real PostgreSQL store, `sig` sent (`times`, 5 ms apart) once
    two are there: (ids, the destination, the command, stdout, stderr, exit code).
    SIGINT is given its default in the child, as at a terminal: a test run started in
    the background (nohup, `make test &`) passes it on ignored, and Python then never
    turns it into KeyboardInterrupt."""
    local = str(tmp_path / "laptop" / "rtlab.db")
    ids = [f"{prefix}{i:06x}" for i in range(40)]
    seed(local, ids, size=400_000)
    dest = new_store("postgresql", tmp_path, request)
    there = Store.open(dest)
    cmd = [sys.executable, "-m", "rtlab", "results", "push", "--store", local, "--to", dest,
           "--json"]
    proc = subprocess.Popen(cmd, env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 60
    while len(there.select()) < 2 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    for _ in range(times):
        proc.send_signal(sig)
        time.sleep(0.005)
    out, err = proc.communicate(timeout=60)
    return ids, there, cmd, out, err, proc.returncode


def _completes_when_run_again(cmd: list[str], there: Store, held: list[str],
                              ids: list[str]) -> None:
    again = subprocess.run(cmd, env=env(), capture_output=True, text=True, timeout=300,
                           check=False)
    assert again.returncode == 0 and json.loads(again.stdout)["already"] == held
    assert sorted(r.id for r in there.select()) == ids


@pytest.mark.parametrize(("sig", "prefix"), [(signal.SIGTERM, "72"), (signal.SIGINT, "73")],
                         ids=["sigterm", "ctrl-c"])
def test_sigterm_or_ctrl_c_stops_a_push_with_every_run_whole(
        sig: signal.Signals, prefix: str, tmp_path: Path,
        request: pytest.FixtureRequest) -> None:
    """SIGTERM or Ctrl-C (SIGINT): the push stops at the next run or chunk, the run
    being copied dropped whole; every run the destination holds is whole and in the
    summary, which says how far it got; exit 130; the same command completes it.
    Regressions: the signal raised KeyboardInterrupt wherever the push was, in the
    database driver too, which left its connection in a transaction, and the push
    ended with exit 1, "can't change 'autocommit' now"."""
    ids, there, cmd, out, err, code = _push_interrupted(tmp_path, request, prefix, sig)
    assert code == ExitCode.INTERRUPTED, err
    assert err.strip() == "rtlab: interrupted"
    doc = json.loads(out)
    assert not doc["complete"] and doc["stopped"] == "interrupted"
    held = [r.id for r in there.select()]
    assert doc["copied"] == held
    assert doc["left"] == len(ids) - len(doc["copied"])
    _all_whole(there, held)
    _completes_when_run_again(cmd, there, held, ids)


def _all_whole(there: Store, held: list[str]) -> None:
    for run_id in held:  # whole: each with all its raw files, complete
        files = there.raw_files(run_id)
        assert files and all(f.in_database for f in files)
        assert all(len(b"".join(there.read_raw(run_id, f))) == f.size for f in files)


def test_a_second_ctrl_c_stops_at_once_and_is_still_an_interruption(
        tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """Two Ctrl-C: the second raises at once, wherever it lands during the transfer
    (the database driver too), and is ignored after it; exit 130, one line on stderr,
    never a database error or a traceback (regressions: SQLAlchemy's pool printed one
    from the stores' closing, the interpreter's exit was killed by the signal); every
    run held is whole."""
    ids, there, cmd, out, err, code = _push_interrupted(tmp_path, request, "74",
                                                         signal.SIGINT, times=2)
    assert code == ExitCode.INTERRUPTED, err
    assert err.strip() == "rtlab: interrupted", err
    held = [r.id for r in there.select()]
    assert len(held) - len(json.loads(out)["copied"]) in (0, 1)
    _all_whole(there, held)
    _completes_when_run_again(cmd, there, held, ids)


def test_a_stop_between_two_chunks_takes_back_the_run_being_copied(
        dest: str, tmp_path: Path) -> None:
    """Asked to stop while a run's raw files are being copied (after its first chunk):
    nothing of that run stays, neither its row nor a raw file, and a second transfer
    copies everything."""
    from rtlab.results.sync import Selection, transfer

    local = str(tmp_path / "laptop" / "rtlab.db")
    ids = ["c0000001", "c0000002"]
    seed(local, ids).close()
    calls = 0

    def stop() -> bool:  # 1: before the first run; 2: its first chunk; 3: the next
        nonlocal calls
        calls += 1
        return calls >= 3

    source, there = Store.open(local), Store.open(dest)
    try:
        rep = transfer(source, there, Selection(), stop=stop, shape_of=probe_shape)
        assert rep.interrupted and rep.copied == [] and rep.left == 2
        assert there.select() == [] and there.raw_files("c0000001") == []
        if not there.keeps_raw_in_database:
            assert not any(p.is_file() for p in there.runs_dir.rglob("*"))
        again = transfer(source, there, Selection(), shape_of=probe_shape)
        assert again.complete and again.copied == ids
        assert raw_of(there, "c0000001") == raw_content("c0000001")
    finally:
        source.close()
        there.close()


def _drop_copy_tables(loc: str) -> None:
    """Make a store look like one written by an rtlab before push and pull."""
    store = Store.open(loc)
    md = store._tables["metadata"]
    with store._engine.begin() as conn:
        md.drop_all(conn, tables=[md.tables[t] for t in
                                  ("run_file_chunks", "run_files", "run_digests")])
    store.close()


def test_stores_of_an_older_rtlab(dest: str, tmp_path: Path,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    """Stores written before the digest and raw-file tables existed: their runs' digests
    are computed when asked, the tables appear at the first write, nothing is
    copied twice."""
    local = str(tmp_path / "laptop" / "rtlab.db")
    seed(local, ["b1000001", "b1000002"]).close()
    _drop_copy_tables(local)
    made = Store.open(dest)
    made._ensure_schema()  # an empty store with rtlab's tables (opening creates none)
    made.close()
    _drop_copy_tables(dest)
    code, doc, err = run_cli(capsys, "results", "push", "--store", local, "--to", dest,
                             "--json")
    assert code == 0 and doc["copied"] == ["b1000001", "b1000002"], err
    code, doc, _ = run_cli(capsys, "results", "push", "--store", local, "--to", dest,
                           "--json")
    assert code == 0 and doc["already"] == ["b1000001", "b1000002"]
    there = Store.open(dest)
    assert raw_of(there, "b1000002") == raw_content("b1000002")
    there.add(make_run("b1000003"), probe_shape)  # an ordinary store of a run records its digest
    with there._engine.connect() as conn:
        got = conn.execute(there._tables["run_digests"].select()).all()
    assert sorted(r.id for r in got) == ["b1000001", "b1000002", "b1000003"]


def test_lab_user_who_may_not_create_tables(pg_server: PgServer, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """A lab database set up by its owner, whose users may store and read runs but not
    create tables, made by an rtlab before push and pull: `rtlab run`'s store still
    works, pulling from it works, pushing into it stops with the database's reason."""
    import psycopg

    name = pg_server.create_database()
    owner = pg_server.url(name)
    seed(owner, ["c1000001"], raw=False).close()
    _drop_copy_tables(owner)
    with psycopg.connect(host=str(pg_server.socket_dir), user=pg_server.user, dbname=name,
                         autocommit=True) as conn:
        conn.execute("CREATE ROLE labuser LOGIN")
        conn.execute("GRANT SELECT, INSERT ON runs, store_info TO labuser")
        conn.execute("GRANT USAGE ON SEQUENCE runs_seq_seq TO labuser")
    user = owner.replace(f"{pg_server.user}@", "labuser@")
    store = Store.open(user)
    store.add(make_run("c1000002"), probe_shape)  # as `rtlab run --store` does
    assert [r.id for r in store.select()] == ["c1000001", "c1000002"]
    mine = str(tmp_path / "mine" / "rtlab.db")
    code, doc, err = run_cli(capsys, "results", "pull", "--from", user, "--store", mine,
                             "--json")
    assert code == 0 and doc["copied"] == ["c1000001", "c1000002"], err
    seed(mine, ["c1000003"]).close()
    code, doc, err = run_cli(capsys, "results", "push", "--store", mine, "--to", user,
                             "--json")
    assert code == ExitCode.ERROR and doc["already"] == ["c1000001", "c1000002"]
    assert doc["copied"] == [] and doc["left"] == 1
    (line,) = err.strip().splitlines()
    assert "push stopped" in line and "permission denied" in line, line


def test_a_real_engine_run_travels_whole(probe_bin: str, pg_server: PgServer,
                                         tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    """One second of real engine output, imported on a laptop, pushed to the lab, pulled
    onto another laptop: the same export everywhere, the raw file byte for byte, and
    the pulled raw file imports again."""
    out = tmp_path / "engine.jsonl"
    with out.open("w") as f:
        proc = subprocess.run([probe_bin, "timer", "--cpus", "0", "--duration", "1s",
                               "--policy", "other", "--window", "10ms"], stdout=f,
                              stderr=subprocess.PIPE, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    a, b = str(tmp_path / "a" / "rtlab.db"), str(tmp_path / "b" / "rtlab.db")
    lab = pg_server.url(pg_server.create_database())
    assert main(["results", "import", str(out), "--store", a]) == 0
    run_id = Store.open(a).resolve("last")
    assert main(["results", "push", "--store", a, "--to", lab]) == 0
    assert main(["results", "pull", "--from", lab, "--store", b]) == 0
    capsys.readouterr()
    exports = []
    for loc in (a, lab, b):
        assert main(["export", run_id, "--format", "json", "--store", loc]) == 0
        exports.append(json.loads(capsys.readouterr().out))
    assert exports[0] == exports[1] == exports[2]
    pulled = tmp_path / "b" / "runs" / f"{run_id}.jsonl"
    assert pulled.read_bytes() == out.read_bytes()
    c = str(tmp_path / "c" / "rtlab.db")
    assert main(["results", "import", str(pulled), "--store", c]) == 0
    again = Store.open(c).get(run_id)
    assert [ch.to_dict() for _, ch in again.channels()] == [
        ch.to_dict() for _, ch in Store.open(a).get(run_id).channels()]


def test_raw_files_in_pieces_empty_and_damaged(pg_server: PgServer, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A server keeps a raw file in pieces (RAW_CHUNK_BYTES, 4 MiB; 1000 bytes here): they
    come back whole, an empty file too; a piece damaged in the database is detected
    (its digest) and that run is not pulled."""
    from sqlalchemy import update

    from rtlab.results.store import raw_files

    monkeypatch.setattr(raw_files, "RAW_CHUNK_BYTES", 1000)
    local = str(tmp_path / "laptop" / "rtlab.db")
    src = seed(local, ["d1000001", "d1000002"], size=10_500)
    (src.runs_dir / "d1000001.empty.jsonl").write_bytes(b"")
    lab = pg_server.url(pg_server.create_database())
    assert main(["results", "push", "--store", local, "--to", lab]) == 0
    there = Store.open(lab)
    chunks = there._tables["run_file_chunks"]
    with there._engine.connect() as conn:
        pieces = conn.execute(chunks.select().where(chunks.c.run_id == "d1000001",
                                                    chunks.c.name == "d1000001.jsonl")).all()
    assert len(pieces) == 11
    assert raw_of(there, "d1000001") == raw_content("d1000001", 10_500) | {
        "d1000001.empty.jsonl": b""}
    with there._engine.begin() as conn:
        conn.execute(update(chunks).where(chunks.c.run_id == "d1000002", chunks.c.chunk == 3,
                                          chunks.c.name == "d1000002.jsonl")
                     .values(data=zlib.compress(b"x" * 1000)))
    capsys.readouterr()
    mine = str(tmp_path / "mine" / "rtlab.db")
    code, doc, _ = run_cli(capsys, "results", "pull", "--from", lab, "--store", mine,
                           "--json")
    assert code == ExitCode.ERROR and doc["copied"] == ["d1000001"]
    (refused,) = doc["refused"]
    assert refused["run"] == "d1000002" and "is damaged" in refused["reason"]
    assert not Store.open(mine).exists("d1000002")
    assert not list((tmp_path / "mine" / "runs").glob("d1000002.*"))
    assert not list((tmp_path / "mine" / "runs").glob(".d1000002*"))
    assert (tmp_path / "mine" / "runs" / "d1000001.empty.jsonl").read_bytes() == b""
