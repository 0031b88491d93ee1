# SPDX-License-Identifier: MIT
"""`rtlab-probe load`: workers in the load's own process group, stopped and reaped on
SIGTERM, on stdin EOF (--stdin-lifeline), when the group is signalled and when the
parent is killed; usage errors exit 2 with one line; --policy/--priority set on every
worker and never on the load process (real SCHED_FIFO/RR as root), refused in one line
with exit 4 and nothing left where it is not allowed. Root only where said; assertions
are on processes, records and counts, never on timing."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from .helpers import (
    LoadRun,
    alive,
    cpu_ticks,
    parse_lines,
    proc_stat,
    run_probe,
    started_runs,
    wait_until,
)

WAIT = 120  # generous: a loaded 2-vCPU VM


def _wait_gone(pids: list[int]) -> list[int]:
    wait_until(lambda: not any(alive(p) for p in pids), WAIT)
    return [p for p in pids if alive(p)]


@pytest.fixture
def loads(probe_bin: str) -> Any:
    yield from started_runs(LoadRun, probe_bin)


def test_load_record_and_process_group(loads: Any) -> None:
    ld = loads("--cpu", "2", "--vm", "1", "--vm-bytes", "4M")
    s = ld.rec
    pid = ld.p.pid
    assert s["type"] == "load" and s["schema"] == 1 and s["engine_arch"]
    assert s["pid"] == pid
    assert s["pgid"] == pid == os.getpgid(pid)  # its own group, though started in ours
    assert s["starttime"] == int(proc_stat(pid)[19])  # /proc/PID/stat field 22, for a journal
    assert s["config"] == {"cpu": 2, "cpu_duty": None, "vm": 1, "vm_bytes": 4 << 20, "cpus": None,
                           "duration_ns": None, "alloc_bytes": None, "alloc_period_ns": None,
                           "io": 0, "io_bytes": None, "io_dir": None, "net_to": None,
                           "net_kbit": None, "net_size": None, "net_tick_ns": None,
                           "net_sink": None, "snapshot_interval_ns": None,
                           "policy": "other", "priority": 0}
    assert s["io_priority"] is None
    assert [w["kind"] for w in s["workers"]] == ["cpu", "cpu", "vm"]
    assert all((w["policy"], w["priority"]) == ("other", 0) for w in s["workers"])
    for w in ld.workers:
        assert os.getpgid(w) == pid
        assert int(proc_stat(w)[1]) == pid  # ppid
    ld.wait_all_ran(WAIT)
    os.kill(pid, signal.SIGTERM)
    code, res, _out, err = ld.finish()
    assert code == 130, err
    assert res is not None and res["type"] == "load_result"
    assert res["status"] == "interrupted" and res["exit_code"] == 130 and res["error"] is None
    assert [w["pid"] for w in res["workers"]] == ld.workers
    assert all(w["end"] == "stopped" for w in res["workers"])
    assert res["loops"]["cpu"] == sum(w["loops"] for w in res["workers"] if w["kind"] == "cpu")
    assert res["loops"]["cpu"] > 0
    assert _wait_gone(ld.workers) == []


def test_load_stops_at_stdin_eof(loads: Any) -> None:
    ld = loads("--cpu", "1", "--vm", "1", "--vm-bytes", "4M", lifeline=True, new_session=True)
    assert ld.p.stdin is not None
    ld.p.stdin.close()  # the host died / the SSH connection dropped
    ld.p.stdin = None
    code, res, _out, err = ld.finish()
    assert code == 130, err
    assert res is not None and res["status"] == "interrupted"
    assert _wait_gone(ld.workers) == []


def test_load_stops_when_its_group_is_signalled(loads: Any) -> None:
    """What a journal's `spawned` entry does on restore: SIGTERM to the group."""
    ld = loads("--cpu", "1", "--vm", "1", "--vm-bytes", "4M", new_session=True)
    os.killpg(ld.rec["pgid"], signal.SIGTERM)
    code, res, _out, err = ld.finish()
    assert code == 130, err
    assert res is not None and res["status"] == "interrupted"
    assert _wait_gone(ld.workers) == []


