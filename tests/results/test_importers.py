# SPDX-License-Identifier: MIT
"""Importers on real recorded files (tests/support/data) and on malformed ones."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from rtlab.cli import main
from rtlab.errors import RtlabError
from rtlab.probes.registry import shape as probe_shape
from rtlab.results.importers import import_file, jitterdebugger
from rtlab.results.importers.common import ImportFormatError
from rtlab.results.store import Store
from tests.support.paths import DATA


def test_cyclictest_json() -> None:
    r = import_file(DATA / "cyclictest.json", "cyclictest-json", "cccc0001")
    doc = json.loads((DATA / "cyclictest.json").read_text())
    assert [c.name for c in r.phases[0].channels] == ["cpu0", "cpu1"]
    for ch, t in zip(r.phases[0].channels, doc["thread"].values(), strict=True):
        assert ch.samples == t["cycles"] and ch.max_ns == t["max"] * 1000
        assert ch.hist.total == t["cycles"]  # overflows counted (placed at the max)
    assert r.provenance["imported"]["tool"] == "cyclictest"
    assert r.system["release"] and r.elapsed_ns == 3_000_000_000
    assert any("beyond the -h range" in n for n in r.notes)


def test_cyclictest_hist_matches_json_of_same_run() -> None:
    h = import_file(DATA / "cyclictest_hist.txt", "cyclictest-hist", "cccc0002")
    j = import_file(DATA / "cyclictest.json", "cyclictest-json", "cccc0003")
    for a, b in zip(h.phases[0].channels, j.phases[0].channels, strict=True):
        assert (a.samples, a.max_ns, a.min_ns) == (b.samples, b.max_ns, b.min_ns)
        assert a.hist == b.hist


def test_jitterdebugger() -> None:
    r = import_file(DATA / "jitterdebugger_results.json", "jitterdebugger", "dddd0001")
    doc = json.loads((DATA / "jitterdebugger_results.json").read_text())
    for ch, c in zip(r.phases[0].channels, doc["cpu"].values(), strict=True):
        assert ch.samples == c["count"] == ch.hist.total and ch.max_ns == c["max"] * 1000


def test_cyclictest_nsecs_text_needs_the_flag_and_then_matches_its_json() -> None:
    # real files of one `cyclictest -N -h 300` run: the text does not say "ns"
    j = import_file(DATA / "cyclictest_nsecs.json", "cyclictest-json", "cccc0011")
    wrong = import_file(DATA / "cyclictest_nsecs_hist.txt", "cyclictest-hist", "cccc0012")
    assert any("--nsecs" in n for n in wrong.notes)  # read as µs: 1000x too large
    h = import_file(DATA / "cyclictest_nsecs_hist.txt", "cyclictest-hist", "cccc0013",
                    nsecs=True)
    assert h.provenance["imported"]["resolution_ns"] == 1
    assert not any("--nsecs" in n for n in h.notes)
    for a, b in zip(h.phases[0].channels, j.phases[0].channels, strict=True):
        assert (a.samples, a.min_ns, a.max_ns) == (b.samples, b.min_ns, b.max_ns)
        assert a.max_ns < 100_000_000  # ns, not µs read as ns * 1000
    beyond = h.provenance["imported"]["beyond_range"]
    assert beyond["thread0"]["count"] == h.phases[0].channels[0].samples  # all beyond 300 ns
    assert beyond["thread0"]["above_ns"] == 300


def test_nsecs_is_refused_for_other_formats(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["results", "import", "--format", "cyclictest-json", "--nsecs",
                 str(DATA / "cyclictest.json")]) == 2
    assert "--nsecs" in capsys.readouterr().err


def test_cyclictest_H_hist_with_total_trailer() -> None:
    r = import_file(DATA / "cyclictest_H_hist.txt", "cyclictest-hist", "cccc0014")
    (ch,) = r.phases[0].channels
    total = int(next(ln for ln in (DATA / "cyclictest_H_hist.txt").read_text().splitlines()
                     if ln.startswith("# Total:")).split()[-1])
    # `# Total:` counts the histogram rows only; the one overflow comes on top
    assert ch.samples == total + 1 and ch.max_ns == 237_000 and ch.min_ns == 10_000
    assert r.provenance["imported"]["beyond_range"]["thread0"] == {"count": 1,
                                                                   "above_ns": 200_000}


def test_jitterdebugger_nsec_restores_dropped_samples() -> None:
    r = import_file(DATA / "jitterdebugger_nsec_results.json", "jitterdebugger", "dddd0011")
    doc = json.loads((DATA / "jitterdebugger_nsec_results.json").read_text())
    assert r.provenance["imported"]["resolution_ns"] == 1
    beyond = r.provenance["imported"]["beyond_range"]
    for ch, c in zip(r.phases[0].channels, doc["cpu"].values(), strict=True):
        dropped = c["count"] - sum(c["histogram"].values())
        assert dropped > 0 and beyond[ch.name]["count"] == dropped
        assert ch.samples == ch.hist.total == c["count"] and ch.max_ns == c["max"]
        assert beyond[ch.name]["above_ns"] > max(int(k) for k in c["histogram"])


def test_rtla_nanoseconds_bucket_size_and_user_columns() -> None:
    r = import_file(DATA / "rtla_timerlat_hist_ns_b500.txt", "rtla-timerlat-hist", "eeee0011")
    chans = {c.name: c for c in r.phases[0].channels}
    assert list(chans) == ["irq@cpu0", "thread@cpu0", "user@cpu0", "irq@cpu2", "thread@cpu2",
                           "user@cpu2"]
    assert chans["user@cpu0"].samples == 0 and chans["user@cpu0"].max_ns is None
    thr2 = chans["thread@cpu2"]
    assert thr2.samples == 1000 and thr2.max_ns == 48_100 and thr2.min_ns == 2_044
    assert r.provenance["imported"]["resolution_ns"] == 500
    assert r.provenance["imported"]["beyond_range"]["thread@cpu2"] == {"count": 6,
                                                                      "above_ns": 12_500}
    assert any("bucket size 500 ns" in n for n in r.notes)


def test_rtla_timerlat_hist() -> None:
    r = import_file(DATA / "rtla_timerlat_hist.txt", "rtla-timerlat-hist", "eeee0001")
    names = [c.name for c in r.phases[0].channels]
    assert names == ["irq@cpu0", "thread@cpu0", "irq@cpu1", "thread@cpu1"]
    thr1 = r.phases[0].channels[3]
    assert thr1.samples == 9991 and thr1.max_ns == 112_000 and thr1.cpu == 1
    assert r.elapsed_ns == 10_000_000_000


def test_rtla_headline_is_the_task_latency_not_irq_and_thread_together() -> None:
    """An rtla import is compared, gated and summarised on its thread@ (or user@)
    channels: with irq@ merged in, every period would count twice."""
    r = import_file(DATA / "rtla_timerlat_hist.txt", "rtla-timerlat-hist", "eeee0002")
    head = [ch.name for _, ch in r.headline_channels(probe_shape(r.probe))]
    assert head == ["thread@cpu0", "thread@cpu1"]
    thread = sum(c.samples for c in r.phases[0].channels if c.name.startswith("thread@"))
    assert r.merged(probe_shape(r.probe)).samples == thread
    u = import_file(DATA / "rtla_timerlat_hist_ns_b500.txt", "rtla-timerlat-hist", "eeee0012")
    head_u = [ch.name for _, ch in u.headline_channels(probe_shape(u.probe))]
    chans = {c.name: c for c in u.phases[0].channels}
    want = "user" if any(c.samples for n, c in chans.items() if n.startswith("user@")) \
        else "thread"
    assert head_u and all(n.startswith(want + "@") for n in head_u)


def test_sockperf_full_log() -> None:
    r = import_file(DATA / "sockperf_full_log.csv", "sockperf", "ffff0001")
    ch = r.phases[0].channels[0]
    rows = [ln for ln in (DATA / "sockperf_full_log.csv").read_text().splitlines()
            if ln[:1].isdigit()]
    assert ch.samples == len(rows) and ch.windows and ch.window_ns == 1_000_000_000
    assert ch.max_ns == max(round(float(ln.split(",")[3]) * 1000) for ln in rows)


@pytest.mark.parametrize(("fmt", "content", "words"), [
    ("cyclictest-json", '{"file_version": 1, "thread": {"0": {"histogram": {"5": 3}, '
     '"cycles": 2, "min": 5, "max": 5, "avg": 5, "cpu": 0}}}', "smaller than"),
    ("cyclictest-json", '{"file_version": 1, "thread": {', "invalid JSON"),
    ("cyclictest-json", '{"file_version": 2, "thread": {}}', "file_version"),
    ("cyclictest-hist", "000000 000001\t000002\n000001 000001\n# Max Latencies: 00001 00001\n",
     "columns"),
    ("cyclictest-hist", "000000 000001\n", "Max Latencies"),
    ("jitterdebugger", '{"version": 3, "cpu": {"0": {"histogram": {"x": 1}, "count": 1}}}',
     "not an integer"),
    ("rtla-timerlat-hist", "# Time unit is microseconds (us)\nIndex IRQ-000\n1 5\n", "count"),
    # sockperf's summary without its <MIN> line: neither a full log nor a whole summary
    ("sockperf", "".join(ln for ln in (DATA / "sockperf_stdout.txt").read_text()
                         .splitlines(keepends=True) if "<MIN>" not in ln), "--full-log"),
    ("sockperf", "packet, txTime(sec), rxTime(sec), rtt(usec)\n0, 1.0, 1.1, abc\n", "number"),
    # fields missing or out of range: one line, never a traceback
    ("cyclictest-json", '{"file_version": 1, "thread": {"0": {"histogram": {"5": 3}, '
     '"cycles": 3, "max": 5, "cpu": 0}}}', "no `min`"),
    ("cyclictest-json", '{"file_version": 1, "thread": {"0": {"histogram": {"5": 3}, '
     '"cycles": 4, "min": 5, "max": -5, "cpu": 0}}}', "negative max"),
    ("cyclictest-json", '{"file_version": 1, "thread": {"0": {"histogram": {"5": 3}, '
     '"cycles": 3, "min": 9, "max": 5, "cpu": 0}}}', "above max"),
    ("cyclictest-json", '{"file_version": 1, "thread": [1, 2]}', "thread"),
    ("cyclictest-json", '{"file_version": 1, "thread": {"0": {"histogram": {"5": 3}, '
     '"cycles": 3, "min": 5, "max": 5, "cpu": {"a": 1}}}}', "cpu"),
    ("jitterdebugger", '{"version": 3, "cpu": {"0": {"histogram": {"3": 1}, "count": 1, '
     '"max": 3}}}', "no `min`"),
    ("jitterdebugger", '{"version": 3, "cpu": {"0": {"histogram": {"3": 1}, "min": 3, '
     '"max": 3}}}', "no `count`"),
    ("jitterdebugger", "\x00\x01garbage", "binary (a NUL byte at offset 0)"),
    ("jitterdebugger", "\x01garbage", "invalid JSON"),
    ("jitterdebugger", (DATA / "jitterdebugger_starved_results.json").read_text(),
     "measured nothing there"),
    ("rtla-timerlat-hist", "\x00\x01\x02", "binary"),
    ("rtla-timerlat-hist", "\x01\x02", "Index"),
    ("cyclictest-hist", "", "Max Latencies"),
])
def test_malformed_is_one_line_error_and_nothing_stored(
        tmp_path: Path, store_path: Path, capsys: pytest.CaptureFixture[str],
        fmt: str, content: str, words: str) -> None:
    f = tmp_path / "bad.txt"
    f.write_text(content)
    with pytest.raises(RtlabError) as exc:
        import_file(f, fmt, "x")
    assert words in exc.value.one_line()
    assert main(["results", "import", "--format", fmt, str(f)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("rtlab: error:") and words in err
    if store_path.exists():
        s = Store.open(str(store_path))
        assert s.list() == []
        s.close()


def test_import_cli_stores_marked_run(store_path: Path) -> None:
    assert main(["results", "import", "--format", "jitterdebugger",
                 str(DATA / "jitterdebugger_results.json")]) == 0
    s = Store.open(str(store_path))
    try:
        (row,) = s.list()
        r = s.get(row.id)
    finally:
        s.close()
    assert r.provenance["imported"]["format"] == "jitterdebugger"
    assert row.scenario == "imported:jitterdebugger" and row.kernel_release


def test_import_with_host_and_kernel_feeds_history(
        store_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for kernel, date in (("6.1.90-rt30", "2025-01-10"), ("6.6.30-rt30", "2025-06-01")):
        assert main(["results", "import", "--format", "cyclictest-json", "--host", "board7",
                     "--kernel", kernel, "--preempt", "PREEMPT_RT", "--date", date,
                     str(DATA / "cyclictest.json")]) == 0
    s = Store.open(str(store_path))
    try:
        rows = s.list()
        r = s.get(rows[0].id)
    finally:
        s.close()
    assert {row.host for row in rows} == {"board7"}
    assert [row.kernel_release for row in rows] == ["6.6.30-rt30", "6.1.90-rt30"]
    assert r.system["preempt"] == "PREEMPT_RT"
    assert r.provenance["host"]["start_wall"].startswith("2025-06-01")
    assert any("replaced" in n for n in r.notes)  # the file named another kernel
    capsys.readouterr()
    assert main(["history", "--host", "board7"]) == 0
    out = capsys.readouterr().out
    assert "6.1.90-rt30" in out and "6.6.30-rt30" in out


def test_import_without_date_uses_the_file_time(tmp_path: Path) -> None:
    f = tmp_path / "results.json"
    f.write_bytes((DATA / "jitterdebugger_results.json").read_bytes())
    os.utime(f, (1_700_000_000, 1_700_000_000))
    r = import_file(f, "jitterdebugger", "dddd0009")
    assert r.provenance["host"]["start_wall"].startswith("2023-11-14T22:13:20")
    assert "modification time" in r.provenance["host"]["start_wall_source"]


@pytest.mark.parametrize("argv, words", [
    (["--host", "my board"], "--host"),
    (["--kernel", ""], "--kernel"),
    (["--date", "yesterday"], "ISO 8601"),
])
def test_bad_import_context_is_usage_error_and_nothing_stored(
        store_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str],
        words: str) -> None:
    assert main(["results", "import", "--format", "cyclictest-json", *argv,
                 str(DATA / "cyclictest.json")]) == 2
    err = capsys.readouterr().err
    assert words in err and err.count("\n") <= 2
    assert not store_path.exists() or not Store.open(str(store_path)).list()


def test_import_context_is_refused_for_engine_files(
        store_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["results", "import", "--host", "b1", str(DATA / "cyclictest.json")]) == 2
    assert "peer formats" in capsys.readouterr().err


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (SCHED_FIFO, netns)")


@needs_root
@pytest.mark.slow
@pytest.mark.skipif(shutil.which("cyclictest") is None, reason="cyclictest not installed")
def test_live_cyclictest(tmp_path: Path) -> None:
    js, txt = tmp_path / "ct.json", tmp_path / "ct.txt"
    with txt.open("w") as out:
        subprocess.run(["cyclictest", "-m", "-S", "-p", "99", "-i", "1000", "-h", "400", "-D",
                        "1", "-q", f"--json={js}"], stdout=out, check=True, timeout=30)
    a = import_file(js, "cyclictest-json", "live0001")
    b = import_file(txt, "cyclictest-hist", "live0002")
    assert a.merged(probe_shape(a.probe)).samples == b.merged(probe_shape(b.probe)).samples > 0


@needs_root
@pytest.mark.slow
def test_jitterdebugger_cpu_that_measured_nothing_is_named() -> None:
    """jitterdebugger's own invalid JSON: a CPU whose thread never ran (count 0) gets
    `"avg": -nan` (recorded with a higher-priority busy loop on CPU 1)."""
    with pytest.raises(RtlabError) as exc:
        import_file(DATA / "jitterdebugger_starved_results.json", "jitterdebugger", "x")
    msg = exc.value.one_line()
    assert "cpu 1: jitterdebugger measured nothing there (count 0)" in msg
    assert "-nan" in msg and "line 63" in msg and "\n" not in msg
    # a -nan anywhere else, or with samples, is not that defect: the parser's words
    text = (DATA / "jitterdebugger_starved_results.json").read_text()
    for bad in (text.replace('"count": 0', '"count": 5'),
                text.replace('"version": 3', '"version": 3 x')):
        with pytest.raises(ImportFormatError, match=r"^invalid JSON"):
            jitterdebugger.parse(bad, "x")


_JD_ATTEMPTS = 3


@pytest.mark.skipif(shutil.which("jitterdebugger") is None, reason="jitterdebugger not installed")
def test_live_jitterdebugger(tmp_path: Path) -> None:
    """A results.json made here, imported. jitterdebugger writes it once, after it
    stopped by itself (-D) and joined its measuring threads. On this shared machine a
    higher-priority task of another test may hold a CPU for the whole second: that
    CPU's thread then measures nothing, jitterdebugger waits for it as long as the
    task runs, and writes `"avg": -nan` (invalid JSON). Such an attempt must get the
    importer's one-line error, and is measured again (at priority 98, the highest
    jitterdebugger allows)."""
    starved: list[str] = []
    for attempt in range(_JD_ATTEMPTS):
        out = tmp_path / f"jd{attempt}"
        try:
            proc = subprocess.run(["jitterdebugger", "-p", "98", "-D", "1s", "-o", str(out)],
                                  capture_output=True, timeout=15)
        except subprocess.TimeoutExpired:  # held up by a starved thread; killed
            starved.append("timed out")
            continue
        assert proc.returncode == 0, proc.stderr
        text = (out / "results.json").read_text()
        counts = [int(n) for n in re.findall(r'"count": (\d+)', text)]
        assert len(counts) == len(os.sched_getaffinity(0)), text
        try:
            r = import_file(out / "results.json", "jitterdebugger", f"live000{attempt}")
        except RtlabError as exc:  # only the known defect, named in one line
            assert 0 in counts and "-nan" in text, exc.one_line()
            assert "measured nothing there (count 0)" in exc.one_line()
            starved.append(exc.one_line())
            continue
        channels = r.phases[0].channels
        assert [ch.samples for ch in channels] == counts and all(counts)
        assert r.merged(probe_shape(r.probe)).samples == sum(counts)
        return
    pytest.skip(f"jitterdebugger could not measure every CPU in {_JD_ATTEMPTS} attempts "
                f"(a higher-priority task held one): {starved}")


def test_engine_format_garbage_is_usage_error(tmp_path: Path, store_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "garbage.jsonl"
    f.write_bytes(bytes(range(256)) * 8)  # NUL bytes too: an engine file's lines are
    assert main(["results", "import", str(f)]) == 2  # read up to the damage (a crash's zeros)
    err = capsys.readouterr().err
    assert "nothing to import" in err and err.count("\n") == 1
    assert not store_path.exists() or not Store.open(str(store_path)).list()


def test_ccdf_of_overflow_samples_is_dashed_beyond_the_range() -> None:
    """The one overflow of cyclictest -H 200 (placed at the 237 µs max) must not draw as
    a measured shelf from 200 µs on: beyond 200 µs the CCDF is an upper bound, dashed,
    and says so; without censoring (a measured run) the line is solid."""
    from rtlab.report.html import render_html
    from rtlab.report.plots import ccdf_figure, censored_of, figure_for

    r = import_file(DATA / "cyclictest_H_hist.txt", "cyclictest-hist", "cccc0015")
    (ch,) = r.phases[0].channels
    assert censored_of(r, [ch.name]) == (1, 200_000)
    fig = figure_for("ccdf", r.phases, "t", r)
    lines = [ln for ln in fig.axes[0].get_lines() if len(ln.get_xdata()) > 1]
    dashed = [ln for ln in lines if ln.get_linestyle() == "--"]
    assert len(dashed) == 1 and min(dashed[0].get_xdata()) == pytest.approx(200.0)
    assert max(dashed[0].get_xdata()) == pytest.approx(237.0)
    solid = [ln for ln in lines if ln.get_linestyle() == "-"]
    assert max(solid[0].get_xdata()) == pytest.approx(200.0)
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert "1 beyond 200 µs: dashed = upper bound" in legend[0], legend
    plain = ccdf_figure([("x", ch)])
    assert not [ln for ln in plain.axes[0].get_lines() if ln.get_linestyle() == "--"]
    assert "dashed = upper bound" in render_html([r])
