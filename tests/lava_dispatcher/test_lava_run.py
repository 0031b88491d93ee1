# SPDX-License-Identifier: MIT
"""The shipped LAVA test definition (docs/lava/rtlab-latency.yaml) run by LAVA's own
dispatcher, lava-run (Debian 12's lava-dispatcher, unpacked into a private directory by
scripts/lava/dispatcher.sh), on an emulated PREEMPT_RT board as an SSH device.

What is checked is what LAVA itself recorded: the "results" records of the job log the
dispatcher wrote (output.yaml), not our own reading of the board's output. Latency under
emulation means nothing: measurements are compared with the same run's numbers as rtlab
computes them, never judged by size.
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.lab.boards import Board
from tests.support.store_reading import stored_runs

from .conftest import DISPATCHER, REPO, install_engine

DEFINITION = REPO / "docs" / "lava" / "rtlab-latency.yaml"
SCRIPT = REPO / "scripts" / "lava" / "rtlab-lava.sh"
TESTDEF = "0_rtlab-latency"  # LAVA's name of the job's first test definition
CASE_LINE = re.compile(r"lava-test-case (?P<name>\S+) --result (?P<result>\S+)"
                       r"(?: --measurement (?P<measurement>\S+) --units (?P<units>\S+))?")
_job_ids = itertools.count(1)
RAW_LINE = re.compile(r"rtlab-lava: raw output \(rtlab results import FILE\): (?P<path>\S+)")


@dataclass
class LavaJob:
    rc: int
    out: Path
    records: list[dict[str, Any]]
    stderr: str

    def results(self, definition: str) -> list[dict[str, Any]]:
        return [r["msg"] for r in self.records
                if r["lvl"] == "results" and r["msg"].get("definition") == definition]

    def result(self, definition: str, case: str) -> str:
        (r,) = [r for r in self.results(definition) if r["case"] == case]
        return str(r["result"])

    def target_lines(self) -> list[str]:
        """What the board printed, as the dispatcher logged it."""
        return [str(r["msg"]) for r in self.records if r["lvl"] == "target"]

    def explain(self) -> str:
        lines = [f"lava-run exit code {self.rc}", self.stderr[-3000:]]
        lines += [f"{r['lvl']}: {r['msg']}" for r in self.records[-60:]]
        return "\n".join(lines)


def definition_repo(tmp: Path) -> Path:
    """A git repository holding this checkout's definition and script at their paths, as
    a lab's clone of rtlab would: LAVA clones it and runs the step from its top."""
    repo = tmp / "rtlab.git"
    for src in (DEFINITION, SCRIPT):
        dest = repo / src.relative_to(REPO)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(src, dest)
    env = {**os.environ, "GIT_AUTHOR_NAME": "lab", "GIT_AUTHOR_EMAIL": "lab@example.org",
           "GIT_COMMITTER_NAME": "lab", "GIT_COMMITTER_EMAIL": "lab@example.org"}
    for argv in (["init", "-q"], ["add", "."], ["commit", "-q", "-m", "rtlab LAVA definition"]):
        subprocess.run(["git", *argv], cwd=repo, env=env, check=True, capture_output=True)
    return repo


def job_yaml(repo: Path, params: dict[str, str], name: str) -> str:
    """A LAVA job: deploy the test overlay to the SSH device, log in, run the definition."""
    job = {
        "device_type": "ssh",
        "job_name": name,
        "timeouts": {"job": {"minutes": 15}, "action": {"minutes": 10},
                     "connection": {"minutes": 3}},
        "priority": "medium",
        "visibility": "public",
        "actions": [
            {"deploy": {"to": "ssh", "os": "oe", "timeout": {"minutes": 3}}},
            {"boot": {"method": "ssh", "connection": "ssh",
                      "prompts": ["root@[^:]*:[^#]*# "], "timeout": {"minutes": 3}}},
            {"test": {"timeout": {"minutes": 10},
                      "definitions": [{"repository": str(repo), "from": "git",
                                       "path": "docs/lava/rtlab-latency.yaml",
                                       "name": "rtlab-latency", "parameters": params}]}},
        ],
    }
    return yaml.safe_dump(job, sort_keys=False)


