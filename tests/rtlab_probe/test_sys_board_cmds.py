# SPDX-License-Identifier: MIT
"""`rtlab-probe sys snapshot | journals | lockinfo` and `sys apply --lock`: what the host
reads off a board that has no Python (docs/sys-protocol.md). The real binary, end to end."""

from __future__ import annotations

import base64
import errno
import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .helpers import read_line_raw, run_probe

TIMEOUT = 60  # generous: a loaded 2-vCPU VM


def _records(text: str) -> list[dict[str, Any]]:
    assert text == "" or text.endswith("\n"), text[-200:]
    return [json.loads(line) for line in text.splitlines()]


def snapshot(probe: str, patterns: list[str], *args: str,
             prefix: list[str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*(prefix or []), probe, "sys", "snapshot", *args],
                          input="".join(p + "\n" for p in patterns), capture_output=True,
                          text=True, timeout=TIMEOUT, check=False, cwd="/")


def snap_ok(probe: str, patterns: list[str], *args: str) -> tuple[
        dict[str, dict[str, Any]], dict[str, Any]]:
    """Records by path (errors under "error:" + path) and the snapshot_done line."""
    r = snapshot(probe, patterns, *args)
    assert r.returncode == 0, r.stderr
    recs = _records(r.stdout)
    assert recs and recs[-1]["type"] == "snapshot_done"
    done = recs[-1]
    assert done["schema"] == 1 and done["complete"] is True
    by_path: dict[str, dict[str, Any]] = {}
    for rec in recs[:-1]:
        assert rec["type"] in ("file", "link", "dir", "error"), rec
        key = ("error:" if rec["type"] == "error" else "") + rec["path"]
        by_path[key] = rec
    assert done["files"] == sum(1 for x in recs if x["type"] in ("file", "link", "dir"))
    assert done["errors"] == sum(1 for x in recs if x["type"] == "error")
    assert done["bytes"] == sum(x["size"] for x in recs if x["type"] == "file")
    return by_path, done


def content(rec: dict[str, Any]) -> bytes:
    assert rec["type"] == "file"
    if "text" in rec:
        assert "base64" not in rec
        data = rec["text"].encode()
    else:
        data = base64.b64decode(rec["base64"], validate=True)
    assert len(data) == rec["size"]
    return data


def _nobody(cmd: list[str]) -> list[str]:
    return ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *cmd]


def _as_nobody(probe: str) -> list[str]:
    """The prefix that runs the probe as an unprivileged user (nothing when we are one)."""
    if os.geteuid() != 0:
        return []
    r = subprocess.run(_nobody([probe, "--version"]), capture_output=True, text=True,
                       timeout=TIMEOUT, check=False, cwd="/")
    if r.returncode != 0:
        pytest.skip("nobody cannot run the probe binary: " + r.stderr.strip())
    return _nobody([])


# ---- snapshot ----------------------------------------------------------------------

def test_snapshot_literal_procfs_and_sysfs_paths(probe_bin: str) -> None:
    """procfs/sysfs report size 0 or 4096: the engine reads to EOF."""
    paths = ["/proc/cmdline", "/proc/sys/kernel/ostype", "/proc/cpuinfo",
             "/sys/devices/system/cpu/online"]
    by_path, done = snap_ok(probe_bin, paths)
    assert done["errors"] == 0
    for p in ("/proc/cmdline", "/proc/sys/kernel/ostype", "/sys/devices/system/cpu/online"):
        assert content(by_path[p]) == Path(p).read_bytes(), p
    cpuinfo = content(by_path["/proc/cpuinfo"]).decode()
    assert os.stat("/proc/cpuinfo").st_size == 0 and len(cpuinfo) > 0
    assert cpuinfo.splitlines()[0] == Path("/proc/cpuinfo").read_text().splitlines()[0]
    assert "truncated" not in by_path["/proc/cpuinfo"]


def test_snapshot_glob_per_component(probe_bin: str) -> None:
    by_path, done = snap_ok(probe_bin, ["/proc/[0-9]*/comm"])
    assert all(re.fullmatch(r"/proc/[0-9]+/comm", p) for p in by_path if
               not p.startswith("error:")), list(by_path)[:5]
    assert "/proc/1/comm" in by_path
    mine = by_path[f"/proc/{os.getpid()}/comm"]
    assert content(mine) == Path(f"/proc/{os.getpid()}/comm").read_bytes()
    assert done["files"] >= 2


