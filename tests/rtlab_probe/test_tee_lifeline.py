# SPDX-License-Identifier: MIT
"""--tee FILE and --stdin-lifeline: the engine's output survives a reader that went
away, and the engine stops when its controller does (docs/engine.md). Real timer
runs with SCHED_OTHER (--allow-non-rt), so no root is needed; assertions are on
behaviour and records, never on timing."""

from __future__ import annotations

import json
import os
import resource
import signal
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support.devices import device_nodes

from .helpers import check_order, parse_lines, read_line_raw, run_probe, validate_all

WAIT = 120  # generous: a loaded 2-vCPU VM


def _cpu() -> str:
    return str(min(os.sched_getaffinity(0)))


def _timer(*extra: str) -> list[str]:
    return ["timer", "--cpus", _cpu(), "--policy", "other", "--no-mlock", "--allow-non-rt",
            "--snapshot-interval", "100ms", *extra]


def _records(path: Path) -> list[dict[str, Any]]:
    return parse_lines(path.read_text())


def test_tee_keeps_the_result_when_stdout_goes_away(probe_bin: str, tmp_path: Path) -> None:
    tee = tmp_path / "run.jsonl"
    p = subprocess.Popen([probe_bin, "--tee", str(tee), *_timer("--duration", "2s")],
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        header = json.loads(read_line_raw(p))
        assert header["type"] == "header"
        assert p.stdout is not None
        p.stdout.close()  # the reader goes away (an SSH connection that dropped)
        assert p.wait(timeout=WAIT) == 0  # the run goes on and completes
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert stat.S_IMODE(tee.stat().st_mode) == 0o600
    recs = _records(tee)
    validate_all(recs)
    check_order(recs)
    assert recs[0] == header
    assert recs[-1]["status"] == "completed"
    assert recs[-1]["channels"][0]["samples"] > 0
    lost = [i for i, r in enumerate(recs) if r["type"] == "log" and r["code"] == "stdout_lost"]
    assert len(lost) == 1 and 0 < lost[0] < len(recs) - 1  # said once, after the header


def test_tee_holds_what_stdout_had(probe_bin: str, tmp_path: Path) -> None:
    tee = tmp_path / "run.jsonl"
    tee.write_text("an older run\n" * 100)  # truncated, not appended to
    r = run_probe(probe_bin, "--tee", str(tee), *_timer("--loops", "20"), timeout=WAIT)
    assert r.returncode == 0, r.stderr
    assert tee.read_text() == r.stdout
    recs = parse_lines(r.stdout)
    check_order(recs)
    assert recs[0]["engine_arch"]
    assert "--tee" in recs[0]["argv"]


def _small_file_limit() -> None:
    """In the engine's process: files may not grow past 64 bytes (EFBIG, not SIGXFSZ)."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    hard = resource.getrlimit(resource.RLIMIT_FSIZE)[1]
    resource.setrlimit(resource.RLIMIT_FSIZE, (64, hard))


def test_tee_failing_mid_run_is_reported_on_stdout(probe_bin: str, tmp_path: Path) -> None:
    # a tee that cannot be written (here EFBIG: a file size limit; ENOSPC alike): the run
    # goes on on stdout, which says so; a tee that never got a line leaves no file
    tee = tmp_path / "run.jsonl"
    r = run_probe(probe_bin, "--tee", str(tee), *_timer("--loops", "5"), timeout=WAIT,
                  preexec_fn=_small_file_limit)
    assert r.returncode == 0, r.stderr
    recs = parse_lines(r.stdout)
    validate_all(recs)
    failed = [x for x in recs if x["type"] == "log" and x["code"] == "tee_failed"]
    assert len(failed) == 1 and str(tee) in failed[0]["msg"]
    assert recs[-1]["type"] == "result" and recs[-1]["status"] == "completed"
    # and one line at the end saying the file is incomplete (the path cut at 60 characters)
    assert r.stderr.startswith("rtlab-probe: --tee '") and "the file is incomplete" in r.stderr
    assert list(tmp_path.iterdir()) == []


def test_tee_on_a_device_is_refused(probe_bin: str, tmp_path: Path) -> None:
    full = device_nodes(tmp_path)["full"]  # the test's own node as root (never /dev/full)
    r = run_probe(probe_bin, "--tee", full, *_timer("--loops", "5"), timeout=WAIT)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr == (f"rtlab-probe: --tee '{full}': is a character device; name a "
                        "regular file or a new file in an existing directory\n")


@pytest.mark.parametrize(("where", "why"), [
    ("missing/dir/run.jsonl", "its directory does not exist"),
    ("afile/run.jsonl", "Not a directory"),
])
def test_tee_that_cannot_be_created(probe_bin: str, tmp_path: Path, where: str,
                                    why: str) -> None:
    (tmp_path / "afile").write_text("")
    target = tmp_path / where
    r = run_probe(probe_bin, "--tee", str(target), *_timer("--duration", "10s"))
    assert r.returncode == 2  # bad input, found before anything is done
    assert r.stdout == ""
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("rtlab-probe: --tee '") and why in lines[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"]


@pytest.mark.parametrize(("args", "msg"), [
    (["--tee"], "--tee: missing value FILE"),
    (["--tee="], "--tee: the file name must not be empty"),
    (["--stdin-lifeline", "--stdin-lifeline", "list"], "given more than once"),
    (["--version", "--json", "x"], "unknown argument 'x' (only --json)"),
])
def test_global_option_usage(probe_bin: str, args: list[str], msg: str) -> None:
    r = run_probe(probe_bin, *args)
    assert r.returncode == 2
    assert len(r.stderr.splitlines()) == 1 and msg in r.stderr


def test_global_options_go_before_the_probe(probe_bin: str) -> None:
    r = run_probe(probe_bin, *_timer("--tee", "x"))
    assert r.returncode == 2 and "unknown option '--tee'" in r.stderr


def test_lifeline_stops_the_run_when_stdin_closes(probe_bin: str, tmp_path: Path) -> None:
    tee = tmp_path / "run.jsonl"
    p = subprocess.Popen([probe_bin, "--stdin-lifeline", "--tee", str(tee), *_timer()],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert json.loads(read_line_raw(p))["type"] == "header"
        assert p.stdin is not None
        p.stdin.write(b"whatever the host sends is ignored\n")
        p.stdin.flush()
        p.stdin.close()  # the host died
        p.stdin = None  # (communicate() would flush it)
        out, err = p.communicate(timeout=WAIT)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 130, err
    recs = _records(tee)
    validate_all(recs)
    check_order(recs)
    assert recs[-1]["status"] == "interrupted" and recs[-1]["exit_code"] == 130
    assert parse_lines(out.decode())[-1] == recs[-1]


def test_lifeline_with_stdin_already_at_eof(probe_bin: str) -> None:
    r = run_probe(probe_bin, "--stdin-lifeline", *_timer(), stdin=subprocess.DEVNULL,
                  timeout=WAIT)
    assert r.returncode == 130, r.stderr
    recs = parse_lines(r.stdout)
    check_order(recs)
    assert recs[-1]["status"] == "interrupted"


def test_without_lifeline_stdin_eof_changes_nothing(probe_bin: str) -> None:
    r = run_probe(probe_bin, *_timer("--loops", "5"), stdin=subprocess.DEVNULL, timeout=WAIT)
    assert r.returncode == 0
    assert parse_lines(r.stdout)[-1]["status"] == "completed"


def test_sys_and_list_take_the_global_options(probe_bin: str, tmp_path: Path) -> None:
    """sys runs to its end under --stdin-lifeline (stdin at EOF) and is teed."""
    tee = tmp_path / "preempt.jsonl"
    r = run_probe(probe_bin, "--stdin-lifeline", "--tee", str(tee), "sys", "preempt",
                  stdin=subprocess.DEVNULL, timeout=WAIT)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["type"] == "preempt"
    assert tee.read_text() == r.stdout
    r = run_probe(probe_bin, "--stdin-lifeline", "list", "--json", stdin=subprocess.DEVNULL)
    assert r.returncode == 0 and json.loads(r.stdout)["type"] == "probes"
