# SPDX-License-Identifier: MIT
"""The engine's trace recorder (--trace-dir): a real tracefs instance on the measured CPU,
the capture loaded by the host's TraceCapture, the instance and its journal gone after
the run (or removed by `sys restore` after kill -9), and every refusal leaving nothing
behind. Root and tracefs needed; each run measures about a second."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from rtlab.trace.capture import TraceCapture
from rtlab.trace.tracefs import DEFAULT_EVENTS


def tracefs_root() -> Path | None:
    try:
        lines = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        parts = line.split()
        if len(parts) >= 3 and parts[2] == "tracefs" and (Path(parts[1]) / "instances").is_dir():
            return Path(parts[1])
    return None


TRACEFS = tracefs_root()

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (tracefs instances)"),
    pytest.mark.skipif(TRACEFS is None, reason="tracefs is not mounted"),
    pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs 2 CPUs (CPU 1 measured)"),
]


def run_probe(probe_bin: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([probe_bin, *args], capture_output=True, text=True, timeout=timeout)


def timer_args(trace_dir: Path, journal_dir: Path, *extra: str, duration: str = "1s") -> list[str]:
    return ["timer", "--cpus", "1", "--duration", duration, "--allow-non-rt",
            "--trace-dir", str(trace_dir), "--trace-journal-dir", str(journal_dir), *extra]


def instance(name: str) -> Path:
    assert TRACEFS is not None
    return TRACEFS / "instances" / name


@contextmanager
def killed_at_end(probe_bin: str, args: list[str]) -> Iterator[subprocess.Popen]:
    """The engine run with args (stderr piped, as text) for the block, then killed with
    SIGKILL and reaped, whatever the block did."""
    proc = subprocess.Popen([probe_bin, *args], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    try:
        yield proc
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        if proc.stderr:
            proc.stderr.close()


def leftovers(jdir: Path, pid: int) -> tuple[Path, Path]:
    """The journal and the tracefs instance of the recorder of engine pid."""
    return jdir / f"trace-{pid}.journal", instance(f"rtlab-{pid}")


@contextmanager
def tiny_tmpfs(tmp_path: Path, size: str) -> Iterator[Path]:
    """A tmpfs of size (e.g. "256k") mounted at tmp_path/tiny for the block, then unmounted."""
    mnt = tmp_path / "tiny"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mnt)], check=True)
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


def wait_for_file(path: Path, timeout: float = 60) -> None:
    """Until path exists or timeout seconds passed (the caller asserts what follows)."""
    deadline = time.monotonic() + timeout
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.05)


def test_records_the_measured_cpu(probe_bin: str, tmp_path: Path, require_root: None) -> None:
    out, jdir = tmp_path / "trace", tmp_path / "journals"
    name = f"rtlab-t26-{os.getpid()}"
    r = run_probe(probe_bin, *timer_args(out, jdir, "--trace-instance", name))
    assert r.returncode == 0, r.stderr
    records = [json.loads(line) for line in r.stdout.splitlines()]
    header = records[0]
    assert header["trace"]["dir"] == str(out)
    assert header["trace"]["instance"] == name
    assert header["trace"]["reader_cpu"] == 0  # the first online CPU not measured
    assert "sched/sched_switch" not in header["trace"]["events_missing"]
    meta = json.loads((out / "meta.json").read_text())
    m = meta["meta"]
    assert meta["cpus"] == [1]
    assert m["complete"] is True and m["error"] is None and m["recorder"] == "engine"
    assert m["byte_order"] == "little" and m["long_bits"] in (32, 64) and m["mode"] == "full"
    assert m["pages"]["1"] > 0 and m["bytes"] > 0 and m["dropped_pages"]["1"] == 0
    assert set(meta["lost"]["1"]) == {"overrun", "dropped_events", "commit_overrun"}
    cap = TraceCapture.load(out)
    switches = [e for e in cap.events(1) if e.name == "sched_switch"]
    assert switches, "no sched_switch on the measured CPU"
    assert all(e.cpu == 1 for e in switches)
    # mono timestamps inside the recording, which spans the measurement
    start = header["start_monotonic_ns"]
    assert m["started_ns"] <= start <= m["stopped_ns"]
    assert all(m["started_ns"] <= e.ts <= m["stopped_ns"] for e in switches)
    assert any(start <= e.ts <= start + 1_000_000_000 for e in switches)
    assert not instance(name).exists()
    assert list(jdir.iterdir()) == []
    # the engine's default list is the host's
    assert sorted(m["events"] + m["events_missing"]) == sorted(DEFAULT_EVENTS)


def test_option_without_trace_dir_is_refused(probe_bin: str, tmp_path: Path) -> None:
    r = run_probe(probe_bin, "timer", "--cpus", "1", "--duration", "1s", "--allow-non-rt",
                  "--trace-buffer-kb", "64")
    assert r.returncode == 2
    assert r.stderr.strip() == "rtlab-probe timer: --trace-buffer-kb needs --trace-dir; " \
        "give --trace-dir DIR or drop it"
    assert r.stdout == ""


def test_kill9_leaves_instance_and_journal_that_sys_restore_removes(
    probe_bin: str, tmp_path: Path, require_root: None
) -> None:
    out, jdir = tmp_path / "trace", tmp_path / "journals"
    with killed_at_end(probe_bin, timer_args(out, jdir, duration="60s")) as proc:
        wait_for_file(out / "meta.json")
        time.sleep(0.5)
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
    journal, inst = leftovers(jdir, proc.pid)
    assert journal.exists() and inst.is_dir()
    # the partial capture still loads (the start's meta, the pages drained so far)
    cap = TraceCapture.load(out)
    assert cap.meta["complete"] is False
    r = run_probe(probe_bin, "sys", "restore", "--journal", str(journal))
    assert r.returncode == 0, r.stderr
    assert not inst.exists() and not journal.exists()


def test_rtlab_restore_removes_a_killed_recorders_instance(
    probe_bin: str, tmp_path: Path, require_root: None
) -> None:
    out, jdir = tmp_path / "trace", tmp_path / "journals"
    with killed_at_end(probe_bin, timer_args(out, jdir, duration="60s")) as proc:
        wait_for_file(out / "meta.json")
    _, inst = leftovers(jdir, proc.pid)
    assert inst.is_dir()
    env = {**os.environ, "RTLAB_JOURNAL_DIR": str(jdir), "RTLAB_PROBE": probe_bin}
    r = subprocess.run([sys.executable, "-m", "rtlab", "restore"], capture_output=True,
                       text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    assert not inst.exists() and list(jdir.glob("*.journal")) == []


def test_sigterm_ends_recording_cleanly(probe_bin: str, tmp_path: Path, require_root: None) -> None:
    out, jdir = tmp_path / "trace", tmp_path / "journals"
    proc = subprocess.Popen([probe_bin, *timer_args(out, jdir, duration="60s")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for_file(out / "meta.json")
    time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 130
    meta = json.loads((out / "meta.json").read_text())
    assert meta["meta"]["complete"] is True
    assert not instance(f"rtlab-{proc.pid}").exists()
    assert list(jdir.iterdir()) == []


# case: (the trace dir below tmp_path, extra options, exit code, words of the one line)
BAD_CASES: dict[str, tuple[str, list[str], int, str]] = {
    "existing dir": ("exists", [], 2, "exists already"),
    "missing parent": ("no/dir", [], 2, "parent directory"),
    "absurd buffer": ("trace", ["--trace-buffer-kb", str(60 << 20)], 1, "--trace-buffer-kb"),
    "unknown tracer": ("trace", ["--trace-tracer", "nosuchtracer"], 4,
                       "--trace-tracer nosuchtracer"),
    "no sched_switch": ("trace", ["--trace-events", "irq/irq_handler_entry"], 2,
                        "sched/sched_switch"),
    "bad event": ("trace", ["--trace-events", "sched/sched_switch,bad"], 2, "'bad'"),
    "bad instance": ("trace", ["--trace-instance", "a/b"], 2, "--trace-instance"),
}


@pytest.mark.parametrize("case", sorted(BAD_CASES))
def test_refusals_leave_nothing(probe_bin: str, tmp_path: Path, case: str,
                                require_root: None) -> None:
    where, extra, code, needle = BAD_CASES[case]
    out, jdir = tmp_path / where, tmp_path / "journals"
    if case == "existing dir":
        out.mkdir()
    name = f"rtlab-t26r-{os.getpid()}"
    args = timer_args(out, jdir, "--trace-instance", name, *extra)
    r = run_probe(probe_bin, *args)
    assert r.returncode == code, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in r.stderr, r.stderr
    assert r.stdout == ""
    assert list(out.iterdir()) == [] if case == "existing dir" else not out.exists()
    assert not instance(name).exists()
    assert not jdir.exists() or list(jdir.iterdir()) == []


def test_clash_with_an_existing_instance(probe_bin: str, tmp_path: Path,
                                         require_root: None) -> None:
    out, jdir = tmp_path / "trace", tmp_path / "journals"
    name = f"other-tool-{os.getpid()}"
    inst = instance(name)
    inst.mkdir()
    try:
        (inst / "buffer_size_kb").write_text("64")
        size = (inst / "buffer_size_kb").read_text()
        r = run_probe(probe_bin, *timer_args(out, jdir, "--trace-instance", name))
        assert r.returncode == 1, r.stderr
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and name in lines[0]
        assert inst.is_dir() and (inst / "buffer_size_kb").read_text() == size
        assert not out.exists()
        assert not jdir.exists() or list(jdir.iterdir()) == []
    finally:
        inst.rmdir()


@pytest.fixture
def open_tmp() -> Iterator[Path]:
    """A directory that user nobody may look into (pytest's tmp_path is root's alone)."""
    base = Path(tempfile.mkdtemp(prefix="rtlab-t26-"))
    base.chmod(0o777)
    yield base
    shutil.rmtree(base, ignore_errors=True)


def test_not_root_is_skipped(probe_bin: str, open_tmp: Path, require_root: None) -> None:
    base = open_tmp
    out, jdir = base / "trace", base / "journals"
    r = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                        probe_bin, *timer_args(out, jdir)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 4, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "root" in lines[0]
    assert not out.exists() and not jdir.exists()


def test_full_disk_drops_pages_and_says_so(probe_bin: str, tmp_path: Path,
                                           require_root: None) -> None:
    with tiny_tmpfs(tmp_path, "256k") as mnt:
        out, jdir = mnt / "trace", tmp_path / "journals"
        # a busy CPU 1 fills 256 KiB within the run
        r = run_probe(probe_bin, *timer_args(out, jdir, "--trace-buffer-kb", "1024",
                                             duration="2s"),
                      "--interval", "100us")
        assert r.returncode == 0, r.stderr
        assert "No space left on device" in r.stderr
        meta = json.loads((out / "meta.json").read_text())["meta"]
        assert meta["complete"] is True
        assert "cpu1.pages" in meta["error"] and "No space left" in meta["error"]
        assert meta["dropped_pages"]["1"] > 0
        TraceCapture.load(out)  # the pages written before are whole
        assert list(jdir.iterdir()) == []
