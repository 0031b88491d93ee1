# SPDX-License-Identifier: MIT
"""A lab's store holds a year of every board's monitor segments (issue 28): one board's
runs are found through an index on (host, probe, created), which older stores get at
their next write, and `rtlab history --day` asks the store only for the runs that can
overlap the day (bounded on their start by the host's longest run), on both backends."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest
from sqlalchemy import create_engine, inspect, text

from rtlab.analysis.calibrate import run_from_samples
from rtlab.cli import main
from rtlab.probes.registry import shape as probe_shape
from rtlab.results.store import Store
from rtlab.results.store.schema import RUNS_BY_HOST

T0 = datetime(2026, 3, 10, tzinfo=UTC).timestamp()


def _run(run_id: str, start_s: float, seconds: int, host: str = "board1"):  # type: ignore[no-untyped-def]
    r = run_from_samples(run_id, np.full(seconds * 1000, 10_000, dtype=np.int64), "6.1.0-rt",
                         probe="timer")
    r.provenance["engine"]["start_realtime_ns"] = int(start_s * 1e9)
    r.provenance["engine"]["system"]["hostname"] = host
    r.provenance["host"]["start_wall"] = datetime.fromtimestamp(start_s, UTC).isoformat()
    return r


def _indexes(loc: str) -> set[str]:
    url = loc if "://" in loc else f"sqlite:///{loc}"
    engine = create_engine(url.replace("postgresql://", "postgresql+psycopg://"))
    try:
        with engine.connect() as conn:
            return {ix["name"] for ix in inspect(conn).get_indexes("runs")}
    finally:
        engine.dispose()


def test_new_and_older_stores_get_the_host_index(store_loc: str) -> None:
    store = Store.open(store_loc)
    store.add(_run("aaaa0001", T0, 5), probe_shape)
    store.close()
    assert RUNS_BY_HOST in _indexes(store_loc)
    # a store made before the index: it is added at the next write, nothing else changes
    url = store_loc if "://" in store_loc else f"sqlite:///{store_loc}"
    engine = create_engine(url.replace("postgresql://", "postgresql+psycopg://"))
    with engine.begin() as conn:
        conn.execute(text(f"DROP INDEX {RUNS_BY_HOST}"))
    engine.dispose()
    assert RUNS_BY_HOST not in _indexes(store_loc)
    store = Store.open(store_loc, create=False)  # reading never writes
    assert [r.id for r in store.select(hosts=["board1"])] == ["aaaa0001"]
    store.close()
    assert RUNS_BY_HOST not in _indexes(store_loc)
    store = Store.open(store_loc)
    store.add(_run("aaaa0002", T0 + 60, 5), probe_shape)
    store.close()
    assert RUNS_BY_HOST in _indexes(store_loc)


def test_select_until_and_longest(store_loc: str) -> None:
    store = Store.open(store_loc)
    for i in range(4):
        store.add(_run(f"bbbb000{i}", T0 + i * 3600, 2 + i), probe_shape)
    store.add(_run("bbbb0009", T0, 30, host="board2"), probe_shape)
    until = datetime.fromtimestamp(T0 + 2 * 3600, UTC)
    since = datetime.fromtimestamp(T0 + 3600, UTC)
    assert [r.id for r in store.select(hosts=["board1"], until=until)] == [
        "bbbb0000", "bbbb0001"]
    assert [r.id for r in store.select(hosts=["board1"], since=since, until=until)] == [
        "bbbb0001"]
    assert store.longest_ns(hosts=["board1"], probes=["timer"]) == 5_000_000_000
    assert store.longest_ns(hosts=["board2"]) == 30_000_000_000
    assert store.longest_ns(hosts=["nobody"]) is None
    assert not store.unknown_durations(hosts=["board1"])
    store.close()


def test_history_day_asks_only_for_runs_that_can_overlap(
        store_loc: str, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    day0 = T0
    store = Store.open(store_loc)
    for k in range(-30, 30):  # hourly segments of 60 s from 30 h before the day
        store.add(_run(f"cccc{k + 100:04d}", day0 + k * 3600, 60), probe_shape)
    store.close()
    returned: list[int] = []
    real = Store.select

    def counting(self: Store, **kw):  # type: ignore[no-untyped-def]
        rows = real(self, **kw)
        returned.append(len(rows))
        return rows

    monkeypatch.setattr(Store, "select", counting)
    day = datetime.fromtimestamp(day0, UTC).date().isoformat()
    code = main(["history", "--host", "board1", "--day", day, "--store", store_loc, "--json"])
    assert code == 0, capsys.readouterr().err
    assert "cccc0100" in capsys.readouterr().out
    # the 24 segments of the day, those within an hour and a minute before it, and the
    # hour after (the slack for clocks): never the 29 older ones
    assert returned and returned[-1] <= 24 + 3 + 1


def test_a_whole_run_id_is_found_through_the_index(store_loc: str) -> None:
    """`get` of a whole id asks for it by equality (the unique index), not by a prefix
    that reads every row's id; prefixes, ambiguity and an id that is the prefix of
    another still resolve as before."""
    from sqlalchemy import event

    from rtlab.errors import UsageError

    store = Store.open(store_loc)
    store.add(_run("dddd0001", T0, 2), probe_shape)
    store.add(_run("dddd00011", T0 + 10, 2), probe_shape)
    store.add(_run("eeee0001", T0 + 20, 2), probe_shape)
    statements: list[str] = []

    def seen(conn, cursor, statement, *args):  # type: ignore[no-untyped-def]
        statements.append(statement.lower())

    event.listen(store._engine, "before_cursor_execute", seen)
    try:
        assert store.get("eeee0001").run_id == "eeee0001"
        assert not any("substr" in st for st in statements)
        assert store.resolve("dddd0001") == "dddd0001"  # also the prefix of dddd00011
        assert store.resolve("eeee") == "eeee0001"
        assert any("substr" in st for st in statements)
        with pytest.raises(UsageError, match="ambiguous"):
            store.resolve("dddd")
        with pytest.raises(UsageError, match="no stored run"):
            store.resolve("ffff")
    finally:
        event.remove(store._engine, "before_cursor_execute", seen)
        store.close()


def test_results_list_reads_only_the_rows_it_shows(
        store_loc: str, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    store = Store.open(store_loc)
    for i in range(23):
        store.add(_run(f"ffff{i:04d}", T0 + 60 * i, 1), probe_shape)
    store.close()
    asked: list[int | None] = []
    real = Store.list

    def listing(self: Store, limit: int | None = 20):  # type: ignore[no-untyped-def]
        asked.append(limit)
        return real(self, limit)

    monkeypatch.setattr(Store, "list", listing)
    assert main(["results", "list", "--store", store_loc]) == 0
    out = capsys.readouterr().out
    assert "20 of 23 runs shown" in out and "ffff0022" in out and "ffff0002" not in out
    assert main(["results", "list", "--store", store_loc, "--json", "--limit", "5"]) == 0
    doc = __import__("json").loads(capsys.readouterr().out)
    assert (doc["total"], doc["shown"]) == (23, 5)
    assert asked == [20, 5]
