# SPDX-License-Identifier: MIT
"""The `cyclictest-json` export, read as a cyclictest --json consumer reads it.

The reader below is written from rt-tests 2.x itself: `rt_write_json` in
src/lib/rt-utils.c writes the top-level keys in this order (two of them with a stray
colon), then cyclictest's `write_stats` writes `num_threads`, `resolution_in_ns` and one
object per thread, keyed "0".."N-1", with `histogram` (µs bucket -> count, non-empty
buckets only), `cycles`, `min`, `max`, `avg`, `cpu`, `node`. LAVA's
parse_rt_tests_results.py reads `num_threads`, each thread's min/avg/max and
`return_code` (pass when 0)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rtlab.cli import main
from rtlab.report.exporters import EXPORTERS, get_exporter
from rtlab.results.importers import import_file
from rtlab.results.store import Store
from tests.support.paths import DATA

TOP_KEYS = ["file_version", "cmdline:", "rt_test_version:", "start_time", "end_time",
            "return_code", "sysinfo", "num_threads", "resolution_in_ns", "thread"]
SYSINFO_KEYS = ["sysname", "nodename", "release", "version", "machine", "realtime"]
THREAD_KEYS = ["histogram", "cycles", "min", "max", "avg", "cpu", "node"]


def read_like_cyclictest_consumer(doc: dict) -> list[dict]:
    """Check `doc` against rt-tests' layout and return its threads as a consumer sees them."""
    assert [k for k in doc if k in TOP_KEYS] == TOP_KEYS  # order as rt_write_json writes
    assert doc["file_version"] == 1 and isinstance(doc["return_code"], int)
    assert list(doc["sysinfo"]) == SYSINFO_KEYS and doc["sysinfo"]["realtime"] in (0, 1)
    assert doc["resolution_in_ns"] in (0, 1)
    for key in ("start_time", "end_time"):
        if doc[key]:  # "%a, %d %b %Y %T %z"
            from email.utils import parsedate_to_datetime
            assert parsedate_to_datetime(doc[key]).tzinfo is not None
    n = int(doc["num_threads"])
    assert list(doc["thread"]) == [str(i) for i in range(n)]
    threads = []
    for i in range(n):
        t = doc["thread"][str(i)]
        assert list(t) == THREAD_KEYS
        hist = {int(k): v for k, v in t["histogram"].items()}
        assert list(hist) == sorted(hist) and all(v > 0 for v in hist.values())
        assert all(isinstance(t[k], int) for k in ("cycles", "min", "max", "cpu", "node"))
        assert sum(hist.values()) <= t["cycles"]  # overflows are in cycles only
        if t["cycles"]:
            assert t["min"] <= t["avg"] <= t["max"]
            assert min(hist) == t["min"] and (max(hist) == t["max"]
                                               or sum(hist.values()) < t["cycles"])
        threads.append(t)
    return threads


def _lava(doc: dict) -> list[str]:
    """What LAVA's parse_rt_tests_results.py prints for a cyclictest JSON."""
    out = [f"t{i}-{k}-latency pass {doc['thread'][str(i)][k]} us"
           for i in range(int(doc["num_threads"])) for k in ("min", "avg", "max")]
    return [*out, "cyclictest " + ("pass" if int(doc["return_code"]) == 0 else "fail")]


def test_registered() -> None:
    assert "cyclictest-json" in EXPORTERS


def test_export_of_a_real_cyclictest_run_reads_back_the_same() -> None:
    r = import_file(DATA / "cyclictest.json", "cyclictest-json", "cj000001")
    doc = json.loads(get_exporter("cyclictest-json").serialize(r))
    real = json.loads((DATA / "cyclictest.json").read_text())
    threads = read_like_cyclictest_consumer(doc)
    assert [k for k in real if k in TOP_KEYS] == TOP_KEYS  # the reader accepts the real file
    read_like_cyclictest_consumer(real)
    for mine, theirs in zip(threads, real["thread"].values(), strict=True):
        for k in ("cycles", "min", "max", "cpu"):
            assert mine[k] == theirs[k], k
        assert abs(mine["avg"] - theirs["avg"]) <= 1.0  # cyclictest's own avg is truncated
    assert doc["sysinfo"]["nodename"] == real["sysinfo"]["nodename"]
    assert doc["start_time"] == real["start_time"] and doc["return_code"] == 0
    assert _lava(doc)[-1] == "cyclictest pass"


def test_round_trip_through_the_importer(tmp_path: Path) -> None:
    r = import_file(DATA / "jitterdebugger_results.json", "jitterdebugger", "cj000002")
    f = tmp_path / "ct.json"
    f.write_bytes(get_exporter("cyclictest-json").serialize(r))
    back = import_file(f, "cyclictest-json", "cj000003")
    for a, b in zip(r.phases[0].channels, back.phases[0].channels, strict=True):
        assert (a.samples, a.cpu, a.min_ns // 1000 * 1000, a.max_ns // 1000 * 1000) == (
            b.samples, b.cpu, b.min_ns, b.max_ns)


def test_rtla_export_takes_the_task_channels_only() -> None:
    r = import_file(DATA / "rtla_timerlat_hist_u_all.txt", "rtla-timerlat-hist", "cj000004")
    doc = json.loads(get_exporter("cyclictest-json").serialize(r))
    read_like_cyclictest_consumer(doc)
    assert doc["num_threads"] == 2
    assert [t["channel"] for t in doc["rtlab"]["threads"].values()] == ["user@cpu0", "user@cpu1"]
    assert doc["thread"]["0"]["max"] == 301 and doc["thread"]["0"]["cpu"] == 0


@pytest.mark.parametrize(("change", "code"), [
    (lambda r: setattr(r, "status", "partial"), 1),
    (lambda r: setattr(r, "rt_valid", False), 1),
    (lambda r: setattr(r, "status", "threshold"), 3),
    (lambda r: setattr(r.phases[0].channels[0], "max_ns", 1), 1),  # fails validation
])
def test_return_code_is_never_pass_for_a_run_rtlab_does_not_believe(change, code: int) -> None:
    r = import_file(DATA / "cyclictest.json", "cyclictest-json", "cj000005")
    change(r)
    doc = json.loads(get_exporter("cyclictest-json").serialize(r))
    assert doc["return_code"] == code and _lava(doc)[-1] == "cyclictest fail"


def test_summary_only_import_exports_as_failed() -> None:
    r = import_file(DATA / "sockperf_stdout.txt", "sockperf", "cj000006")
    doc = json.loads(get_exporter("cyclictest-json").serialize(r))
    read_like_cyclictest_consumer(doc)
    assert doc["return_code"] == 1 and doc["thread"]["0"]["cycles"] == 2550


def test_cli_export(store_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["results", "import", "--format", "cyclictest-json",
                 str(DATA / "cyclictest.json")]) == 0
    s = Store.open(str(store_path))
    (row,) = s.list()
    s.close()
    out = tmp_path / "out.json"
    assert main(["export", row.id, "--format", "cyclictest-json", "-o", str(out)]) == 0
    doc = json.loads(out.read_text())
    read_like_cyclictest_consumer(doc)
    assert doc["rtlab"]["run_id"] == row.id
