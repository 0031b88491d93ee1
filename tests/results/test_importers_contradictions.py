# SPDX-License-Identifier: MIT
"""Imports whose own numbers contradict each other are refused, for every format: exit 2,
one line naming the file (and the line when the format has lines) and the two numbers
that disagree, no traceback, nothing stored and no file created (issue 24). Each case
edits a real recorded file (tests/support/data) so that exactly one self-check breaks."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from rtlab.cli import main
from rtlab.results.importers.common import (
    ImportFormatError,
    channel_from_buckets,
    channel_from_ranks,
    int_keyed,
    load_json,
)
from tests.support.paths import DATA


def _text(name: str) -> str:
    return (DATA / name).read_text()


def _json_edit(name: str, edit: Callable[[dict], None]) -> str:
    doc = json.loads(_text(name))
    edit(doc)
    return json.dumps(doc, indent=1)


def _dup_first_bucket(name: str, count: int) -> str:
    """The file with its first histogram key written twice (the second with `count`)."""
    text = _text(name)
    m = re.search(r'"histogram": \{\s*"(\d+)": \d+', text)
    assert m is not None
    return text.replace(m.group(0), f'{m.group(0)}, "{m.group(1)}": {count}', 1)


def _last_status(text: str, thread: int, field: str, value: int) -> str:
    lines = text.splitlines(keepends=True)
    i = max(n for n, ln in enumerate(lines) if ln.startswith(f"T: {thread} "))
    lines[i] = re.sub(rf"{field}:\s*\d+", f"{field}: {value:6d}", lines[i])
    return "".join(lines)


# a two-thread `cyclictest -H 4` output (the last column sums the threads)
_H_TWO = ("# Histogram\n000000 000000\t000000\t000000\n000001 000003\t000001\t000004\n"
          "000002 000001\t000002\t000003\n000003 000000\t000001\t000001\n"
          "# Total: 000000004 000000004 000000008\n# Min Latencies: 00001 00001\n"
          "# Avg Latencies: 00001 00002\n# Max Latencies: 00002 00003\n"
          "# Histogram Overflows: 00000 00000\n")

CASES: list[tuple[str, str, Callable[[], str], list[str]]] = [
    # cyclictest -h text: the example (stored as "rows cut" before)
    ("ct-total-below-rows", "cyclictest-hist",
     lambda: _text("cyclictest_hist.txt").replace("# Total: 000002989", "# Total: 000002900"),
     ["line 1475", "thread 0", "2,900", "2,989"]),
    ("ct-overflow-max-in-range", "cyclictest-hist",
     lambda: _text("cyclictest_hist.txt").replace("# Max Latencies: 07075",
                                                  "# Max Latencies: 00390"),
     ["line 1479", "2 overflow(s)", "400", "390"]),
    ("ct-status-max-above-trailer", "cyclictest-hist",
     lambda: _last_status(_text("cyclictest_hist.txt"), 1, "Max", 9999),
     ["line 1073", "Max: 9999", "6960"]),
    ("ct-status-cycles-above-histogram", "cyclictest-hist",
     lambda: _last_status(_text("cyclictest_hist.txt"), 0, "C", 5000),
     ["line 1072", "5,000", "2,991"]),
    ("ct-status-thread-not-in-trailer", "cyclictest-hist",
     lambda: _text("cyclictest_hist.txt").replace("T: 1 (17209)", "T: 5 (17209)"),
     ["status line of thread 5", "2 thread(s)"]),
    ("ct-H-summary-column", "cyclictest-hist",
     lambda: _H_TWO.replace("000002 000001\t000002\t000003", "000002 000001\t000002\t000004"),
     ["line 4", "summary column", "4", "3"]),
    ("ct-H-total-summary", "cyclictest-hist",
     lambda: _H_TWO.replace("000000004 000000008", "000000004 000000009"),
     ["line 6", "9", "8"]),
    # cyclictest --json
    ("ctj-num-threads", "cyclictest-json",
     lambda: _json_edit("cyclictest.json", lambda d: d.update(num_threads=3)),
     ["num_threads says 3", "2 thread(s)"]),
    ("ctj-cycles-beyond-duration", "cyclictest-json",
     lambda: _json_edit("cyclictest.json", lambda d: d["thread"]["0"].update(cycles=50_000)),
     ["thread 0", "50,000", "5,001"]),
    ("ctj-overflow-max-inside-h", "cyclictest-json",
     lambda: _json_edit("cyclictest.json", lambda d: d["thread"]["1"].update(max=399)),
     ["thread 1", "-h 400", "max 399"]),
    ("ctj-bucket-beyond-h", "cyclictest-json",
     lambda: _json_edit("cyclictest.json", lambda d: d["thread"]["0"]["histogram"].update(
         {"450": 1})), ["thread 0", "bucket 450", "-h 400"]),
    ("ctj-duplicate-bucket", "cyclictest-json", lambda: _dup_first_bucket("cyclictest.json", 0),
     ["appears twice", "'15'"]),
    ("ctj-end-before-start", "cyclictest-json",
     lambda: _json_edit("cyclictest.json", lambda d: d.update(
         end_time="Sun, 22 Nov 2026 05:26:20 +0000")), ["end_time", "before start_time"]),
    # jitterdebugger
    ("jd-duplicate-bucket", "jitterdebugger",
     lambda: _dup_first_bucket("jitterdebugger_results.json", 0), ["appears twice", "'20'"]),
    ("jd-dropped-but-max-in-range", "jitterdebugger",
     lambda: _json_edit("jitterdebugger_results.json", lambda d: d["cpu"]["0"].update(
         count=d["cpu"]["0"]["count"] + 5, max=max(int(k) for k, v in d["cpu"]["0"][
             "histogram"].items() if v))),
     ["cpu0", "6 sample(s) beyond", "count 2,936", "max 395", "395..396"]),
    # oslat (text and --json)
    ("oslat-duplicate-bucket-line", "oslat",
     lambda: _text("oslat_v2_stdout.txt").replace(
         "    002 (us):\t 14 29\n", "    002 (us):\t 14 29\n    002 (us):\t 15 29\n"),
     ["line 18", "002", "twice"]),
    ("oslat-max-below-top-bucket", "oslat",
     lambda: _text("oslat_v2_stdout.txt").replace("Maximum:\t 39511", "Maximum:\t 20"),
     ["cpu0", "above the max"]),
    ("oslat-json-duplicate-key", "oslat",
     lambda: _text("oslat_v2.json").replace('"file_version": 1', '"file_version": 1, '
                                             '"file_version": 1', 1), ["file_version", "twice"]),
    # rtla
    ("rtla-duplicate-column", "rtla-timerlat-hist",
     lambda: _text("rtla_timerlat_hist.txt").replace("IRQ-001   Thr-001", "IRQ-000   Thr-001"),
     ["line 4", "irq of CPU 0", "twice"]),
    ("rtla-cpus-disagree", "rtla-timerlat-hist",
     lambda: _text("rtla_timerlat_hist.txt").replace("IRQ-001   Thr-001", "IRQ-001   Usr-001"),
     ["line 4", "CPU 0", "irq, thread", "CPU 1 irq, user"]),
    ("rtla-over-but-max-in-range", "rtla-timerlat-hist",
     lambda: _text("rtla_timerlat_hist.txt").replace(
         "max:          7        31         7       112",
         "max:          7        31         7        31"),
     ["thread@cpu1", "3 sample(s) beyond", "max 31", "31..32"]),
    ("rtla-osnoise-over-but-max-in-range", "rtla-osnoise-hist",
     lambda: _text("rtla_osnoise_hist.txt").replace("max:        412", "max:         17"),
     ["cpu0", "1 sample(s) beyond", "max 17", "17..18"]),
    # sockperf
    ("sockperf-summary-avg-outside", "sockperf",
     lambda: _text("sockperf_stdout.txt").replace("avg-rtt=15.818", "avg-rtt=4.818"),
     ["average 4.818", "5.673", "2100.820"]),
    ("sockperf-percentile-twice", "sockperf",
     lambda: _text("sockperf_stdout.txt").replace(
         "---> percentile 50.000 =    7.467",
         "---> percentile 50.000 =    7.467\nsockperf: ---> percentile 50.000 =    7.999"),
     ["percentile 50.000 printed twice", "7.467", "7.999"]),
    ("sockperf-same-rank-two-values", "sockperf",
     lambda: _text("sockperf_stdout.txt").replace("percentile 99.999 = 2100.820",
                                                  "percentile 99.999 = 2100.900"),
     ["rank 2550", "2100820", "2100900"]),
    ("sockperf-full-log-summary-max", "sockperf",
     lambda: _text("sockperf_full_log.csv").replace("<MAX> observation = 2100.820",
                                                    "<MAX> observation = 1100.820"),
     ["<MAX> 1100.820", "2100.821"]),
]


@pytest.mark.parametrize(("fmt", "make", "words"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_contradiction_is_refused_by_the_cli(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], fmt: str,
        make: Callable[[], str], words: list[str]) -> None:
    f = tmp_path / "damaged.txt"
    f.write_text(make())
    store = tmp_path / "store.db"
    assert main(["results", "import", "--format", fmt, "--store", str(store), str(f)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith("rtlab: error: damaged.txt is not a valid"), err
    for w in words:
        assert w in err, (w, err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["damaged.txt"]  # no store file


def test_the_intact_files_are_still_imported(tmp_path: Path) -> None:
    """The control: each case's original file passes every check."""
    store = tmp_path / "store.db"
    originals = {("cyclictest-hist", "cyclictest_hist.txt"), ("cyclictest-json", "cyclictest.json"),
                 ("jitterdebugger", "jitterdebugger_results.json"),
                 ("oslat", "oslat_v2_stdout.txt"), ("oslat", "oslat_v2.json"),
                 ("rtla-timerlat-hist", "rtla_timerlat_hist.txt"),
                 ("rtla-osnoise-hist", "rtla_osnoise_hist.txt"),
                 ("sockperf", "sockperf_stdout.txt"), ("sockperf", "sockperf_full_log.csv")}
    for fmt, name in sorted(originals):
        assert main(["results", "import", "--format", fmt, "--store", str(store),
                     str(DATA / name)]) == 0, name
    f = tmp_path / "h.txt"
    f.write_text(_H_TWO)
    assert main(["results", "import", "--format", "cyclictest-hist", "--store", str(store),
                 str(f)]) == 0


