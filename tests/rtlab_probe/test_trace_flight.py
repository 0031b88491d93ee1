# SPDX-License-Identifier: MIT
"""The engine's flight recorder (--trace-mode flight) on this machine's tracefs: a timer
run on CPU 1 with a SCHED_FIFO duty spinner on the same CPU (the engine's own load,
comm rtlab-spin), so that the timer is late by about the spin every period of the
spinner. Every sample above the trigger has its line in windows.jsonl; the kept
windows load with TraceCapture and cover their spike; the counters add up; a small
--trace-rate drops windows whole and counts them; meta.json is rewritten while running;
kill -9 keeps the windows already written. Root and tracefs needed; each run measures
a few seconds. Under load timing means nothing: behaviour is asserted, not latency."""

from __future__ import annotations

import json
import os
import signal
import struct
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rtlab.trace.capture import TraceCapture, flight_windows

from .test_trace_record import TRACEFS, instance, killed_at_end, leftovers, run_probe, tiny_tmpfs

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (tracefs instances)"),
    pytest.mark.skipif(TRACEFS is None, reason="tracefs is not mounted"),
    pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs 2 CPUs (CPU 1 measured)"),
]

TRIGGER_NS = 1_000_000  # the spinner's 2 ms bursts make the timer later than this
BEFORE_NS, AFTER_NS = 10_000_000, 2_000_000