def test_workers_die_with_a_killed_parent(loads: Any) -> None:
    ld = loads("--cpu", "2", "--vm", "1", "--vm-bytes", "4M", new_session=True)
    os.kill(ld.p.pid, signal.SIGKILL)
    ld.p.wait(timeout=WAIT)
    assert _wait_gone(ld.workers) == []  # PR_SET_PDEATHSIG


def test_load_duration_and_affinity(probe_bin: str) -> None:
    cpu = min(os.sched_getaffinity(0))
    r = run_probe(probe_bin, "load", "--cpu", "1", "--cpus", str(cpu), "--duration", "300ms",
                  timeout=WAIT)
    assert r.returncode == 0, r.stderr
    start, res = parse_lines(r.stdout)
    assert start["config"]["cpus"] == [cpu] and start["config"]["duration_ns"] == 300_000_000
    assert res["status"] == "completed" and res["exit_code"] == 0
    assert res["workers"][0]["end"] == "stopped"
    assert _wait_gone([w["pid"] for w in start["workers"]]) == []


def test_a_worker_that_fails_ends_the_load(probe_bin: str) -> None:
    if Path("/proc/sys/vm/overcommit_memory").read_text().strip() == "1":
        pytest.skip("overcommit_memory=1: a 1T mapping would succeed")
    r = run_probe(probe_bin, "load", "--vm", "1", "--vm-bytes", "1T", "--duration", "1h",
                  timeout=WAIT)
    assert r.returncode == 1
    _start, res = parse_lines(r.stdout)
    assert res["status"] == "error" and "mmap of 1T failed" in res["error"]
    assert res["workers"][0]["end"] == "exit 3"
    assert r.stderr.count("\n") == 1 and "mmap of 1T failed" in r.stderr


@pytest.mark.parametrize(("policy", "prio", "kpolicy"), [
    ("fifo", 97, os.SCHED_FIFO),  # the seed's background hog
    ("rr", 5, os.SCHED_RR),
])
def test_workers_run_at_the_policy(require_root: None, loads: Any, policy: str, prio: int,
                                   kpolicy: int) -> None:
    """Every worker at the policy and priority, read back by the kernel; the load process
    itself (which only waits and holds the lifeline) keeps SCHED_OTHER."""
    cpu = max(os.sched_getaffinity(0))
    ld = loads("--cpu", "1", "--vm", "1", "--vm-bytes", "4M", "--policy", policy,
               "--priority", str(prio), "--cpus", str(cpu), new_session=True)
    assert (ld.rec["config"]["policy"], ld.rec["config"]["priority"]) == (policy, prio)
    assert [(w["policy"], w["priority"]) for w in ld.rec["workers"]] == [(policy, prio)] * 2
    for w in ld.workers:
        assert os.sched_getscheduler(w) == kpolicy
        assert os.sched_getparam(w).sched_priority == prio
        if Path(f"/proc/{w}/sched").exists():  # CONFIG_SCHED_DEBUG: the kernel's own view
            assert _sched_field(w, "policy") == kpolicy
            assert _sched_field(w, "prio") == 99 - prio  # MAX_RT_PRIO - 1 - rt_priority
    assert os.sched_getscheduler(ld.p.pid) == os.SCHED_OTHER
    # the cpu worker works (at FIFO the vm worker on the same CPU may never get it)
    assert wait_until(lambda: cpu_ticks(ld.workers[0]) > 0, WAIT)
    os.killpg(ld.rec["pgid"], signal.SIGTERM)
    code, res, _out, err = ld.finish()
    assert code == 130, err
    assert res is not None and res["loops"]["cpu"] > 0
    assert _wait_gone(ld.workers) == []


def _sched_field(pid: int, name: str) -> int | None:
    """A field of /proc/PID/sched ("policy  :  1"), None when absent."""
    for line in Path(f"/proc/{pid}/sched").read_text().splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() == name:
            return int(value.strip())
    return None