def test_snapshot_tree_of_files_links_dirs(probe_bin: str, tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("quiet splash é\n")
    (tmp_path / "empty").write_bytes(b"")
    binary = bytes(range(256)) * 3
    (tmp_path / "config.gz").write_bytes(binary)
    (tmp_path / "nul").write_bytes(b"a\0b")
    (tmp_path / "latin1").write_bytes("caf\xe9".encode("latin-1"))
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "x").write_text("1")
    (tmp_path / "d" / ".hidden").write_text("2")
    (tmp_path / "d" / "sub").mkdir()
    (tmp_path / "link").symlink_to("a.txt")
    (tmp_path / "dangling").symlink_to("/nonexistent/target")
    t = str(tmp_path)
    by_path, done = snap_ok(probe_bin, [
        f"{t}/a.txt", f"{t}/empty", f"{t}/config.gz", f"{t}/nul", f"{t}/latin1",
        f"{t}/d/", f"{t}/link", f"{t}/dangling", f"{t}/missing", f"{t}/none*",
        f"{t}/d", f"{t}/d/?",
    ])
    assert by_path[f"{t}/a.txt"]["text"] == "quiet splash é\n"
    assert by_path[f"{t}/a.txt"]["size"] == len("quiet splash é\n".encode())
    assert by_path[f"{t}/empty"] == {"type": "file", "path": f"{t}/empty", "size": 0, "text": ""}
    for name, data in (("config.gz", binary), ("nul", b"a\0b"), ("latin1", b"caf\xe9")):
        rec = by_path[f"{t}/{name}"]
        assert "base64" in rec and content(rec) == data, name
    assert by_path[f"{t}/d"] == {"type": "dir", "path": f"{t}/d",
                                 "entries": [".hidden", "sub", "x"]}
    assert by_path[f"{t}/link"] == {"type": "link", "path": f"{t}/link", "target": "a.txt"}
    assert by_path[f"{t}/dangling"]["target"] == "/nonexistent/target"
    assert by_path[f"error:{t}/missing"] == {"type": "error", "path": f"{t}/missing",
                                             "errno": errno.ENOENT, "error": "ENOENT"}
    assert by_path[f"error:{t}/d"]["error"] == "EISDIR"  # a directory needs a trailing /
    assert by_path[f"{t}/d/x"]["text"] == "1"  # the glob ? matches x, not .hidden
    assert f"{t}/d/.hidden" not in by_path
    assert not any("none" in p for p in by_path)  # a glob that matches nothing: no line
    assert done["errors"] == 2


def test_snapshot_per_file_cap(probe_bin: str, tmp_path: Path) -> None:
    (tmp_path / "big").write_text("x" * 10_000)
    (tmp_path / "exact").write_text("y" * 1000)
    (tmp_path / "bigbin").write_bytes(b"\0" * 5000)
    by_path, done = snap_ok(probe_bin, [f"{tmp_path}/big", f"{tmp_path}/exact",
                                        f"{tmp_path}/bigbin"], "--max-file", "1000")
    big = by_path[f"{tmp_path}/big"]
    assert big["size"] == 1000 and big["text"] == "x" * 1000 and big["truncated"] is True
    exact = by_path[f"{tmp_path}/exact"]
    assert exact["size"] == 1000 and "truncated" not in exact
    assert content(by_path[f"{tmp_path}/bigbin"]) == b"\0" * 1000
    assert by_path[f"{tmp_path}/bigbin"]["truncated"] is True
    assert done["bytes"] == 3000


def test_snapshot_total_cap_stops_with_an_error(probe_bin: str, tmp_path: Path) -> None:
    for name in ("a", "b", "c"):
        (tmp_path / name).write_text(name * 600)
    r = snapshot(probe_bin, [f"{tmp_path}/[abc]"], "--max-total", "1000")
    assert r.returncode == 1
    assert "--max-total" in r.stderr and len(r.stderr.splitlines()) == 1
    recs = _records(r.stdout)
    assert [x["type"] for x in recs] == ["file", "error", "snapshot_done"]
    assert recs[1]["path"] == f"{tmp_path}/b" and recs[1]["error"] == "EFBIG"
    assert recs[-1]["complete"] is False and recs[-1]["bytes"] == 600