def run_job(board: Board, tmp: Path, params: dict[str, str], name: str) -> LavaJob:
    """dispatcher.sh ssh-device for the board, then dispatcher.sh run on the job."""
    tmp.mkdir(parents=True, exist_ok=True)
    dev = subprocess.run(
        [str(DISPATCHER), "ssh-device", "--host", "127.0.0.1", "--port", str(board.port),
         "--identity", str(board.image.client_key), "--ssh-option", "-oIdentitiesOnly=yes",
         "--ssh-option", "-oBatchMode=yes", "--ssh-option", "-oConnectTimeout=30"],
        capture_output=True, text=True, check=True, timeout=60)
    (tmp / "device.yaml").write_text(dev.stdout)
    repo = definition_repo(tmp)
    (tmp / "job.yaml").write_text(job_yaml(repo, params, name))
    out = tmp / "out"
    job_id = str(next(_job_ids))  # each job its own overlay directory on the board
    p = subprocess.run([str(DISPATCHER), "run", "--device", str(tmp / "device.yaml"),
                        "--job-id", job_id, "--output-dir", str(out), str(tmp / "job.yaml")],
                       capture_output=True, text=True, timeout=900, check=False)
    records = yaml.safe_load((out / "output.yaml").read_text()) or []
    job = LavaJob(p.returncode, out, records, (out / "lava-run.stderr").read_text())
    print(p.stdout)
    return job


def rtlab(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "XDG_DATA_HOME": str(tmp / "xdg")}
    env.pop("RTLAB_STORE", None)
    return subprocess.run([sys.executable, "-m", "rtlab", *args, "--store",
                           str(tmp / "store.db")], capture_output=True, text=True, env=env,
                          timeout=300, check=False)


def as_recorded(line_case: re.Match[str]) -> dict[str, Any]:
    """A `lava-test-case` line as LAVA records it: name, result, and the measurement as a
    number with its units."""
    d: dict[str, Any] = {"case": line_case["name"], "result": line_case["result"]}
    if line_case["measurement"] is not None:
        d["measurement"] = float(line_case["measurement"])
        d["units"] = line_case["units"]
    return d


def recorded(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for r in results:
        d: dict[str, Any] = {"case": r["case"], "result": r["result"]}
        if "measurement" in r:
            d["measurement"] = float(r["measurement"])
            d["units"] = r["units"]
        out.append(d)
    return out


# --- usage of the dispatcher script (no board) ---------------------------------------------


@pytest.mark.parametrize("argv, message", [
    ([], None),
    (["launch"], "dispatcher.sh: error: unknown command launch (see --help)"),
    (["ssh-device"], "dispatcher.sh: error: ssh-device: --host is required (the board's "
                     "address)"),
    (["ssh-device", "--host", "b", "--port", "70000"],
     "dispatcher.sh: error: ssh-device: --port 70000: give a port number 1..65535"),
    (["ssh-device", "--host", "b", "--identity", "key"],
     "dispatcher.sh: error: ssh-device: --identity key: give an absolute path (LAVA reads "
     "relative ones below its own files)"),
    (["run", "job.yaml"], "dispatcher.sh: error: run: --device FILE is required (e.g. from "
                          "'ssh-device')"),
    (["run", "--device", "d.yaml", "--output-dir", "out"],
     "dispatcher.sh: error: run: give the job definition (a YAML file)"),
    (["run", "--device", "d.yaml", "--output-dir", "out", "gone.yaml"],
     "dispatcher.sh: error: run: cannot read the job gone.yaml"),
])
def test_usage_errors(argv: list[str], message: str | None, tmp_path: Path) -> None:
    """One line, exit 2, nothing created (and nothing fetched: no cache is made)."""
    env = {**os.environ, "RTLAB_LAVA_HOME": str(tmp_path / "cache")}
    p = subprocess.run([str(DISPATCHER), *argv], capture_output=True, text=True, cwd=tmp_path,
                       env=env, timeout=60, check=False)
    assert p.returncode == 2
    assert p.stdout == ""
    if message is None:
        assert p.stderr.startswith("usage: scripts/lava/dispatcher.sh COMMAND")
    else:
        assert p.stderr.splitlines() == [message]
    assert list(tmp_path.iterdir()) == []


def test_output_dir_must_be_new(tmp_path: Path) -> None:
    (tmp_path / "job.yaml").write_text("{}\n")
    (tmp_path / "device.yaml").write_text("{}\n")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "old").write_text("kept")
    p = subprocess.run([str(DISPATCHER), "run", "--device", "device.yaml", "--output-dir",
                        "out", "job.yaml"], capture_output=True, text=True, cwd=tmp_path,
                       env={**os.environ, "RTLAB_LAVA_HOME": str(tmp_path / "cache")},
                       timeout=60, check=False)
    assert (p.returncode, p.stderr.strip()) == (
        2, "dispatcher.sh: error: run: --output-dir out is not empty: give a new directory")
    assert sorted(x.name for x in tmp_path.iterdir()) == ["device.yaml", "job.yaml", "out"]
    assert [x.name for x in (tmp_path / "out").iterdir()] == ["old"]


