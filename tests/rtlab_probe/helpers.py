# SPDX-License-Identifier: MIT
"""Helpers for the end-to-end tests of rtlab-probe: run it, parse and validate its output."""

from __future__ import annotations

import json
import os
import resource
import signal
import struct
import subprocess
import time
from collections.abc import Callable, Iterator
from functools import lru_cache
from pathlib import Path
from typing import Any, TypeVar

import jsonschema
import pytest

ROOT = Path(__file__).resolve().parents[2]
SCHEMA_PATH = ROOT / "docs" / "schema" / "engine-v1.schema.json"

SUB_BITS = 7
B = 1 << SUB_BITS


@lru_cache(maxsize=1)
def validator() -> jsonschema.Draft202012Validator:
    schema = json.loads(SCHEMA_PATH.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def parse_lines(text: str) -> list[dict[str, Any]]:
    """Parse JSON Lines; an unterminated last line (killed writer) is dropped."""
    lines = text.split("\n")
    complete = lines[:-1]  # the part after the last '\n' is unterminated (or empty)
    return [json.loads(line) for line in complete if line]


def validate_all(records: list[dict[str, Any]]) -> None:
    v = validator()
    for rec in records:
        errors = sorted(v.iter_errors(rec), key=lambda e: list(e.path))
        assert not errors, f"{rec.get('type')}: {errors[0].message[:300]}"


def check_order(records: list[dict[str, Any]], complete: bool = True) -> None:
    """header first, result last (when complete), snapshot seq 1, 2, 3, ..."""
    assert records and records[0]["type"] == "header"
    assert sum(r["type"] == "header" for r in records) == 1
    seqs = [r["seq"] for r in records if r["type"] == "snapshot"]
    assert seqs == list(range(1, len(seqs) + 1))
    results = [i for i, r in enumerate(records) if r["type"] == "result"]
    if complete:
        assert results == [len(records) - 1]
    else:
        assert results == []


def run_probe(
    probe: str, *args: str, timeout: float = 30, **kw: Any
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [probe, *args], capture_output=True, text=True, timeout=timeout, check=False, **kw
    )


def probe_list(probe: str) -> list[dict[str, Any]]:
    """The probes of `rtlab-probe list --json`, with their option tables."""
    r = run_probe(probe, "list", "--json")
    assert r.returncode == 0, r.stderr
    probes: list[dict[str, Any]] = json.loads(r.stdout)["probes"]
    return probes


def option_of(probe: dict[str, Any], name: str) -> dict[str, Any] | None:
    """The option `name` of one probe of probe_list, or None."""
    return next((o for o in probe["options"] if o["name"] == name), None)


# the usual RLIMIT_MEMLOCK of an unprivileged user (8 MiB): what mlockall(MCL_FUTURE) may lock
USER_MEMLOCK = 8 << 20


def _user_memlock() -> None:
    resource.setrlimit(resource.RLIMIT_MEMLOCK, (USER_MEMLOCK, USER_MEMLOCK))


def run_as_nobody(probe: str, *args: str, timeout: float = 30) -> subprocess.CompletedProcess:
    """The probe run as the unprivileged user nobody, with a user's RLIMIT_MEMLOCK (memory
    is still locked: every thread must have a stack that fits). Skips the test when
    nobody cannot run the binary."""
    if not os.access(probe, os.X_OK) or os.stat(probe).st_mode & 0o001 == 0:
        pytest.skip("probe binary not executable by others")
    r = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", probe,
                        *args], capture_output=True, text=True, timeout=timeout, check=False,
                       cwd="/", preexec_fn=_user_memlock)
    if r.returncode == 126 or "Permission denied" in r.stderr:
        pytest.skip("nobody cannot reach the probe binary: " + r.stderr.strip())
    return r


def read_line_raw(p: subprocess.Popen) -> str:
    """One line of p's stdout, read straight from the pipe byte by byte ('' at its end).

    `p.stdout.readline()` may pull later lines into the file object's buffer, and
    `communicate()` (with stdout and stderr piped) reads the raw pipe and never sees
    them: lines after the first would be lost, at random."""
    assert p.stdout is not None
    fd, buf = p.stdout.fileno(), bytearray()
    while not buf.endswith(b"\n"):
        b = os.read(fd, 1)
        if not b:
            break
        buf += b
    return buf.decode()


def proc_stat(pid: int) -> list[str] | None:
    """Fields of /proc/PID/stat after the comm (index 0 = state), None when gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return text[text.rindex(")") + 2:].split()


def wait_until(cond: Callable[[], bool], timeout: float) -> bool:
    """Poll cond every 50 ms until it holds (True) or timeout seconds passed (False)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.05)
    return False