@pytest.mark.parametrize("bad", ["proc/cmdline", "/proc/../etc/shadow", "/proc/..",
                                 "../x", "/a/../../b/"])
def test_snapshot_refuses_bad_patterns(probe_bin: str, bad: str) -> None:
    r = snapshot(probe_bin, ["/proc/cmdline", bad])
    assert r.returncode == 2
    assert r.stdout == ""
    assert len(r.stderr.splitlines()) == 1 and "line 2" in r.stderr, r.stderr


def test_snapshot_usage(probe_bin: str) -> None:
    r = run_probe(probe_bin, "sys", "snapshot", "--max-file", "0", input="")
    assert r.returncode == 2 and "--max-file" in r.stderr
    r = run_probe(probe_bin, "sys", "snapshot", "--journal", "/x", input="")
    assert r.returncode == 2 and "not an option of snapshot" in r.stderr
    r = run_probe(probe_bin, "sys", "snapshot", input="\n\n")
    assert r.returncode == 0
    assert _records(r.stdout) == [{"type": "snapshot_done", "schema": 1, "files": 0,
                                   "errors": 0, "bytes": 0, "complete": True}]


def test_snapshot_never_reads_consuming_files(probe_bin: str) -> None:
    """/proc/kmsg would hand the kernel log to us (and take it from syslog)."""
    by_path, _ = snap_ok(probe_bin, ["/proc/kmsg"])
    assert by_path["error:/proc/kmsg"]["error"] == "EPERM"


def test_snapshot_as_non_root_reports_eacces(probe_bin: str) -> None:
    prefix = _as_nobody(probe_bin)
    if os.access("/proc/1/environ", os.R_OK) and not prefix:
        pytest.skip("this user can read /proc/1/environ")
    r = snapshot(probe_bin, ["/proc/1/environ", "/proc/1/comm", "/proc/1/fd/*"],
                 prefix=prefix)
    assert r.returncode == 0, r.stderr
    recs = _records(r.stdout)
    by = {(x["type"], x["path"]): x for x in recs[:-1]}
    assert by[("error", "/proc/1/environ")]["error"] == "EACCES"
    assert by[("error", "/proc/1/fd")]["error"] == "EACCES"  # the glob could not list it
    assert ("file", "/proc/1/comm") in by
    assert recs[-1]["errors"] == 2


# ---- journals ----------------------------------------------------------------------

STALE = [
    {"type": "journal", "schema": 1, "pid": 999999, "starttime": 1, "detached": True,
     "engine_version": "0.0.0", "time_ns": 1},
    {"schema": 1, "seq": 1, "op": "write", "path": "/proc/sys/kernel/sched_rt_runtime_us",
     "value": "950000", "old": "950000", "time_ns": 2},
]


def _write_stale(path: Path, torn: bool = True) -> str:
    text = "".join(json.dumps(x, separators=(",", ":")) + "\n" for x in STALE)
    path.write_text(text + ('{"schema":1,"seq":2,"op":"wri' if torn else ""))
    return text


def journals(probe: str, directory: Path | str) -> list[dict[str, Any]]:
    r = run_probe(probe, "sys", "journals", "--dir", str(directory), timeout=TIMEOUT)
    assert r.returncode == 0, r.stderr
    recs = _records(r.stdout)
    assert recs[-1]["type"] == "journals_done"
    return recs


def test_journals_missing_dir_is_empty(probe_bin: str, tmp_path: Path) -> None:
    recs = journals(probe_bin, tmp_path / "nope")
    assert recs == [{"type": "journals_done", "schema": 1, "dir": str(tmp_path / "nope"),
                     "count": 0, "errors": 0}]


def test_journals_stale_in_name_order(probe_bin: str, tmp_path: Path) -> None:
    text = _write_stale(tmp_path / "b.journal")
    _write_stale(tmp_path / "a.journal", torn=False)
    (tmp_path / "notes.txt").write_text("not a journal\n")
    (tmp_path / "dir.journal").mkdir()
    recs = journals(probe_bin, tmp_path)
    kinds = [(x.get("type"), x["path"] if x.get("type") == "status" else None) for x in recs]
    assert kinds == [
        ("status", str(tmp_path / "a.journal")), ("journal", None), (None, None),
        ("status", str(tmp_path / "b.journal")), ("journal", None), (None, None),
        ("journals_done", None),
    ]
    assert recs[3]["held"] is False and recs[3]["schema"] == 1
    # the complete lines verbatim, the torn one left out
    assert "".join(json.dumps(x, separators=(",", ":")) + "\n" for x in recs[4:6]) == text
    assert recs[-1]["count"] == 2


