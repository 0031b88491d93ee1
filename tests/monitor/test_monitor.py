# SPDX-License-Identifier: MIT
"""`rtlab monitor` for real on this machine: segments stored as runs whose counts add up to
the live totals, kill -9 and restart (nothing lost, nothing counted twice, no engine left
measuring), a store that is away for a while, bad input."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from rtlab.results.store import Store
from tests.support.paths import REPO
from tests.support.pg_server import PgServer
from tests.support.waiting import wait_for


@pytest.fixture
def env(probe_bin: str, tmp_path: Path) -> dict[str, str]:
    return dict(os.environ, RTLAB_PROBE=probe_bin, PYTHONPATH=str(REPO),
                XDG_DATA_HOME=str(tmp_path / "xdg"))


def monitor_cmd(state: Path, store: Path | str, *more: str) -> list[str]:
    return [sys.executable, "-m", "rtlab", "monitor", "--cpus", "1", "--state-dir", str(state),
            "--store", str(store), *more]


def checkpoint(state: Path) -> dict:
    return json.loads((state / "checkpoint.json").read_text())


def totals(state: Path) -> tuple[int, int]:
    chs = checkpoint(state)["channels"]
    return sum(c["samples"] for c in chs), sum(c["missed"] for c in chs)


def stored_totals(store: Path | str) -> tuple[int, int, list]:
    s = Store.open(str(store), create=False)
    try:
        runs = [s.get(r.id) for r in s.list(None)]
    finally:
        s.close()
    samples = sum(ch.samples for r in runs for ch in r.phases[0].channels)
    missed = sum(ch.missed for r in runs for ch in r.phases[0].channels)
    return samples, missed, runs


def children(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            out += [int(x) for x in (task / "children").read_text().split()]
    return out


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_segments_add_up_to_the_live_totals(require_root: None, env: dict[str, str],
                                            tmp_path: Path) -> None:
    state, store = tmp_path / "state", tmp_path / "store.db"
    r = subprocess.run(monitor_cmd(state, store, "--segment", "2s", "--duration", "5s"),
                       env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    samples, missed, runs = stored_totals(store)
    assert (samples, missed) == totals(state)
    assert samples + missed >= 3000  # ~5 s at 1 ms, minus engine starts
    assert len(runs) == 3  # 2 s + 2 s + the last 1 s cut by --duration
    assert {r.scenario["name"] for r in runs} == {"monitor"}
    mids = {r.provenance["monitor"]["id"] for r in runs}
    assert len(mids) == 1
    assert not list((state / "segments").rglob("*.jsonl"))  # stored: raw files handed over
    # every run keeps its per-second window maxima (the daily view is built from them)
    assert all(len(r.phases[0].channels[0].windows) >= 1 for r in runs)


def test_the_monitors_own_threads_keep_off_the_measured_cpu(require_root: None,
                                                            env: dict[str, str],
                                                            tmp_path: Path) -> None:
    if len(os.sched_getaffinity(0)) < 2 or 1 not in os.sched_getaffinity(0):
        pytest.skip("needs CPUs 0 and 1")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # the exporter's thread starts before the watching does (regression: it stayed
    # allowed on the measured CPU, as only the main thread's affinity was set)
    p = subprocess.Popen(monitor_cmd(tmp_path / "state", tmp_path / "s.db", "--listen",
                                     f"127.0.0.1:{port}", "--duration", "60s"),
                         env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        def engine_measures() -> bool:
            return any(Path(f"/proc/{c}/comm").read_text().strip() == "rtlab-probe"
                       for c in children(p.pid) if alive(c))
        wait_for(engine_measures, 60, "the engine")
        allowed = {}
        for task in Path(f"/proc/{p.pid}/task").iterdir():
            with contextlib.suppress(OSError):
                allowed[task.name] = os.sched_getaffinity(int(task.name))
        assert len(allowed) >= 3  # main, the exporter's, a watcher, the store writer
        assert all(1 not in cpus for cpus in allowed.values()), allowed
        # the engine's measuring thread is the one on CPU 1 (the engine process is
        # there before its measuring thread is made and pinned: wait for it)
        (eng,) = [c for c in children(p.pid) if alive(c)]

        def on_cpu1() -> list[str]:
            out = []
            for task in Path(f"/proc/{eng}/task").iterdir():
                with contextlib.suppress(OSError):
                    if os.sched_getaffinity(int(task.name)) == {1}:
                        out.append(task.name)
            return out

        on1 = wait_for(on_cpu1, 60, "the engine's thread pinned to CPU 1")
        assert len(on1) == 1
    finally:
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=60)
    assert p.returncode == 130, err


def test_dma_latency_is_held_while_measuring(require_root: None, env: dict[str, str],
                                            tmp_path: Path) -> None:
    if not Path("/dev/cpu_dma_latency").exists():
        pytest.skip("no /dev/cpu_dma_latency (kernel without PM QoS)")
    state, store = tmp_path / "state", tmp_path / "s.db"
    p = subprocess.Popen(monitor_cmd(state, store, "--dma-latency", "0", "--duration", "60s"),
                         env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        def engine_holds() -> bool:
            for c in children(p.pid):
                with contextlib.suppress(OSError):
                    if any(os.readlink(f) == "/dev/cpu_dma_latency"
                           for f in Path(f"/proc/{c}/fd").iterdir()):
                        return True
            return False
        wait_for(engine_holds, 60, "the engine holding /dev/cpu_dma_latency")
    finally:
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=60)
    assert p.returncode == 130, err
    _, _, runs = stored_totals(store)
    assert runs and all("--dma-latency" in r.provenance["engine"]["argv"] for r in runs)


def test_kill9_then_restart_loses_nothing_and_counts_nothing_twice(
        require_root: None, env: dict[str, str], tmp_path: Path) -> None:
    state, store = tmp_path / "state", tmp_path / "store.db"
    proc = subprocess.Popen(monitor_cmd(state, store, "--segment", "1h"), env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        # a checkpoint that already holds a few snapshots of the open segment
        wait_for(lambda: (state / "checkpoint.json").exists()
                 and any(s["seq"] >= 3 for s in checkpoint(state)["open"].values()),
                 60, "a checkpoint with 3 snapshots")
        engines = children(proc.pid)
        assert engines, "the monitor runs an engine"
        time.sleep(1.5)  # records after the checkpoint: only the raw file has them
    finally:
        proc.kill()
        proc.wait(10)
    # the engine dies with its monitor: nothing measures unobserved at RT priority
    wait_for(lambda: not any(alive(p) for p in engines), 10, "the engine to stop")
    cp = checkpoint(state)
    (seg,) = cp["open"].values()
    raw = state / seg["file"]
    snaps = [json.loads(x) for x in raw.read_text().splitlines() if '"snapshot"' in x]
    assert snaps[-1]["seq"] > seg["seq"]  # the raw file is ahead of the checkpoint

    r = subprocess.run(monitor_cmd(state, store, "--segment", "2s", "--duration", "3s"),
                       env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "was interrupted" in r.stderr and "recovered" in r.stderr
    samples, missed, runs = stored_totals(store)
    assert (samples, missed) == totals(state)
    first = [x for x in runs if x.run_id == seg["run_id"]]
    assert len(first) == 1 and first[0].partial
    # the interrupted run holds exactly what its raw file's last complete snapshot says
    last = snaps[-1]["channels"][0]
    assert first[0].phases[0].channels[0].samples == last["samples"]
    assert any("monitor stopped while this segment measured" in n for n in first[0].notes)
    assert len({x.run_id for x in runs}) == len(runs)


def test_a_store_that_is_away_gets_the_segments_later(require_root: None,
                                                      env: dict[str, str],
                                                      tmp_path: Path,
                                                      pg_server: PgServer) -> None:
    """The store's server is down: segments wait in the state directory; once it is
    back they are all stored, none lost. (A store that cannot be made at all, a path
    through a file, is refused before the first segment: tests/results.)"""
    state = tmp_path / "state"
    store = pg_server.url(pg_server.create_database())
    pg_server.stop_server()
    try:
        r = subprocess.run(monitor_cmd(state, store, "--segment", "1s", "--duration", "3s"),
                           env=env, capture_output=True, text=True, timeout=120)
    finally:
        pg_server.start_server()  # the store comes back
    assert r.returncode == 1, r.stderr
    assert "not stored" in r.stderr or "unreachable" in r.stderr
    pending = checkpoint(state)["pending"]
    assert len(pending) >= 2
    assert all((state / s["file"]).exists() for s in pending)
    before = totals(state)

    r = subprocess.run(monitor_cmd(state, store, "--segment", "1s", "--duration", "1s"),
                       env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    samples, missed, runs = stored_totals(store)
    assert (samples, missed) == totals(state)
    assert samples >= before[0] and len(runs) >= len(pending) + 1
    assert checkpoint(state)["pending"] == []


def test_an_outage_still_going_on_at_the_stop_is_a_gap(env: dict[str, str],
                                                      tmp_path: Path) -> None:
    # regression: a board down until the monitor stopped left no gap at all
    state = tmp_path / "state"
    r = subprocess.run([sys.executable, "-m", "rtlab", "monitor", "--target", "nosuch.invalid",
                        "--duration", "3s", "--state-dir", str(state), "--store",
                        str(tmp_path / "s.db")], env=env, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    assert "nosuch.invalid: down: cannot reach nosuch.invalid" in r.stderr
    cp = checkpoint(state)
    (gap,) = cp["gaps"]
    assert gap["board"] == "nosuch.invalid" and 2.0 < gap["end"] - gap["start"] < 10
    assert gap["reason"].endswith("(still down when the monitor stopped)")
    (board,) = cp["boards"]
    assert board["gaps"] == 1 and board["gap_seconds"] == gap["end"] - gap["start"]


def test_one_monitor_per_state_directory(require_root: None, env: dict[str, str],
                                         tmp_path: Path) -> None:
    state, store = tmp_path / "state", tmp_path / "store.db"
    first = subprocess.Popen(monitor_cmd(state, store, "--segment", "1h"), env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
    try:
        wait_for(lambda: (state / "checkpoint.json").exists(), 60, "the first monitor")
        r = subprocess.run(monitor_cmd(state, store, "--duration", "1s"), env=env,
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 1
        (line,) = r.stderr.strip().splitlines()
        assert f"is in use by rtlab monitor pid {first.pid}" in line
    finally:
        first.send_signal(signal.SIGTERM)
        assert first.wait(30) == 130


@pytest.mark.parametrize(("args", "words"), [
    (["--cpus", "1-0"], "--cpus"),
    (["--cpus", "x"], "--cpus"),
    (["--interval", "fast"], "--interval"),
    (["--segment", "10ms"], "--segment"),
    (["--segment", "1000001h"], "--segment '1000001h' is out of range (1s..1000h)"),
    (["--target", "root@board 7"], "--target 'root@board 7'"),
    (["--target", "local", "--target", "b:99999"], "--target 'b:99999'"),
    (["--dma-latency", "2147483648"], "--dma-latency 2147483648 is out of range"),
    (["--priority", "120"], "--priority"),
    (["--dma-latency", "-1"], "--dma-latency"),
    (["--probe", "noise", "--dma-latency", "0"], "--dma-latency does not apply"),
    (["--probe", "noise", "--interval", "2ms", "--priority", "90"],
     "--interval, --priority do not apply"),
])
def test_bad_input_is_one_line_exit_2_and_changes_nothing(env: dict[str, str], tmp_path: Path,
                                                          args: list[str], words: str) -> None:
    state = tmp_path / "state"
    r = subprocess.run([sys.executable, "-m", "rtlab", "monitor", "--state-dir", str(state),
                        "--store", str(tmp_path / "s.db"), *args], env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, r.stderr
    (line,) = r.stderr.strip().splitlines()
    assert words in line and "Traceback" not in r.stderr
    assert not state.exists() and not (tmp_path / "s.db").exists()


def test_an_offline_cpu_is_a_usage_error(require_root: None, env: dict[str, str],
                                         tmp_path: Path) -> None:
    r = subprocess.run([sys.executable, "-m", "rtlab", "monitor", "--cpus", "1000",
                        "--state-dir", str(tmp_path / "st"), "--store", str(tmp_path / "s.db"),
                        "--duration", "5s"], env=env, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr and "1000" in r.stderr.strip().splitlines()[-1]


def test_the_noise_probe_can_be_monitored(require_root: None, env: dict[str, str],
                                          tmp_path: Path) -> None:
    state, store = tmp_path / "state", tmp_path / "store.db"
    r = subprocess.run(monitor_cmd(state, store, "--probe", "noise", "--segment", "2s",
                                   "--duration", "3s"),
                       env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    samples, _, runs = stored_totals(store)
    assert {x.probe for x in runs} == {"noise"} and len(runs) == 2
    assert samples == totals(state)[0] and samples > 0
    assert {c["probe"] for c in checkpoint(state)["channels"]} == {"noise"}


def test_without_rt_privilege_the_monitor_is_skipped_exit_4(env: dict[str, str]) -> None:
    """Run as the unprivileged user nobody: the engine cannot get SCHED_FIFO, the monitor
    says so in one line and exits 4 (skipped); --allow-non-rt would measure anyway."""
    if os.geteuid() != 0:
        pytest.skip("needs root to become nobody")
    probe = env["RTLAB_PROBE"]
    if not os.access(probe, os.X_OK) or os.stat(probe).st_mode & 0o001 == 0:
        pytest.skip("probe binary not executable by others")
    work = Path(tempfile.mkdtemp(prefix="rtlab-mon-nobody-"))
    try:
        work.chmod(0o777)
        r = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                            *monitor_cmd(work / "state", work / "s.db", "--duration", "10s")],
                           env={**env, "HOME": str(work)}, capture_output=True, text=True,
                           timeout=60, cwd="/")
        if "Permission denied" in r.stderr and "Traceback" not in r.stderr:
            pytest.skip("nobody cannot reach this checkout: " + r.stderr.strip()[-200:])
        assert r.returncode == 4, r.stderr
        errors = [ln for ln in r.stderr.splitlines() if ln.startswith("rtlab: error")]
        assert len(errors) == 1 and "Traceback" not in r.stderr
    finally:
        shutil.rmtree(work, ignore_errors=True)