def test_ssh_device_is_a_lava_device_dictionary(lava_cache: Path, tmp_path: Path) -> None:
    """LAVA's own device schema accepts the dictionary ssh-device writes."""
    key = tmp_path / "key"
    key.write_text("k")
    (tmp_path / "key.pub").write_text("k")
    dev = subprocess.run([str(DISPATCHER), "ssh-device", "--host", "board7.lab", "--port",
                          "2222", "--user", "lab", "--identity", str(key), "--ssh-option",
                          "-oProxyJump=gw \"x\""], capture_output=True, text=True, check=True,
                         timeout=60)
    (tmp_path / "device.yaml").write_text(dev.stdout)
    code = ("import sys, yaml; from lava_common.schemas.device import validate; "
            "d = yaml.safe_load(open(sys.argv[1])); validate(d); "
            "print(d['actions']['deploy']['methods']['ssh'])")
    p = subprocess.run([str(lava_cache / "venv" / "bin" / "python"), "-c", code,
                        str(tmp_path / "device.yaml")], capture_output=True, text=True,
                       timeout=120, check=False)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == str({"host": "board7.lab", "port": 2222, "user": "lab",
                                    "identity_file": str(key),
                                    "options": ["-oProxyJump=gw \"x\""]})


def test_unreachable_device_fails_the_job(lava_cache: Path, tmp_path: Path) -> None:
    """A device whose SSH port does not answer: LAVA's job fails with its infrastructure
    error, said in the job's line, and run exits 1."""
    import socket

    with socket.socket() as s:  # a port on the loopback that nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    key = tmp_path / "key"
    key.write_text("not a key\n")
    (tmp_path / "key.pub").write_text("not a key\n")
    dev = subprocess.run([str(DISPATCHER), "ssh-device", "--host", "127.0.0.1", "--port",
                          str(port), "--identity", str(key), "--ssh-option",
                          "-oBatchMode=yes"], capture_output=True, text=True, check=True,
                         timeout=60)
    (tmp_path / "device.yaml").write_text(dev.stdout)
    (tmp_path / "job.yaml").write_text(job_yaml(definition_repo(tmp_path), {}, "unreachable"))
    p = subprocess.run([str(DISPATCHER), "run", "--device", str(tmp_path / "device.yaml"),
                        "--output-dir", str(tmp_path / "out"), str(tmp_path / "job.yaml")],
                       capture_output=True, text=True, timeout=600, check=False)
    assert p.returncode == 1, p.stdout + p.stderr
    assert p.stdout.splitlines()[-1].startswith("fail lava/job (Infrastructure: ")
    records = yaml.safe_load((tmp_path / "out" / "output.yaml").read_text())
    (job,) = [r["msg"] for r in records if r["lvl"] == "results" and r["msg"]["case"] == "job"]
    assert (job["result"], job["error_type"]) == ("fail", "Infrastructure")
    assert not [r for r in records if r["lvl"] == "results"
                and r["msg"]["definition"] == TESTDEF]


# --- jobs on the emulated board ---------------------------------------------------------------


