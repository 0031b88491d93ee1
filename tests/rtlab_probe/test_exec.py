# SPDX-License-Identifier: MIT
"""`rtlab-probe exec -- CMD`: CMD leads its own process group, the `exec` record names
it (pid, pgid, starttime for a journal), a stop (stdin EOF with --stdin-lifeline, a
signal) ends the whole group (SIGKILL for what ignores SIGTERM), CMD's stdout stays
out of the JSON stream, a missing CMD is exit 4 with one line, and a killed exec
takes CMD with it. No root needed; assertions are on processes and records, never on
timing (generous waits: a loaded 2-vCPU VM)."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from .helpers import EngineRun, parse_lines, proc_stat, started_runs, wait_until

WAIT = 120


def _members(pgid: int) -> list[int]:
    """Live processes of group pgid (zombies left out)."""
    out = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            st = proc_stat(int(entry.name))
            if st is not None and st[0] != "Z" and int(st[2]) == pgid:
                out.append(int(entry.name))
    return out


def _wait(cond: Any, what: str) -> None:
    if not wait_until(cond, WAIT):
        pytest.fail(f"timed out waiting for {what}")


class Exec(EngineRun):
    """A running `rtlab-probe [--stdin-lifeline] exec ... -- CMD` and its `exec` record."""

    def __init__(self, probe: str, *args: str, lifeline: bool = False) -> None:
        # its own session: a stop of this test never reaches pytest's group
        super().__init__(probe, "exec", *args, lifeline=lifeline, new_session=True)
        self.pgid = int(self.rec["pgid"])

    def close(self) -> None:
        super().close()
        for pid in _members(self.pgid):  # only what this test started: its own group
            os.kill(pid, signal.SIGKILL)


@pytest.fixture
def execs(probe_bin: str) -> Any:
    yield from started_runs(Exec, probe_bin)


# three processes in the group: sh and two sleeps (sh waits, so it stays the leader)
TREE = ["--", "sh", "-c", "sleep 300 & sleep 300 & wait"]


def test_exec_record_and_process_group(execs: Any) -> None:
    e = execs(*TREE)
    r = e.rec
    assert r["type"] == "exec" and r["schema"] == 1 and r["engine_version"]
    pid = r["pid"]
    assert r["pgid"] == pid == os.getpgid(pid)  # the leader of a new group
    assert os.getpgid(pid) != os.getpgid(e.p.pid)  # not the exec process's group
    assert int(proc_stat(pid)[1]) == e.p.pid  # ppid: the exec process
    assert r["starttime"] == int(proc_stat(pid)[19])  # /proc/PID/stat field 22, for `spawned`
    assert r["argv"] == TREE[1:] and r["path"].endswith("/sh") and r["cpus"] is None
    _wait(lambda: len(_members(pid)) == 3, "sh and its two sleeps")
    os.kill(e.p.pid, signal.SIGTERM)
    code, done, _out, err = e.finish()
    assert code == 130, err
    assert done is not None and done["type"] == "exec_done"
    assert done["stopped"] and done["stop"] == "SIGTERM" and done["group_empty"]
    assert done["signal"] == signal.SIGTERM and done["status"] is None
    assert _members(pid) == []


def test_stdin_eof_ends_the_whole_group(execs: Any) -> None:
    e = execs(*TREE, lifeline=True)
    pid = e.pgid
    _wait(lambda: len(_members(pid)) == 3, "sh and its two sleeps")
    assert e.p.stdin is not None
    e.p.stdin.close()  # the host died / the SSH connection dropped
    e.p.stdin = None
    code, done, _out, err = e.finish()
    assert code == 130, err
    assert done is not None and done["stop"] == "stdin_eof" and done["group_empty"]
    assert not done["killed"]
    assert _members(pid) == []


def test_what_ignores_sigterm_is_killed(execs: Any) -> None:
    e = execs("--", "sh", "-c", "trap '' TERM; while :; do sleep 1; done", lifeline=True)
    pid = e.pgid
    _wait(lambda: len(_members(pid)) >= 2, "the loop (the trap is set before it)")
    assert e.p.stdin is not None
    e.p.stdin.close()
    e.p.stdin = None
    code, done, _out, err = e.finish()
    assert code == 130, err
    assert done is not None and done["killed"] and done["signal"] == signal.SIGKILL
    assert done["group_empty"] and _members(pid) == []


def test_cmd_exit_code_and_stdout_kept_out_of_the_json(probe_bin: str) -> None:
    script = 'echo hello; echo \'{"type":"result","fake":true}\'; echo oops >&2; exit 3'
    p = subprocess.run([probe_bin, "exec", "--", "sh", "-c", script], capture_output=True,
                       text=True, timeout=WAIT, check=False)
    assert p.returncode == 3, p.stderr
    recs = parse_lines(p.stdout)
    assert [r["type"] for r in recs] == ["exec", "exec_done"]  # nothing else on stdout
    assert recs[1]["status"] == 3 and recs[1]["exit_code"] == 3 and not recs[1]["stopped"]
    assert "hello" in p.stderr and '"fake":true' in p.stderr and "oops" in p.stderr


def test_cmd_killed_by_a_signal(probe_bin: str) -> None:
    p = subprocess.run([probe_bin, "exec", "--", "sh", "-c", "kill -KILL $$"],
                       capture_output=True, text=True, timeout=WAIT, check=False)
    assert p.returncode == 128 + 9, p.stderr
    done = parse_lines(p.stdout)[-1]
    assert done["signal"] == 9 and done["status"] is None


def test_leftovers_of_an_exited_cmd_are_ended(probe_bin: str) -> None:
    """CMD exits, something it started stays in the group: the exec ends it."""
    p = subprocess.run([probe_bin, "exec", "--", "sh", "-c", "sleep 300 & exit 0"],
                       capture_output=True, text=True, timeout=WAIT, check=False)
    assert p.returncode == 0, p.stderr
    start, done = parse_lines(p.stdout)
    assert done["group_empty"] and _members(start["pgid"]) == []


def _cpus_allowed(pid: int) -> str:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Cpus_allowed_list:"):
            return line.split(":", 1)[1].strip()
    return ""


def test_cpus_is_the_affinity_of_cmd_and_of_the_exec_process(execs: Any) -> None:
    cpu = min(os.sched_getaffinity(0))
    e = execs("--cpus", str(cpu), "--", "sh", "-c", "sleep 300 & wait", lifeline=True)
    assert e.rec["cpus"] == [cpu] and e.rec["exec_pid"] == e.p.pid
    _wait(lambda: len(_members(e.pgid)) == 2, "sh and its sleep")
    for pid in [e.p.pid, *_members(e.pgid)]:  # exec, CMD, and what CMD started
        assert _cpus_allowed(pid) == str(cpu), pid
    for task in os.listdir(f"/proc/{e.p.pid}/task"):  # the lifeline thread too
        assert _cpus_allowed(int(task)) == str(cpu)


def test_missing_command_is_exit_4_one_line(probe_bin: str) -> None:
    p = subprocess.run([probe_bin, "exec", "--", "rtlab-no-such-tool", "--cpu", "1"],
                       capture_output=True, text=True, timeout=WAIT, check=False)
    assert p.returncode == 4
    assert p.stdout == ""
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "rtlab-no-such-tool" in lines[0] and "not found" in lines[0]
    q = subprocess.run([probe_bin, "exec", "--", "/nonexistent/dir/tool"],
                       capture_output=True, text=True, timeout=WAIT, check=False)
    assert q.returncode == 4 and q.stdout == "" and "/nonexistent/dir/tool" in q.stderr


@pytest.mark.parametrize(("args", "message"), [
    ([], "give the command after --"),
    (["sh"], "give the command after --"),
    (["--"], "give the command after --"),
    (["--bogus", "--", "sh"], "--bogus"),
    (["--cpus", "x", "--", "sh"], "--cpus"),
])
def test_usage_errors_exit_2(probe_bin: str, args: list[str], message: str) -> None:
    p = subprocess.run([probe_bin, "exec", *args], capture_output=True, text=True,
                       timeout=WAIT, check=False)
    assert p.returncode == 2
    assert p.stdout == "" and message in p.stderr and len(p.stderr.strip().splitlines()) == 1


def test_kill9_of_exec_takes_cmd_with_it(execs: Any) -> None:
    e = execs("--", "sleep", "300")
    pid = e.pgid
    os.kill(e.p.pid, signal.SIGKILL)
    e.p.wait(timeout=WAIT)
    _wait(lambda: _members(pid) == [], "the leader to die with the exec process")