def test_engine_jsonl_contradiction_is_refused(tmp_path: Path, probe_bin: str) -> None:
    """rtlab's own engine output through the installed command (a real process): a result
    record whose min lies above its max is refused with the file and line."""
    run = subprocess.run([probe_bin, "timer", "--duration", "200ms", "--cpus", "0"],
                         capture_output=True, text=True, timeout=60, check=True)
    lines = run.stdout.splitlines(keepends=True)
    i = max(n for n, ln in enumerate(lines) if '"type":"result"' in ln)
    rec = json.loads(lines[i])
    ch = rec["channels"][0]
    ch["min_ns"] = ch["max_ns"] + 1
    lines[i] = json.dumps(rec) + "\n"
    f = tmp_path / "run.jsonl"
    f.write_text("".join(lines))
    store = tmp_path / "store.db"
    proc = subprocess.run([sys.executable, "-m", "rtlab", "results", "import", "--store",
                           str(store), str(f)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stdout == "", proc
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert f"run.jsonl:{i + 1}" in proc.stderr and "above max" in proc.stderr, proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.jsonl"]


# the shared checks, one by one -------------------------------------------------------------


def test_load_json_refuses_a_repeated_key_at_any_depth() -> None:
    assert load_json('{"a": {"b": 1, "c": 2}}') == {"a": {"b": 1, "c": 2}}
    with pytest.raises(ImportFormatError, match=r"key 'b' appears twice .*\(1 and 2\)"):
        load_json('{"a": {"b": 1, "b": 2}}')


def test_int_keyed_refuses_two_spellings_of_one_bucket() -> None:
    assert int_keyed({"5": 3, "6": "2"}, "cpu 0") == {5: 3, 6: 2}
    with pytest.raises(ImportFormatError, match="bucket 5 appears twice"):
        int_keyed({"5": 3, "05": 1}, "cpu 0")


def test_samples_beyond_the_histogram_need_a_max_beyond_it() -> None:
    ch, over, _ = channel_from_buckets("c", 0, {1: 2, 3: 1}, unit_ns=1000, samples=4,
                                       min_v=1, max_v=9)
    assert over == 1 and ch.max_ns == 9000
    with pytest.raises(ImportFormatError, match=r"c: 1 sample\(s\) beyond .* max 3 .*3\.\.4"):
        channel_from_buckets("c", 0, {1: 2, 3: 1}, unit_ns=1000, samples=4, min_v=1, max_v=3)
    with pytest.raises(ImportFormatError, match=r"max 5 .*\(3\.\.6\)"):  # -b 3 buckets
        channel_from_buckets("c", 0, {0: 2, 3: 1}, unit_ns=1000, samples=4, min_v=0, max_v=5,
                             width=3)


def test_one_rank_has_one_value() -> None:
    ch = channel_from_ranks("rtt", None, [(1, 10), (2, 20), (2, 20), (3, 30)], 60)
    assert ch.samples == 3
    with pytest.raises(ImportFormatError, match=r"rank 2 is given two values \(20 and 25 ns\)"):
        channel_from_ranks("rtt", None, [(1, 10), (2, 20), (2, 25), (3, 30)], 60)


@pytest.mark.parametrize("change", ["samples", "max"])
def test_engine_jsonl_records_that_go_backwards_are_refused(tmp_path: Path, probe_bin: str,
                                                           change: str) -> None:
    """The records of one engine run are cumulative: a final result that counts fewer
    samples (or a lower max) than a snapshot before it contradicts it. Refused with the
    two lines, nothing stored; the untouched file imports."""
    run = subprocess.run([probe_bin, "timer", "--duration", "1500ms", "--cpus", "0"],
                         capture_output=True, text=True, timeout=60, check=True)
    lines = run.stdout.splitlines(keepends=True)
    snaps = [n for n, ln in enumerate(lines) if '"type":"snapshot"' in ln]
    i = max(n for n, ln in enumerate(lines) if '"type":"result"' in ln)
    assert snaps, "the engine writes a snapshot every second"
    first = json.loads(lines[snaps[0]])["channels"][0]
    rec = json.loads(lines[i])
    ch = rec["channels"][0]
    if change == "samples":
        ch["samples"] = first["samples"] - 1
    else:
        ch["max_ns"] = first["max_ns"] - 1
        ch["min_ns"] = min(ch["min_ns"], ch["max_ns"])
    bad = tmp_path / "bad.jsonl"
    bad.write_text("".join([*lines[:i], json.dumps(rec) + "\n", *lines[i + 1:]]))
    store = tmp_path / "store.db"
    proc = subprocess.run([sys.executable, "-m", "rtlab", "results", "import", "--store",
                           str(store), str(bad)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert f"line {i + 1}: channel" in proc.stderr and "only grow" in proc.stderr
    assert not store.exists()
    good = tmp_path / "good.jsonl"
    good.write_text(run.stdout)
    assert subprocess.run([sys.executable, "-m", "rtlab", "results", "import", "--store",
                           str(store), str(good)], capture_output=True, timeout=120
                          ).returncode == 0
