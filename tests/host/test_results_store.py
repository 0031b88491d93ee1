# SPDX-License-Identifier: MIT
"""The result model's versioning and the store's guarantees."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rtlab.errors import RtlabError, UsageError
from rtlab.exitcodes import ExitCode
from rtlab.report import EXPORTERS, verdict
from rtlab.results import (
    RESULT_SCHEMA_VERSION,
    Channel,
    LogLinHistogram,
    Phase,
    RunResult,
    load_result,
)
from rtlab.results.store import Store, resolve_location


def make_result(run_id: str = "abcd1234", *, partial: bool = False,
                rt_valid: bool | None = True, n: int = 1000) -> RunResult:
    values = [10_000 + i for i in range(n)]
    ch = Channel(name="cpu1", cpu=1, samples=n, min_ns=values[0], max_ns=2_410_000,
                 sum_ns=sum(values), max_at_ns=3 * 10**9,
                 hist=LogLinHistogram.from_values([*values[:-1], 2_410_000]))
    return RunResult(run_id=run_id, status="partial" if partial else "completed",
                     probe="timer", phases=[Phase("main", [ch], 10**10)], partial=partial,
                     rt_valid=rt_valid, scenario={"name": "quick", "hash": "0" * 64},
                     provenance={"engine": {"system": {"release": "6.1"}},
                                 "host": {"start_wall": "2026-01-01T00:00:00+00:00"}})


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


def test_cli_refuses_unknown_version_json(tmp_path: Path, store_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    # a stored blob from the future: `results show` says so in one line, exit 1
    store = Store.open(str(store_path))
    store.add(make_result("feed0001"))
    import zlib

    from sqlalchemy import update

    future = json.dumps({**make_result("feed0001").to_dict(), "version": 7}).encode()
    with store._engine.begin() as conn:
        conn.execute(update(store._tables["runs"]).values(result_z=zlib.compress(future)))
    from rtlab.cli import main

    assert main(["results", "show", "feed0001"]) == ExitCode.ERROR
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "result version 7 is not supported" in err[0]


def test_store_never_overwrites_and_resolves_prefixes(store_path: Path) -> None:
    store = Store.open(str(store_path))
    store.add(make_result("abcd1234"))
    store.add(make_result("abce9999"))
    with pytest.raises(RtlabError, match="never overwritten"):
        store.add(make_result("abcd1234"))
    assert store.resolve("abcd") == "abcd1234"
    with pytest.raises(UsageError, match="ambiguous"):
        store.resolve("abc")
    with pytest.raises(UsageError, match="no stored run"):
        store.resolve("ffff")
    with pytest.raises(UsageError, match="invalid run id"):
        store.resolve("a%")
    assert store.get("last").run_id in ("abcd1234", "abce9999")
    rows = store.list()
    assert rows[0].worst_max_ns == 2_410_000 and rows[0].kernel_release == "6.1"
    assert store.raw_path("x").parent == store_path.parent / "runs"


def test_store_location_precedence(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path)}
    assert resolve_location(None, env) == str(tmp_path / ".local/share/rtlab/rtlab.db")
    env["XDG_DATA_HOME"] = str(tmp_path / "x")
    assert resolve_location(None, env) == str(tmp_path / "x/rtlab/rtlab.db")
    env["RTLAB_STORE"] = "/elsewhere.db"
    assert resolve_location(None, env) == "/elsewhere.db"
    assert resolve_location("cli.db", env) == "cli.db"


def test_verdict_flags() -> None:
    text = verdict(make_result())
    assert text.startswith("worst wake-up latency 2.41 ms on CPU1 at 3.0 s")
    assert "rtlab doctor" in text  # an isolated spike far above p99
    bad = verdict(make_result(partial=True, rt_valid=False))
    assert bad.startswith("[PARTIAL] [NOT real-time valid] ")


def test_exporters_share_one_interface() -> None:
    r = make_result()
    assert set(EXPORTERS) == {"json", "csv", "csv-hist", "markdown", "junit", "cyclictest-hist"}
    for exporter in EXPORTERS.values():
        data = exporter.serialize(r)
        assert isinstance(data, bytes) and data
    assert load_result(json.loads(EXPORTERS["json"].serialize(r))).run_id == r.run_id
    md = EXPORTERS["markdown"].serialize(r).decode()
    assert "| CPU1 | 1000 |" in md and "n/a" in md  # p99.99 with 1000 samples is n/a