@pytest.fixture
def applier(probe_bin: str, tmp_path: Path) -> Iterator[Any]:
    """start(journal, *args) -> (Popen, ready record); every applier started is released."""
    procs: list[subprocess.Popen] = []

    def start(journal: Path, *args: str) -> tuple[subprocess.Popen, dict[str, Any]]:
        p = subprocess.Popen([probe_bin, "sys", "apply", "--journal", str(journal), *args],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, start_new_session=True)
        procs.append(p)
        line = read_line_raw(p)
        assert line, p.communicate(timeout=TIMEOUT)
        ready = json.loads(line)
        assert ready["type"] == "ready"
        return p, ready

    yield start
    for p in procs:
        if p.poll() is None:
            assert p.stdin is not None
            p.stdin.close()  # EOF: restore and exit
            try:
                p.wait(timeout=TIMEOUT)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for f in (p.stdout, p.stderr):
            if f is not None:
                f.close()


def _release(p: subprocess.Popen) -> str:
    assert p.stdin is not None and p.stdout is not None
    p.stdin.close()  # EOF: the applier restores, releases and exits
    out = p.stdout.read()
    assert p.wait(timeout=TIMEOUT) == 0
    return out.decode()


def test_journals_held_and_stale(probe_bin: str, tmp_path: Path, applier: Any,
                                 require_root: None) -> None:
    held = tmp_path / "a-live.journal"
    p, ready = applier(held)
    _write_stale(tmp_path / "b-stale.journal")
    recs = journals(probe_bin, tmp_path)
    status = [x for x in recs if x.get("type") == "status"]
    assert [(s["path"], s["held"]) for s in status] == [
        (str(held), True), (str(tmp_path / "b-stale.journal"), False)]
    header = recs[1]
    assert header["type"] == "journal" and header["pid"] == ready["pid"] == p.pid
    assert recs[-1]["count"] == 2
    _release(p)
    recs = journals(probe_bin, tmp_path)
    assert [x["path"] for x in recs if x.get("type") == "status"] == [
        str(tmp_path / "b-stale.journal")]


# ---- the target lock ---------------------------------------------------------------

def lockinfo(probe: str, lock: Path) -> dict[str, Any]:
    r = run_probe(probe, "sys", "lockinfo", "--lock", str(lock), timeout=TIMEOUT)
    assert r.returncode == 0, r.stderr
    recs = _records(r.stdout)
    assert len(recs) == 1 and recs[0]["type"] == "lock" and recs[0]["schema"] == 1
    return recs[0]


def test_lockinfo_without_a_lock_file(probe_bin: str, tmp_path: Path) -> None:
    assert lockinfo(probe_bin, tmp_path / "target.lock") == {
        "type": "lock", "schema": 1, "lock": str(tmp_path / "target.lock"), "held": False,
        "pid": None, "owner": None, "since_ns": None}


def test_second_owner_is_refused_exit_5(probe_bin: str, tmp_path: Path, applier: Any,
                                        require_root: None) -> None:
    lock = tmp_path / "rtlab" / "target.lock"  # its directory is created like the journal's
    first, ready = applier(tmp_path / "one.journal", "--lock", str(lock),
                           "--owner", "host-a run 1")
    assert (lock.stat().st_mode & 0o777) == 0o644
    info = lockinfo(probe_bin, lock)
    assert info["held"] is True and info["owner"] == "host-a run 1"
    assert info["pid"] == ready["pid"] and info["since_ns"] > 0
    header = json.loads((tmp_path / "one.journal").read_text().splitlines()[0])
    assert header["type"] == "journal" and header["owner"] == "host-a run 1"

    second = tmp_path / "two.journal"
    args = ["sys", "apply", "--journal", str(second), "--lock", str(lock), "--owner", "host-b"]
    r = run_probe(probe_bin, *args, input="", timeout=TIMEOUT)
    assert r.returncode == 5, (r.stdout, r.stderr)
    assert r.stdout == ""
    assert len(r.stderr.splitlines()) == 1
    assert f"the target is in use by host-a run 1 (pid {ready['pid']}) since " in r.stderr
    assert not second.exists()  # nothing journaled, nothing changed
    assert lockinfo(probe_bin, lock)["owner"] == "host-a run 1"  # the holder's line stays

    out = _release(first)
    assert _records(out)[-1]["type"] == "released"
    assert lockinfo(probe_bin, lock) == {
        "type": "lock", "schema": 1, "lock": str(lock), "held": False,
        "pid": None, "owner": None, "since_ns": None}
    r = run_probe(probe_bin, *args, input="", timeout=TIMEOUT)
    assert r.returncode == 0, r.stderr
    recs = _records(r.stdout)
    assert recs[0]["type"] == "ready" and recs[-1]["type"] == "released"
    assert not second.exists()