class EngineRun:
    """A running `rtlab-probe [--stdin-lifeline] COMMAND ARGS...` (exec, load) and
    the JSON record of its first stdout line, `rec`, read before the constructor
    returns."""

    def __init__(self, probe: str, command: str, *args: str, lifeline: bool = False,
                 new_session: bool = False) -> None:
        argv = [probe, *(["--stdin-lifeline"] if lifeline else []), command, *args]
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, start_new_session=new_session)
        line = read_line_raw(self.p)
        assert line, self.p.stderr.read().decode() if self.p.stderr else ""
        self.rec: dict[str, Any] = json.loads(line)

    def finish(self, timeout: float = 120) -> tuple[int, dict[str, Any] | None, str, str]:
        """Wait for the end: exit code, last record (None: none), stdout, stderr."""
        out, err = self.p.communicate(timeout=timeout)
        recs = parse_lines(out.decode())
        return self.p.returncode, (recs[-1] if recs else None), out.decode(), err.decode()

    def close(self) -> None:
        """Kill the command if it still runs (subclasses: and what it started)."""
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()


def alive(pid: int) -> bool:
    """Is the process there and not a zombie?"""
    st = proc_stat(pid)
    return st is not None and st[0] != "Z"


def cpu_ticks(pid: int) -> int:
    """utime + stime of a process (0 when gone)."""
    st = proc_stat(pid)
    return int(st[11]) + int(st[12]) if st else 0


class LoadRun(EngineRun):
    """A running `rtlab-probe load`, its `load` record (`rec`) and its workers' pids;
    closing it kills the workers still there too."""

    def __init__(self, probe: str, *args: str, lifeline: bool = False,
                 new_session: bool = False) -> None:
        super().__init__(probe, "load", *args, lifeline=lifeline, new_session=new_session)
        self.workers = [w["pid"] for w in self.rec["workers"]]

    def wait_all_ran(self, timeout: float) -> None:
        """Until every worker has been on a CPU (so its loop count can be > 0)."""
        wait_until(lambda: all(cpu_ticks(w) > 0 for w in self.workers), timeout)

    def snapshot_where(self, cond: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        """Read records until a load_snapshot for which cond(rec) holds."""
        while True:
            line = read_line_raw(self.p)
            assert line, "the load ended before the snapshot came"
            rec = json.loads(line)
            assert rec["type"] == "load_snapshot", rec
            if cond(rec):
                return rec

    def close(self) -> None:
        super().close()
        for w in self.workers:
            if alive(w):
                os.kill(w, signal.SIGKILL)


R = TypeVar("R", bound=EngineRun)


def started_runs(cls: Callable[..., R], probe: str) -> Iterator[Callable[..., R]]:
    """The body of a fixture: yields start(*args, **kw) -> cls(probe, *args, **kw);
    every run it started is closed afterwards."""
    started: list[R] = []

    def start(*args: str, **kw: Any) -> R:
        run = cls(probe, *args, **kw)
        started.append(run)
        return run

    try:
        yield start
    finally:
        for run in started:
            run.close()


def bucket_lo(index: int) -> int:
    if index < B:
        return index
    g, m = divmod(index - B, B)
    return (B + m) << g


def hist_count(channel: dict[str, Any]) -> int:
    return sum(c for _, c in channel["hist"]["buckets"])


def count_at_least(channel: dict[str, Any], value_ns: int) -> int:
    """Samples whose bucket lies wholly at or above value_ns."""
    return sum(c for i, c in channel["hist"]["buckets"] if bucket_lo(i) >= value_ns)


def percentile_ns(channel: dict[str, Any], q: float) -> int:
    """Lower bound of the bucket holding the q-quantile."""
    total = hist_count(channel)
    rank = max(1, min(total, round(q * total)))
    seen = 0
    for i, c in channel["hist"]["buckets"]:
        seen += c
        if seen >= rank:
            return bucket_lo(i)
    raise AssertionError("empty histogram")


def read_samples(path: Path) -> list[tuple[int, int, int]]:
    """(channel_index, at_ns, value_ns) records of a --samples file."""
    data = path.read_bytes()
    magic, version, size = struct.unpack_from("<8sII", data, 0)
    assert magic == b"RTLABSMP" and version == 1 and size == 24
    body = data[16:]
    assert len(body) % 24 == 0
    return [(c, at, v) for c, _res, at, v in struct.iter_unpack("<IIQQ", body)]