def _marked(marker: str) -> list[int]:
    """PIDs of processes whose command line contains marker."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if marker in d.joinpath("cmdline").read_bytes().decode(errors="replace"):
                    out.append(int(d.name))
            except OSError:
                continue
    return out


def test_a_refused_policy_starts_nothing(probe_bin: str, tmp_path: Path) -> None:
    """No CAP_SYS_NICE and RLIMIT_RTPRIO 0 (a user, or root without the capability):
    one line naming the option and the fix, exit 4, no record, no worker, no directory."""
    if os.geteuid() == 0:
        prefix = ["setpriv", "--bounding-set=-sys_nice"]  # root without CAP_SYS_NICE
    elif resource.getrlimit(resource.RLIMIT_RTPRIO)[0] >= 97:
        pytest.skip("RLIMIT_RTPRIO allows FIFO 97 without privilege")
    else:
        prefix = []
    io_dir = tmp_path / "io"
    io_dir.mkdir()
    marker = "4242s"  # a duration nothing else uses: finds what the load may have left
    r = subprocess.run([*prefix, probe_bin, "load", "--cpu", "2", "--io", "1", "--io-dir",
                        str(io_dir), "--policy", "fifo", "--priority", "97", "--duration",
                        marker], capture_output=True, text=True, timeout=WAIT, check=False,
                       preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_RTPRIO, (0, 0)))
    assert r.returncode == 4, r.stderr
    assert r.stdout == ""
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("rtlab-probe load: --policy fifo --priority 97: cannot set "
                               "SCHED_FIFO priority 97 on the workers (")
    assert "CAP_SYS_NICE" in lines[0] and "--policy other" in lines[0]
    assert list(io_dir.iterdir()) == []
    assert wait_until(lambda: not [p for p in _marked(marker) if alive(p)], WAIT)


@pytest.mark.parametrize(("args", "msg"), [
    ([], "give --cpu N and/or --vm M"),
    (["--cpu", "-1"], "--cpu: -1 is out of range; allowed range 0..1024"),
    (["--cpu", "x"], "--cpu: 'x' is not an integer"),
    (["--vm", "1", "--vm-bytes", "12"], "--vm-bytes: 12 is out of range"),
    (["--vm", "1", "--vm-bytes", "lots"], "--vm-bytes: 'lots' is not a size"),
    (["--cpu", "1", "--vm-bytes", "1M"], "--vm-bytes: only with --vm M"),
    (["--cpu", "1", "--cpus", "99999"], "--cpus:"),
    (["--cpu", "1", "--duration", "5"], "--duration: '5' is not a duration"),
    (["--cpu", "1", "--bogus"], "unknown option '--bogus'"),
    (["--cpu", "1", "--policy", "fifo", "--priority", "0"],
     "--priority: 0 is out of range for --policy fifo; allowed range 1..99"),
    (["--cpu", "1", "--policy", "fifo", "--priority", "100"],
     "--priority: 100 is out of range; allowed range 0..99"),
    (["--cpu", "1", "--priority", "97"], "--priority: only with --policy fifo or rr (1..99)"),
    (["--cpu", "1", "--policy", "deadline"], "--policy: 'deadline' is not one of other|fifo|rr"),
])
def test_bad_options_exit_2(probe_bin: str, args: list[str], msg: str) -> None:
    r = run_probe(probe_bin, "load", *args)
    assert r.returncode == 2
    assert r.stdout == ""
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("rtlab-probe load: ") and msg in lines[0]


def test_help_from_the_table(probe_bin: str) -> None:
    r = run_probe(probe_bin, "load", "--help")
    assert r.returncode == 0
    for opt in ("--cpu N", "--vm M", "--vm-bytes SIZE", "--cpus LIST", "--duration DUR",
                "--policy POLICY", "--priority N"):
        assert opt in r.stdout
    assert "4k..1T; default 256M" in r.stdout or "4k..2G; default 256M" in r.stdout


def test_load_is_not_a_probe(probe_bin: str) -> None:
    r = run_probe(probe_bin, "list", "--json")
    assert "load" not in [p["name"] for p in json.loads(r.stdout)["probes"]]
    assert "load" in run_probe(probe_bin, "--help").stdout