def test_lava_records_every_test_case_and_the_artifact_imports(
        lava_cache: Path, dut: Board, tmp_path: Path) -> None:
    """lava-run deploys the overlay over SSH, runs the definition with its parameters,
    and its own result parsing records every `lava-test-case` of the script with the
    measurement and units; the raw output the job keeps on the board imports into rtlab
    with the board's provenance."""
    slo = "max < 60s and missed >= 0 and p99 < 60s"
    job = run_job(dut, tmp_path / "met", {
        "ENGINE": "/tmp/bin/rtlab-probe", "CPUS": "0-1", "INTERVAL": "1ms",
        "DURATION": "3s", "SLO": slo, "OUTPUT_DIR": "/tmp/lava-met"}, "rtlab-latency met")
    assert job.rc == 0, job.explain()
    assert job.result("lava", "job") == "pass", job.explain()
    assert job.result("lava", TESTDEF) == "pass", job.explain()
    got = recorded(job.results(TESTDEF))
    names = [r["case"] for r in got]
    assert names == ["engine-run", "rt-valid",
                     "cpu0-max", "cpu0-p99.99", "cpu0-missed",
                     "cpu1-max", "cpu1-p99.99", "cpu1-missed",
                     "slo-cpu0-max-lt-60s", "slo-cpu0-missed-ge-0", "slo-cpu0-p99-lt-60s",
                     "slo-cpu1-max-lt-60s", "slo-cpu1-missed-ge-0", "slo-cpu1-p99-lt-60s",
                     "slo"], job.explain()
    # the job's working directories were in the cache (not /var/lib/lava), and are gone
    (removed,) = [str(r["msg"]) for r in job.records
                  if str(r["msg"]).startswith("Root tmp directory removed at ")]
    assert removed.startswith(f"Root tmp directory removed at {lava_cache}/jobs/run.")
    assert not Path(removed.split(" at ", 1)[1]).exists()
    # under LAVA the script calls lava-test-case; never prints the command lines itself
    lines = job.target_lines()
    assert not [ln for ln in lines if ln.startswith("lava-test-case ")]

    (raw_path,) = [m["path"] for ln in lines if (m := RAW_LINE.fullmatch(ln))]
    assert raw_path.startswith("/tmp/lava-met/rtlab-")
    # the same raw output reported outside LAVA prints the lines the helper received:
    # LAVA recorded each of them, with its measurement and units, and nothing else
    dut.copy_to(SCRIPT, "/tmp/rtlab-lava.sh")
    again = dut.sh(f"PATH=/tmp/bin:$PATH sh /tmp/rtlab-lava.sh --input {raw_path} "
                   f"--slo '{slo}'")
    want = [as_recorded(m) for ln in again.stdout.splitlines()
            if (m := CASE_LINE.fullmatch(ln))]
    assert again.returncode == 0, again.stdout + again.stderr
    assert got == want
    assert {r["units"] for r in got if "units" in r} == {"s", "us", "periods", "checks"}

    # the artifact: rtlab stores it with the board's host name, kernel and machine
    hostname = dut.ssh("uname", "-n", check=True).stdout.strip()
    release = dut.ssh("uname", "-r", check=True).stdout.strip()
    machine = dut.ssh("uname", "-m", check=True).stdout.strip()
    raw = tmp_path / Path(raw_path).name
    raw.write_text(dut.ssh("cat", raw_path, check=True).stdout)
    imp = rtlab(tmp_path, "results", "import", str(raw))
    assert imp.returncode == 0, imp.stderr
    (result,) = stored_runs(tmp_path / "store.db")
    assert (result.system["hostname"], result.system["release"], result.system["machine"],
            result.system["preempt"]) == (hostname, release, machine, "rt")
    assert result.status == "completed" and result.probe == "timer"
    by_name = {r["case"]: r for r in got}
    for _, ch in result.channels():
        assert by_name[f"{ch.name}-max"]["measurement"] == pytest.approx(ch.max_ns / 1000,
                                                                        abs=0.001)
        assert by_name[f"{ch.name}-missed"]["measurement"] == ch.missed


def test_unmet_slo_is_a_failed_case_in_a_completed_job(
        lava_cache: Path, dut: Board, tmp_path: Path) -> None:
    """An SLO the board cannot meet: LAVA records the clause and `slo` as fail with their
    measurements, the other cases pass, and the job goes on to its end (the step's
    `|| echo` keeps LAVA's `set -e` from ending the test shell)."""
    job = run_job(dut, tmp_path, {"ENGINE": "/tmp/bin/rtlab-probe", "CPUS": "1",
                                  "DURATION": "1s", "SLO": "max < 1ns and missed >= 0"},
                  "rtlab-latency forced to fail")
    assert job.rc == 0, job.explain()
    assert job.result("lava", "job") == "pass", job.explain()
    got = {r["case"]: r for r in recorded(job.results(TESTDEF))}
    assert {k: r["result"] for k, r in got.items()} == {
        "engine-run": "pass", "rt-valid": "pass", "cpu1-max": "pass", "cpu1-p99.99": "skip",
        "cpu1-missed": "pass", "slo-cpu1-max-lt-1ns": "fail", "slo-cpu1-missed-ge-0": "pass",
        "slo": "fail"}, job.explain()
    assert got["slo-cpu1-max-lt-1ns"]["measurement"] == got["cpu1-max"]["measurement"]
    assert got["slo-cpu1-max-lt-1ns"]["units"] == "us"
    assert (got["slo"]["measurement"], got["slo"]["units"]) == (1.0, "checks")
    assert "rtlab-lava.sh exited with 3" in job.target_lines()


