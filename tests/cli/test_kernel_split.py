# SPDX-License-Identifier: MIT
"""`rtlab run --trace --kernel-split` ([trace] kernel_split): the kernel's own split stored
per phase (trace.kernel_split) and shown, from the timerlat capture recorded on the
emulated x86_64 PREEMPT_RT board with the FIFO 97 duty spinner on CPU 1
(tests/trace/fixtures/timerlat/x86_64); the engine options that record it; the refusals
before anything starts. The real run on a board: tests/lab/test_kernel_split_on_board.py.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import struct
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from rtlab.probes.registry import shape as probe_shape
from rtlab.report import kernel_split as show
from rtlab.report.html import render_html
from rtlab.report.spikes import spike_lines
from rtlab.results.store import Store
from rtlab.runner import kernel_split as ks
from rtlab.runner.tracing import PhaseTrace
from rtlab.scenario.loader import parse_text
from rtlab.textfmt import human
from rtlab.trace.capture import TraceCapture
from rtlab.trace.spike_sources import SAMPLES_MAGIC
from rtlab.trace.timerlat import analyze
from rtlab.trace.tracefs import DEFAULT_EVENTS
from tests.support.cli_errors import one_error_line

REPO = Path(__file__).resolve().parents[2]
FIX = REPO / "tests" / "trace" / "fixtures" / "timerlat" / "x86_64"
THRESHOLD_NS = 10_000_000
START_NS = 226_000_000_000  # a run start before the capture's first activation


@pytest.fixture(scope="module")
def capture() -> TraceCapture:
    return TraceCapture.load(FIX / "capture")


@pytest.fixture(scope="module")
def spinner() -> tuple[str, int]:
    rec = json.loads((FIX / "spinner.json").read_text())
    (w,) = rec["workers"]
    return rec["config"]["cpu_duty"]["comm"], int(w["pid"])


@pytest.fixture(scope="module")
def split(capture: TraceCapture) -> dict[str, Any]:
    return ks.summarize(capture, THRESHOLD_NS, START_NS)


def test_stored_split_of_the_board_capture(capture: TraceCapture, split: dict[str, Any],
                                           spinner: tuple[str, int]) -> None:
    res = analyze(capture, THRESHOLD_NS)
    assert split["tracer"] == "timerlat" and split["threshold_ns"] == THRESHOLD_NS
    assert "error" not in split
    assert "timerlat threads (FIFO 95)" in split["note"]
    assert set(split["cpus"]) == {str(c) for c in capture.cpus} == {"1"}
    cpu = split["cpus"]["1"]
    for ctx in ("irq", "thread"):
        st = cpu[ctx]
        assert list(st) == ["count", "min", "p50", "p99", "p99.9", "max"]
        assert st["count"] == len(getattr(res[1], ctx)) > 0
        # a percentile too few samples support is None (n·(1 − p) < 1), as stored
        # everywhere; the others are in order
        n = st["count"]
        assert (st["p99"] is None) == (n < 100) and (st["p99.9"] is None) == (n < 1000)
        shown = [st[k] for k in ("min", "p50", "p99", "p99.9", "max") if st[k] is not None]
        assert shown == sorted(shown) and shown[0] == st["min"] and shown[-1] == st["max"]
        assert st["max"] == max(getattr(res[1], ctx))
    # 6.1's kernel timerlat threads never return to user space
    assert cpu["user"] is None and cpu["user_note"] == ks.USER_ABSENT
    assert cpu["splits"] == len(res[1].splits) >= 5
    label = f"task {spinner[0]}[{spinner[1]}]"
    assert next(iter(cpu["culprits"])) == label
    assert cpu["culprits"][label] >= 0.9 * cpu["splits"]
    assert sum(cpu["culprits"].values()) == cpu["splits"]
    worst = cpu["worst"]
    assert 0 < len(worst) <= ks.MAX_SPLITS
    assert [w["at_ns"] for w in worst] == sorted(w["at_ns"] for w in worst)
    for w in worst:
        assert w["at_ns"] == w["expiry_ns"] - START_NS > 0
        assert w["latency_ns"] > THRESHOLD_NS
        assert len(w["thread_blockers"]) <= ks.MAX_BLOCKERS
        assert w["summary"].startswith("IRQ late by ") and "thread late by" in w["summary"]
    named = [w for w in worst if (w["culprit"]["name"], w["culprit"]["id"]) == spinner]
    assert len(named) >= 0.9 * len(worst)
    json.dumps(split)  # stored as JSON


def test_only_the_worst_splits_are_kept(capture: TraceCapture) -> None:
    low = 100_000
    res = analyze(capture, low)[1]
    assert len(res.splits) > ks.MAX_SPLITS  # the fixture has many activations above 100 µs
    cpu = ks.summarize(capture, low)["cpus"]["1"]
    assert cpu["splits"] == len(res.splits)
    kept = sorted(w["latency_ns"] for w in cpu["worst"])
    assert kept == sorted(s.latency_ns for s in res.splits)[-ks.MAX_SPLITS:]
    assert all(w["at_ns"] is None for w in cpu["worst"])  # no start given
    assert len(cpu["culprits"]) <= ks.MAX_CULPRITS


def test_capture_without_timerlat_is_an_error_not_a_failure(capture: TraceCapture) -> None:
    plain = TraceCapture(capture.formats, capture.pages, clock=capture.clock,
                         lost=capture.lost, meta={**capture.meta, "tracer": None})
    out = ks.summarize(plain, THRESHOLD_NS)
    assert out["cpus"] == {} and "not recorded with the timerlat tracer" in out["error"]
    assert ks.notes_of(out) == ["kernel's view (timerlat): " + out["error"]]
    broken = ks.phase_split(object(), THRESHOLD_NS, None)  # nothing readable
    assert broken["cpus"] == {} and broken["error"]
    assert show.lines(broken) == [f"{show.HEAD}: {broken['error']}"]


def test_engine_options_record_the_kernel_view(tmp_path: Path) -> None:
    opts = ks.engine_options()
    assert opts["trace_tracer"] == "timerlat"
    events = opts["trace_events"].split(",")
    assert set(DEFAULT_EVENTS) <= set(events) and "sched/sched_switch" in events
    assert {f"osnoise/{n}" for n in ("irq_noise", "softirq_noise", "thread_noise",
                                     "nmi_noise")} <= set(events)
    assert len(events) == len(set(events))
    pt = PhaseTrace(THRESHOLD_NS, 4096, tmp_path / "r.1-main.trace", tmp_path / "r.samples")
    assert "trace_tracer" not in pt.engine_options(0)
    pt = replace(pt, kernel_split=True, parts=[])
    assert {k: pt.engine_options(0)[k] for k in opts} == opts


def test_run_lines_per_cpu(split: dict[str, Any], spinner: tuple[str, int]) -> None:
    cpu = split["cpus"]["1"]
    (line,) = show.lines(split)
    irq, thr = cpu["irq"], cpu["thread"]
    assert line.startswith(f"kernel's view (timerlat) CPU1: IRQ p99 {human(irq['p99'])} max "
                           f"{human(irq['max'])}, thread p99 {human(thr['p99'])} max "
                           f"{human(thr['max'])}; worst: IRQ late by ")
    worst = max(cpu["worst"], key=lambda w: w["latency_ns"])
    assert line.endswith(worst["summary"])
    assert f"blocked by task {spinner[0]}[{spinner[1]}]" in line
    assert "return-to-user" not in line  # not recorded: said in the notes instead
    assert ks.USER_ABSENT in " ".join(ks.notes_of(split))
    assert show.notes(split) == [ks.USER_ABSENT, split["note"]]
    quiet = {**split, "cpus": {"1": {**cpu, "worst": [], "splits": 0, "culprits": {}}}}
    assert show.lines(quiet)[0].endswith(f"; none above {human(THRESHOLD_NS)}")
    assert show.lines(None) == []


def test_spikes_rows_and_html(split: dict[str, Any], spinner: tuple[str, int]) -> None:
    rows = show.split_rows(split)
    assert len(rows) == len(split["cpus"]["1"]["worst"])
    assert [float(r[0]) for r in rows] == sorted(float(r[0]) for r in rows)
    assert all(r[1] == "1" and r[4].startswith("IRQ late by ") for r in rows)
    assert sum(r[3] == f"task {spinner[0]}[{spinner[1]}]" for r in rows) >= 0.9 * len(rows)
    top3 = show.split_rows(split, 3)
    lat = sorted((w["latency_ns"] for w in split["cpus"]["1"]["worst"]), reverse=True)[:3]
    assert sorted(r[2] for r in top3) == sorted(human(v) for v in lat)
    html = show.html_block(split)
    assert html.startswith("<h4>Kernel&#x27;s view (timerlat)</h4>")
    assert html.count("<tr>") == 1 + min(10, len(rows))
    assert f"task {spinner[0]}[{spinner[1]}]" in html and "FIFO 95" in html
    assert show.html_block(None) == ""


def _samples(path: Path) -> None:
    path.write_bytes(SAMPLES_MAGIC + struct.pack("<II", 1, 24))  # no sample above anything


def _stored_run(fake_probe: Any, store_path: Path, split: dict[str, Any]) -> str:
    """A fake run stored again with a traced phase that has the board capture's split and
    the capture itself beside it."""
    from rtlab.cli import main

    assert main(["run", "--duration", "1s", "--no-progress", "--allow-non-rt",
                 "--no-report"]) in (0, 1)
    store = Store.open(str(store_path))
    try:
        base = store.get("last")
        run_id = store.new_id()
        shutil.copytree(FIX / "capture", store.runs_dir / f"{run_id}.1-main.trace")
        _samples(store.runs_dir / f"{run_id}.1-main.samples")
        phases = [replace(p, spikes=[], spike_summary={
            "threshold_ns": THRESHOLD_NS, "spikes": 0, "attributed": 0, "stored": 0,
            "by_class": {}, "top_causes": {}}, trace={
            "capture": f"{run_id}.1-main.trace", "samples": f"{run_id}.1-main.samples",
            "threshold_ns": THRESHOLD_NS, "start_monotonic_ns": START_NS,
            "channel_cpus": [1], "channel_tids": [1], "kernel_split": split})
            for p in base.phases[:1]]
        store.add(replace(base, run_id=run_id, phases=phases), probe_shape)
    finally:
        store.close()
    return run_id


def test_rtlab_spikes_and_report_show_the_split(fake_probe: Any, store_path: Path,
                                                split: dict[str, Any], tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str],
                                                spinner: tuple[str, int],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from rtlab.cli import main

    run_id = _stored_run(fake_probe, store_path, split)
    capsys.readouterr()
    monkeypatch.setenv("COLUMNS", "250")
    assert main(["spikes", run_id]) == 0
    out = capsys.readouterr().out
    label = f"task {spinner[0]}[{spinner[1]}]"
    assert show.lines(split)[0] in out
    n = split["cpus"]["1"]["splits"]
    assert (f"{show.HEAD} CPU1: {n} activations above {human(THRESHOLD_NS)}: "
            f"{split['cpus']['1']['culprits'][label]} {label}") in out
    assert f"{show.HEAD}: {len(split['cpus']['1']['worst'])} worst activations" in out
    assert ks.USER_ABSENT in out
    # --json: the stored split per phase
    assert main(["spikes", run_id, "--json"]) == 0
    (ph,) = json.loads(capsys.readouterr().out)["phases"]
    assert ph["kernel_split"] == split
    # again from the saved capture with another threshold: more activations split
    assert main(["spikes", run_id, "--json", "--trace-threshold", "1ms"]) == 0
    (again,) = json.loads(capsys.readouterr().out)["phases"]
    cpu = again["kernel_split"]["cpus"]["1"]
    assert again["kernel_split"]["threshold_ns"] == 1_000_000
    assert cpu["splits"] >= split["cpus"]["1"]["splits"]
    assert cpu["splits"] == len(analyze(TraceCapture.load(FIX / "capture"), 1_000_000)[1].splits)
    # rtlab run's lines and the HTML report's block
    store = Store.open(str(store_path))
    try:
        result = store.get(run_id)
    finally:
        store.close()
    assert show.lines(split)[0] in spike_lines(result)
    html = render_html([result])
    assert "Kernel&#x27;s view (timerlat)" in html and label in html


def _tracers() -> list[str]:
    try:
        return Path("/sys/kernel/tracing/available_tracers").read_text().split()
    except OSError:
        return []


def _rtlab(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "XDG_DATA_HOME": str(tmp_path / "xdg")}
    return subprocess.run([sys.executable, "-m", "rtlab", "run", *args, "--no-report",
                           "--no-progress", "--store", str(tmp_path / "store.db")],
                          capture_output=True, text=True, env=env, timeout=120, check=False)


def _tracefs_state() -> dict[str, str | None]:
    """The top-level tracefs settings (instances come and go with other tests' runs)."""
    out: dict[str, str | None] = {}
    for name in ("current_tracer", "tracing_on", "tracing_cpumask", "osnoise/cpus"):
        try:
            out[name] = Path("/sys/kernel/tracing", name).read_text()
        except OSError:
            out[name] = None
    return out


@pytest.mark.skipif("timerlat" in _tracers(),
                    reason="this kernel has the timerlat tracer: the skip cannot be shown here")
@pytest.mark.parametrize("flags", [("--trace", "--kernel-split"), ("--kernel-split",)])
def test_no_timerlat_here_is_skipped_and_changes_nothing(tmp_path: Path,
                                                         flags: tuple[str, ...]) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root: without it --trace is skipped for tracefs first")
    before = _tracefs_state()
    proc = _rtlab(tmp_path, "--probe", "timer", "--cpus", "0", "--duration", "1s", *flags)
    assert proc.returncode == 4, proc.stderr
    line = one_error_line(proc)
    assert "--kernel-split: this kernel has no timerlat tracer (it has: " in line
    assert proc.stdout == ""
    assert not (tmp_path / "store.db").exists()
    assert not (tmp_path / "xdg").exists() or not any((tmp_path / "xdg").rglob("*.trace"))
    assert _tracefs_state() == before


def test_kernel_split_goes_with_the_timer_probe_only(tmp_path: Path) -> None:
    proc = _rtlab(tmp_path, "--probe", "noise", "--cpus", "0", "--duration", "1s",
                  "--kernel-split")
    assert proc.returncode == 2, proc.stderr
    line = one_error_line(proc)
    assert "phase main measures with the noise probe" in line and "timer" in line
    assert not (tmp_path / "store.db").exists()


def test_trace_table_kernel_split_key() -> None:
    sf = parse_text('[trace]\nkernel_split = true\n', "t.toml", [0, 1])
    tr = sf.variants[0].trace
    assert tr is not None and tr.enabled and tr.kernel_split
    assert sf.variants[0].to_dict()["trace"]["kernel_split"] is True
    plain = parse_text('[trace]\nthreshold = "50us"\n', "t.toml", [0, 1]).variants[0].trace
    assert plain is not None and plain.kernel_split is False
    with pytest.raises(Exception, match=r"t.toml:2: trace.kernel_split: 'yes' is not allowed"):
        parse_text('[trace]\nkernel_split = "yes"\n', "t.toml", [0, 1])


def test_stored_split_text_is_escaped_in_html(split: dict[str, Any]) -> None:
    evil = json.loads(json.dumps(split))
    evil["cpus"]["1"]["worst"][0]["summary"] = "<script>x</script>"
    evil["cpus"]["1"]["worst"][0]["latency_ns"] = 10**12
    out = io.StringIO()
    out.write(show.html_block(evil))
    assert "<script>" not in out.getvalue() and "&lt;script&gt;" in out.getvalue()