def test_lock_taken_after_a_killed_holder(probe_bin: str, tmp_path: Path, applier: Any,
                                          require_root: None) -> None:
    """kill -9 of the holder frees the lock (the kernel drops it); its line is stale."""
    lock = tmp_path / "target.lock"
    first, ready = applier(tmp_path / "one.journal", "--lock", str(lock), "--owner", "gone")
    first.kill()
    first.wait(timeout=TIMEOUT)
    info = lockinfo(probe_bin, lock)
    assert info["held"] is False  # the last holder's line stays, for the record
    assert info["owner"] == "gone" and info["pid"] == ready["pid"]
    second, _ = applier(tmp_path / "two.journal", "--lock", str(lock), "--owner", "next")
    assert lockinfo(probe_bin, lock)["owner"] == "next"
    _release(second)
    r = run_probe(probe_bin, "sys", "restore", "--journal", str(tmp_path / "one.journal"),
                  timeout=TIMEOUT)
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize(("args", "message"), [
    (["apply", "--journal", "/tmp/x.journal", "--lock", "/tmp/t.lock"], "go together"),
    (["apply", "--journal", "/tmp/x.journal", "--owner", "me"], "go together"),
    (["apply", "--journal", "/tmp/x.journal", "--lock", "t.lock", "--owner", "me"],
     "absolute"),
    (["apply", "--journal", "/tmp/x.journal", "--lock", "/tmp/t.lock", "--owner", "a\tb"],
     "--owner"),
    (["lockinfo"], "--lock FILE is required"),
    (["lockinfo", "--lock", "/tmp/t.lock", "--owner", "me"], "not an option of lockinfo"),
    (["status", "--journal", "/tmp/x.journal", "--lock", "/tmp/t.lock"], "not an option"),
    (["journals", "--journal", "/tmp/x.journal"], "not an option of journals"),
])
def test_lock_usage_errors(probe_bin: str, args: list[str], message: str) -> None:
    r = run_probe(probe_bin, "sys", *args, input="", timeout=TIMEOUT)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert message in r.stderr and len(r.stderr.splitlines()) == 1


# ---- facts and preempt without root ------------------------------------------------

def test_facts_and_preempt_as_non_root(probe_bin: str) -> None:
    """Everything `facts` reads is world-readable; `preempt` loses only the live
    debugfs value (preempt_live_error), the config still decides."""
    prefix = _as_nobody(probe_bin)
    r = subprocess.run([*prefix, probe_bin, "sys", "facts"], capture_output=True, text=True,
                       timeout=TIMEOUT, check=False, cwd="/")
    assert r.returncode == 0, r.stderr
    facts = json.loads(r.stdout)
    assert facts["type"] == "facts" and facts["cpus_online"]
    init = next(t for t in facts["tasks"] if t["tid"] == 1)
    assert init["affinity"] and init["cgroups"] and init["starttime"] > 0
    assert facts["irqs"] == [] or any(i["affinity"] is not None for i in facts["irqs"])
    assert facts["sysctl"]["kernel.sched_rt_period_us"] is not None
    r = subprocess.run([*prefix, probe_bin, "sys", "preempt"], capture_output=True, text=True,
                       timeout=TIMEOUT, check=False, cwd="/")
    assert r.returncode == 0, r.stderr
    pre = json.loads(r.stdout)
    assert pre["type"] == "preempt" and pre["version"]
    if pre["live"] is None:
        assert pre["preempt_live_error"]