def _hide_cpu1_from_logins(board: Board) -> None:
    """Put the board's SSH server (and so every later login, LAVA's too) into a cgroup v2
    cpuset that holds CPU 0 only: CPU 1 is online but outside the job's cpuset."""
    board.sh("grep -q cpuset /sys/fs/cgroup/cgroup.subtree_control || "
             "echo +cpuset >/sys/fs/cgroup/cgroup.subtree_control; "
             "mkdir -p /sys/fs/cgroup/lava-no-cpu1 && "
             "echo 0 >/sys/fs/cgroup/lava-no-cpu1/cpuset.cpus && "
             "for p in $(pidof dropbear); do "
             "echo $p >/sys/fs/cgroup/lava-no-cpu1/cgroup.procs; done", check=True)


def _show_cpu1_again(board: Board) -> None:
    board.sh("for p in $(cat /sys/fs/cgroup/lava-no-cpu1/cgroup.procs); do "
             "echo $p >/sys/fs/cgroup/cgroup.procs 2>/dev/null; done; "
             "rmdir /sys/fs/cgroup/lava-no-cpu1", check=True)


def test_cpu_outside_the_jobs_cpuset_is_a_skip_with_the_reason(
        lava_cache: Path, dut: Board, tmp_path: Path) -> None:
    """A board whose cpusets keep the job from a CPU it must measure: LAVA records the
    run and the SLO as skip (never fail), and the log says why, in the script's words."""
    _hide_cpu1_from_logins(dut)
    try:
        probe = dut.sh("grep Cpus_allowed_list /proc/self/status", check=True).stdout
        assert probe.split() == ["Cpus_allowed_list:", "0"]
        job = run_job(dut, tmp_path, {
            "ENGINE": "/tmp/bin/rtlab-probe", "CPUS": "1", "DURATION": "2s",
            "SLO": "max < 60s"}, "rtlab-latency without CPU 1")
    finally:
        _show_cpu1_again(dut)
    assert job.rc == 0, job.explain()
    assert job.result("lava", "job") == "pass", job.explain()
    got = recorded(job.results(TESTDEF))
    assert got == [{"case": "engine-run", "result": "skip"},
                   {"case": "slo", "result": "skip"}], job.explain()
    notes = [ln for ln in job.target_lines() if ln.startswith("rtlab-lava: ")]
    assert "rtlab-lava: engine exit code 4" in notes
    (why,) = [n for n in notes if n.startswith("rtlab-lava: skipped: ")]
    assert why.startswith("rtlab-lava: skipped: cannot pin the measuring thread to CPU 1 ")
    assert "the CPU is not in this process's cpuset" in why
    assert "rtlab-lava.sh exited with 4" in job.target_lines()


def test_board_without_a_cpuset_controller_measures(
        lava_cache: Path, dut: Board, tmp_path: Path) -> None:
    """The timer job needs no cpusets: on a kernel booted with cgroup_disable=cpuset its
    threads are pinned with sched_setaffinity alone and the job passes. (Runs last: it
    leaves the package's board on that command line.)"""
    append = dut.original_append + " cgroup_disable=cpuset"
    reboot = subprocess.run(dut.reboot_command, shell=True, capture_output=True, text=True,
                            env={**os.environ, "RTLAB_BOOT": "once", "RTLAB_CMDLINE": append},
                            timeout=300, check=False)
    assert reboot.returncode == 0, reboot.stderr
    dut.wait_ready()
    from rtlab.engine.builds import engine_for

    install_engine(dut, engine_for("x86_64"))
    cgroups = dut.ssh("cat", "/proc/cgroups", check=True).stdout
    (cpuset,) = [ln.split() for ln in cgroups.splitlines() if ln.startswith("cpuset")]
    assert cpuset[3] == "0"  # the controller is disabled
    assert "cpuset" not in dut.ssh("cat", "/sys/fs/cgroup/cgroup.controllers").stdout
    job = run_job(dut, tmp_path, {"ENGINE": "/tmp/bin/rtlab-probe", "CPUS": "1",
                                  "DURATION": "2s", "SLO": "max < 60s"},
                  "rtlab-latency without cpusets")
    assert job.rc == 0, job.explain()
    assert job.result("lava", "job") == "pass", job.explain()
    got = {r["case"]: r["result"] for r in job.results(TESTDEF)}
    assert got == {"engine-run": "pass", "rt-valid": "pass", "cpu1-max": "pass",
                   "cpu1-p99.99": "skip", "cpu1-missed": "pass",
                   "slo-cpu1-max-lt-60s": "pass", "slo": "pass"}, job.explain()