@pytest.fixture
def spinner(probe_bin: str, require_root: None) -> Iterator[subprocess.Popen]:
    """The engine's duty spinner: SCHED_FIFO 90 on CPU 1, 2 ms every 50 ms, for at most
    two minutes (stopped by the test)."""
    proc = subprocess.Popen(
        [probe_bin, "load", "--cpu", "1", "--cpu-duty", "2ms/50ms", "--cpus", "1",
         "--policy", "fifo", "--priority", "90", "--duration", "120s"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    time.sleep(0.3)
    if proc.poll() is not None:
        err = proc.stderr.read() if proc.stderr else ""
        pytest.fail(f"the duty spinner did not start: {err.strip()}")
    yield proc
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=30)
    if proc.stderr:
        proc.stderr.close()


def flight_args(out: Path, jdir: Path, *extra: str, duration: str = "3s") -> list[str]:
    return ["timer", "--cpus", "1", "--interval", "1ms", "--priority", "80",
            "--duration", duration, "--allow-non-rt",
            "--trace-dir", str(out), "--trace-journal-dir", str(jdir),
            "--trace-mode", "flight", "--trace-trigger", f"{TRIGGER_NS}ns",
            "--trace-before", f"{BEFORE_NS}ns", "--trace-after", f"{AFTER_NS}ns", *extra]


def read_samples(path: Path) -> list[tuple[int, int, int]]:
    """(channel, at_ns, value_ns) of a --samples file."""
    blob = path.read_bytes()
    assert blob[:8] == b"RTLABSMP"
    size = struct.unpack_from("<I", blob, 12)[0]
    out = []
    for pos in range(16, len(blob) - size + 1, size):
        ch, _pad, at, value = struct.unpack_from("<IIQQ", blob, pos)
        out.append((ch, at, value))
    return out


def check_counters(out: Path, lines: list[dict[str, Any]]) -> dict[str, Any]:
    """What must add up in every flight capture; returns meta.flight."""
    m = json.loads((out / "meta.json").read_text())["meta"]
    fl = m["flight"]
    assert m["mode"] == "flight"
    # a line each for the triggers of kept windows; one for a dropped window, counting
    # the triggers merged into it
    assert fl["triggers"] == sum(1 + ln.get("merged", 0) for ln in lines)
    assert [ln["seq"] for ln in lines] == sorted(ln["seq"] for ln in lines)
    assert len({ln["seq"] for ln in lines}) == len(lines)
    assert all(1 <= ln["seq"] <= fl["triggers"] for ln in lines)
    merged = [ln for ln in lines if ln["why"] == "merged"]
    first = [ln for ln in lines if ln["why"] != "merged"]
    assert all(ln["kept"] for ln in merged)
    assert all("merged" not in ln for ln in lines if ln["kept"])
    assert all(ln.get("worst_ns", ln["value_ns"]) >= ln["value_ns"] for ln in lines)
    assert fl["triggers_merged"] == len(merged) + sum(ln.get("merged", 0) for ln in first)
    assert fl["triggers_lost"] == 0
    assert fl["windows_kept"] == sum(1 for ln in first if ln["kept"])
    assert fl["windows_dropped_rate"] == sum(1 for ln in first if ln["why"] == "rate")
    assert fl["windows_dropped_disk"] == sum(1 for ln in first if ln["why"] == "disk")
    assert fl["windows_dropped_aged"] == sum(1 for ln in first if ln["why"] == "aged")
    assert (fl["windows_kept"] + fl["windows_dropped_rate"] + fl["windows_dropped_disk"]
            + fl["windows_dropped_aged"] + fl["triggers_merged"]) == fl["triggers"]
    # every page read is written, dropped with a window, or aged out of the ring
    assert fl["pages_read"] == fl["pages_written"] + fl["pages_dropped"] + fl["pages_aged"]
    assert sum(m["pages"].values()) == fl["pages_written"]
    assert sum(m["dropped_pages"].values()) == fl["pages_dropped"]
    kept = [ln for ln in first if ln["kept"]]
    assert sum(ln["pages"] for ln in kept) == fl["pages_written"]
    assert sum(ln["bytes"] for ln in kept) == fl["bytes_written"] == m["bytes"]
    files = sorted(p.name for p in out.glob("w*-cpu*.pages"))
    named = sorted(f for ln in kept for f in ln["files"])
    assert files == named  # no file of a dropped window, none unlisted
    assert sum((out / f).stat().st_size for f in files) == fl["bytes_written"]
    for ln in lines:
        if not ln["kept"]:
            assert ln["file"] is None and ln["files"] == []
    assert not list(out.glob(".w*"))  # no temporary file left by a finished run
    return fl


def test_windows_around_the_spinners_spikes(probe_bin: str, tmp_path: Path,
                                            spinner: subprocess.Popen) -> None:
    out, jdir, smp = tmp_path / "trace", tmp_path / "journals", tmp_path / "samples.bin"
    name = f"rtlab-t26f-{os.getpid()}"
    r = run_probe(probe_bin, *flight_args(out, jdir, "--trace-instance", name,
                                          "--trace-rate", "0", "--samples", str(smp)))
    assert r.returncode == 0, r.stderr
    header = json.loads(r.stdout.splitlines()[0])
    assert header["trace"]["mode"] == "flight"
    assert header["trace"]["trigger_ns"] == TRIGGER_NS
    start = header["start_monotonic_ns"]
    lines = flight_windows(out)
    fl = check_counters(out, lines)
    # one line per sample above the trigger, with its deadline and wake
    above = sorted((at, v) for _ch, at, v in read_samples(smp) if v > TRIGGER_NS)
    assert above, "the spinner never delayed the timer by more than the trigger"
    assert sorted((ln["wake_ns"] - start, ln["value_ns"]) for ln in lines) == above
    for ln in lines:
        assert ln["channel"] == 0 and ln["cpu"] == 1
        assert ln["deadline_ns"] == ln["wake_ns"] - ln["value_ns"]
    assert fl["windows_kept"] >= 1 and fl["windows_dropped_rate"] == 0
    assert fl["rate_bytes_per_s"] == 0 and fl["before_ns"] == BEFORE_NS
    # the kept windows decode, and each spike's deadline..wake is inside its pages
    cap = TraceCapture.load(out)
    assert cap.cpus == [1] and cap.meta["complete"] is True
    spin_seen = 0
    for ln in lines:
        if not ln["kept"] or ln["partial"]:
            continue
        d, w = ln["deadline_ns"], ln["wake_ns"]
        assert cap.window(1, d - BEFORE_NS, d), f"no events before the deadline of {ln['seq']}"
        assert cap.window(1, w, w + AFTER_NS), f"no events after the wake of {ln['seq']}"
        switches = [e for e in cap.window(1, d - BEFORE_NS, w + AFTER_NS)
                    if e.name == "sched_switch"]
        assert switches, f"no sched_switch around spike {ln['seq']}"
        spin_seen += any("rtlab-spin" in (str(e.fields.get("prev_comm")),
                                          str(e.fields.get("next_comm"))) for e in switches)
    assert spin_seen >= 1, "the spinner is in no kept window's context switches"
    assert not instance(name).exists()
    assert list(jdir.iterdir()) == []


def test_a_small_rate_drops_windows_whole_and_counts_them(
    probe_bin: str, tmp_path: Path, spinner: subprocess.Popen
) -> None:
    out, jdir = tmp_path / "trace", tmp_path / "journals"
    rate = 2048  # a burst of 20 KiB: a few windows, then about one a few seconds
    r = run_probe(probe_bin, *flight_args(out, jdir, "--trace-rate", str(rate)))
    assert r.returncode == 0, r.stderr
    lines = flight_windows(out)
    fl = check_counters(out, lines)
    assert fl["rate_bytes_per_s"] == rate and fl["burst_bytes"] == 10 * rate
    assert fl["windows_dropped_rate"] >= 1, fl
    assert fl["pages_dropped"] >= 1
    dropped = [ln for ln in lines if ln["why"] == "rate"]
    assert all(not ln["kept"] and ln["pages"] > 0 for ln in dropped)
    m = json.loads((out / "meta.json").read_text())["meta"]
    seconds = (m["stopped_ns"] - m["started_ns"]) / 1e9
    assert fl["bytes_written"] <= rate * seconds + 10 * rate
    if fl["windows_kept"]:
        TraceCapture.load(out)  # what was kept still loads


def wait_for(cond: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = cond()
        if got:
            return got
        time.sleep(0.1)
    pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}")


def flight_meta(out: Path) -> dict[str, Any] | None:
    try:
        return json.loads((out / "meta.json").read_text())["meta"]
    except (OSError, ValueError):
        return None


def test_meta_live_and_kill9_keeps_the_finished_windows(
    probe_bin: str, tmp_path: Path, spinner: subprocess.Popen
) -> None:
    out, jdir = tmp_path / "trace", tmp_path / "journals"
    with killed_at_end(probe_bin, flight_args(out, jdir, "--trace-rate", "0",
                                              duration="120s")) as proc:
        m1 = wait_for(lambda: (m := flight_meta(out)) and m["flight"]["windows_kept"] >= 1 and m,
                      60, "a first kept window in meta.json")
        assert m1["complete"] is False
        m2 = wait_for(lambda: (m := flight_meta(out))
                      and m["flight"]["triggers"] > m1["flight"]["triggers"] and m,
                      60, "meta.json rewritten with more triggers")
        assert m2["flight"]["windows_kept"] >= m1["flight"]["windows_kept"]
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
    journal, inst = leftovers(jdir, proc.pid)
    try:
        lines = flight_windows(out)
        kept = [ln for ln in lines if ln["kept"] and ln["why"] is None and ln["files"]]
        assert kept, "no finished window listed after kill -9"
        for ln in kept:  # a listed window's file is whole: renamed only when written
            assert ln["files"] == [ln["file"]] == [f"w{ln['seq']}-cpu1.pages"]
            assert (out / ln["file"]).stat().st_size == ln["bytes"]
        cap = TraceCapture.load(out)
        assert cap.meta["complete"] is False
        assert cap.events(1), "the finished windows do not decode"
    finally:
        r = run_probe(probe_bin, "sys", "restore", "--journal", str(journal))
    assert r.returncode == 0, r.stderr
    assert not inst.exists() and not journal.exists()


@pytest.mark.parametrize("extra, word", [
    (["--trace-trigger", "50us"], "--trace-trigger needs --trace-mode flight"),
    (["--trace-rate", "1k"], "--trace-rate needs --trace-mode flight"),
    (["--trace-mode", "flight", "--trace-rate", "2G"], "--trace-rate"),
    (["--trace-mode", "flight", "--trace-keep-mb", "0"], "--trace-keep-mb"),
    (["--trace-mode", "ring"], "--trace-mode"),
])
def test_bad_flight_options_are_refused(probe_bin: str, tmp_path: Path, extra: list[str],
                                        word: str) -> None:
    out = tmp_path / "trace"
    r = run_probe(probe_bin, "timer", "--cpus", "1", "--duration", "1s", "--allow-non-rt",
                  "--trace-dir", str(out), *extra)
    assert r.returncode == 2
    assert word in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert r.stdout == "" and not out.exists()


def test_full_disk_drops_windows_and_says_so(probe_bin: str, tmp_path: Path,
                                             require_root: None) -> None:
    with tiny_tmpfs(tmp_path, "320k") as mnt:
        out, jdir = mnt / "trace", tmp_path / "journals"
        # every sample triggers: windows of the whole run, more than the disk holds
        r = run_probe(probe_bin, "timer", "--cpus", "1", "--interval", "100us",
                      "--duration", "2s", "--allow-non-rt", "--trace-dir", str(out),
                      "--trace-journal-dir", str(jdir), "--trace-mode", "flight",
                      "--trace-trigger", "1ns", "--trace-rate", "0")
        assert r.returncode == 0, r.stderr
        assert "No space left on device" in r.stderr
        assert len([ln for ln in r.stderr.splitlines() if "trace:" in ln]) == 1, r.stderr
        m = json.loads((out / "meta.json").read_text())["meta"]
        fl = m["flight"]
        assert m["complete"] is True and "No space left" in m["error"]
        assert fl["windows_dropped_disk"] >= 1 and fl["pages_dropped"] >= 1
        assert (fl["windows_kept"] + fl["windows_dropped_rate"] + fl["windows_dropped_disk"]
                + fl["windows_dropped_aged"] + fl["triggers_merged"]) == fl["triggers"]
        assert fl["pages_read"] == fl["pages_written"] + fl["pages_dropped"] + fl["pages_aged"]
        # the lines that could be written are whole; those that could not are counted
        assert (sum(1 + ln.get("merged", 0) for ln in flight_windows(out))
                + fl["lines_lost"]) == fl["triggers"]
        assert not list(out.glob(".w*"))  # a dropped window leaves no temporary file
        assert sum(p.stat().st_size for p in out.glob("w*-cpu*.pages")) == fl["bytes_written"]
        TraceCapture.load(out)
        assert list(jdir.iterdir()) == []
