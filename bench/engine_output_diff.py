#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Two builds of rtlab-probe, the same command lines: is what they print the same?

    bench/engine_output_diff.py BASE_PROBE NEW_PROBE [--only SUBSTRING] [--list] [--keep DIR]

Runs every case below with each engine in turn (base, then new, same arguments,
same file names) and compares exit code, stdout, stderr and the files a case writes
(--output, --tee, --samples), after masking only what differs from one run to the
next of the same engine. Prints one line per case and, for a case that differs, its
first differing line per stream; exits 0 when every case is equal, 1 otherwise. A
case may name a difference that is intended (a bug fixed on purpose): it is printed
as "diff" with the reason and does not fail the comparison.
Needs root (real-time scheduling; the unprivileged cases run as uid 65534 through
setpriv) and two online CPUs.

What is masked, and why (everything else is compared byte for byte):
  * header.argv[0]: the two engines live at different paths;
  * header start_realtime_ns/start_monotonic_ns, thread tids (effective.threads[].tid,
    channel tids), pids, pgids, process start times and journal time stamps: clocks
    and process ids;
  * the measured numbers of `snapshot` and `result` records (every number but
    `exit_code`, CPU numbers and the echoed set-up of checks and runs; a null that
    stands for "nothing measured"; arrays of numbers, e.g. histogram buckets, gaps,
    raw times, become one token), `cpu_use` (null until the reporter's first read,
    100 ms into a run) and the verdicts of switch's checks (timing-dependent);
  * how many snapshots a run writes (the distinct masked forms of its snapshots are
    compared, after the other records);
  * clock calibration in the header: the counter's ps_per_tick and calibration_ns,
    event's measured clock offsets and their uncertainty;
  * the pinger's ephemeral local port (effective.socket.local);
  * counts in the udp pinger's diagnosis logs (`no_replies`, `nothing_sent`);
  * `sys facts`: the task list and interrupt counts (tasks come and go);
  * a --samples file: its 16-byte header is compared, the records only as a
    whole number of 24-byte records.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
NO_MEMLOCK = ["prlimit", "--memlock=0:0"]
UDP_PORT = 47311


@dataclass
class Case:
    name: str
    argv: list[str]  # after the engine's path; "{W}" is the work directory
    stdin: str | None = None
    nobody: bool = False
    no_memlock: bool = False  # RLIMIT_MEMLOCK 0: mlockall fails too
    files: tuple[str, ...] = ()  # files in the work directory to compare
    peer: list[str] | None = None  # a second engine process started first (udp reflector)
    before: Callable[[Path], dict[str, str]] | None = None  # extra set-up; returns {key: value}
    timeout: float = 60.0
    snapshots: bool = True  # compare the snapshots' masked forms (runs long enough for one)
    # a difference that is intended (a bug fixed on purpose): reported, not a failure
    expected_diff: str | None = None


@dataclass
class Outcome:
    code: int
    streams: dict[str, list[str]] = field(default_factory=dict)


# ---- masking ---------------------------------------------------------------------

MASK = "<masked>"
NUMS = "<numbers>"

HEADER_MASKED = {"start_realtime_ns", "start_monotonic_ns", "tid", "ps_per_tick",
                 "calibration_ns", "offset_ns", "uncertainty_ns",
                 "realtime_minus_monotonic_start_ns", "realtime_minus_monotonic_end_ns",
                 "phc_minus_realtime_ns", "phc_uncertainty_ns"}
PROCESS_MASKED = {"pid", "pgid", "tid", "starttime", "exec_pid", "start_realtime_ns",
                  "end_realtime_ns", "elapsed_ns", "time_ns", "since_ns"}
CHECK_BOOLS = {"bounded", "inversion_shown", "verdict"}
KEPT = {"exit_code", "schema", "cpu", "sub_bits", "cpu_a", "cpu_b", "workers", "rounds", "n",
        "threads", "batch", "ops", "serial_permille", "work_ns", "hold_ns", "busy_ns"}


def _is_numeric(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _all_numeric(v: list[Any]) -> bool:
    return all(_is_numeric(x) or (isinstance(x, list) and _all_numeric(x)) for x in v)


def mask_measured(v: Any, key: str = "") -> Any:
    """A snapshot's or result's measured values: numbers and arrays of numbers."""
    if key == "cpu_use":
        return MASK
    if key in KEPT:
        return v
    if key in CHECK_BOOLS:
        return MASK
    if _is_numeric(v) or (v is None and key.endswith("_ns")):  # null: nothing measured
        return MASK
    if isinstance(v, list):
        if _all_numeric(v):  # also [] (nothing measured yet)
            return NUMS
        return [mask_measured(x) for x in v]
    if isinstance(v, dict):
        return {k: mask_measured(x, k) for k, x in v.items()}
    return v


def mask_keys(v: Any, keys: set[str]) -> Any:
    if isinstance(v, dict):
        return {k: (MASK if k in keys and v[k] is not None else mask_keys(x, keys))
                for k, x in v.items()}
    if isinstance(v, list):
        return [mask_keys(x, keys) for x in v]
    return v


def mask_record(rec: dict[str, Any]) -> dict[str, Any]:
    kind = rec.get("type")
    if kind == "header":
        rec = mask_keys(rec, HEADER_MASKED)
        if rec.get("argv"):
            rec["argv"][0] = "ENGINE"
        sock = rec.get("effective", {}).get("socket")
        if isinstance(sock, dict) and isinstance(sock.get("local"), str):
            sock["local"] = re.sub(r":\d+$", ":PORT", sock["local"])
        return rec
    if kind in ("snapshot", "result"):
        return mask_measured(rec)
    if kind == "log" and rec.get("code") in ("no_replies", "nothing_sent"):
        rec["msg"] = re.sub(r"\d+", "N", rec["msg"])
        return rec
    if kind == "facts":
        for k in ("tasks", "irqs"):
            if k in rec:
                rec[k] = MASK
        return rec
    return mask_keys(rec, PROCESS_MASKED)


def mask_lines(text: str, snapshots: bool = True) -> list[str]:
    """JSON lines masked and re-serialised; other lines as they are. Snapshots are
    taken out of the sequence (how many a run writes depends on its timing) and their
    distinct masked forms follow at the end, sorted (none when `snapshots` is false)."""
    out: list[str] = []
    shapes: set[str] = set()
    for line in text.splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            out.append(line)
            continue
        if not isinstance(rec, dict):
            out.append(line)
            continue
        masked = json.dumps(mask_record(rec), sort_keys=False, separators=(",", ":"))
        if rec.get("type") == "snapshot":
            shapes.add(masked)
            continue
        out.append(masked)
    return out + (["snapshots:", *sorted(shapes)] if snapshots and shapes else [])


def samples_summary(data: bytes) -> list[str]:
    return [data[:16].hex(), f"records*24: {len(data) >= 16 and (len(data) - 16) % 24 == 0}"]


# ---- the cases -------------------------------------------------------------------

def _sleeper(work: Path) -> dict[str, str]:
    """A process the `sys apply` case may change (affinity, scheduling)."""
    p = subprocess.Popen(["sleep", "30"], start_new_session=True)
    (work / "sleeper.pid").write_text(str(p.pid))
    return {"PID": str(p.pid)}


def probe_names(engine: str) -> list[str]:
    """The probes of an engine, from its `list --json`."""
    out = subprocess.run([engine, "list", "--json"], capture_output=True, text=True,
                         check=True).stdout
    return [p["name"] for p in json.loads(out)["probes"]]


# texts that issue 25 made one: the shared options are declared once, and every probe
# explains a run that is not real-time in the same words
ONE_WORDING = ("issue 25: one wording per advice (mlockall, /dev/cpu_dma_latency, pinning, "
               "RT priority) and one help text per shared option (--allow-non-rt)")


def cases(probes: list[str]) -> list[Case]:
    c: list[Case] = []
    add = c.append
    # the command line of the engine itself
    for argv in ([], ["--help"], ["-h"], ["help"], ["--version"], ["--version", "--json"],
                 ["--version", "--bogus"], ["list"], ["list", "--json"], ["list", "--bogus"],
                 ["no-such-probe"], ["--bogus", "timer"], ["load", "--help"],
                 ["exec", "--help"], ["exec"]):
        add(Case("cli " + " ".join(argv), argv,
                 expected_diff=ONE_WORDING if argv == ["list", "--json"] else None))
    for p in probes:
        add(Case(f"{p} --help", [p, "--help"],
                 expected_diff=ONE_WORDING if p in ("noise", "interfere") else None))
        add(Case(f"{p} unknown option", [p, "--bogus"]))
        add(Case(f"{p} --cpus 99", [p, "--cpus", "99"]))
    usage = [
        ["timer", "--policy", "other", "--priority", "5"],
        ["timer", "--duration", "1s", "--loops", "3"],
        ["timer", "--policy", "deadline", "--dl-runtime", "2ms", "--interval", "1ms"],
        ["timer", "--interval", "5ns"], ["timer", "--housekeeping", "99"],
        ["timer", "--threshold", "abc"],
        ["noise", "--policy", "deadline"], ["noise", "--policy", "fifo", "--priority", "0"],
        ["noise", "--gap-threshold", "10us", "--record-gaps-above", "5us"],
        ["interfere", "--mode", "pairs", "--cpus", "0"], ["interfere", "--policy", "deadline"],
        ["udp"], ["udp", "ping"], ["udp", "bogus", "--session", "s"],
        ["udp", "reflect", "--session", "x"],
        ["udp", "reflect", "--bind", "0.0.0.0:7000", "--session", "x"],
        ["udp", "ping", "--peer", "nowhere", "--session", "x"],
        ["udp", "reflect", "--bind", "127.0.0.1:7000", "--session", "x", "--pace", "busy"],
        ["udp", "reflect", "--bind", "127.0.0.1:7000", "--session", "x", "--ifname", "lo"],
        ["udp", "ping", "--peer", "127.0.0.1:7000", "--session", "x", "--path", "xdp",
         "--recv", "recvmmsg"],
        ["udp", "ping", "--peer", "[::1]:7000", "--session", "x", "--path", "xdp"],
        ["udp", "ping", "--peer", "127.0.0.1:7000", "--session", "x", "--shared-clock",
         "--priority", "100"],
        ["event", "--source", "gpio"], ["event", "--device", "/dev/null"],
        ["event", "--source", "net"], ["event", "--policy", "deadline"],
        ["event", "--policy", "other", "--priority", "3"],
        ["switch", "--mechanism", "bogus"], ["switch", "--mechanism", "futex,"],
        ["switch", "--pi-hold", "10ms", "--pi-busy", "20ms"],
        ["switch", "--duration", "1s", "--loops", "5"],
        ["switch", "--placement", "cross", "--waker-cpu", "1", "--cpus", "1"],
        ["overhead", "--duration", "1s", "--loops", "10"],
        ["overhead", "--waker-cpu", "1", "--cpus", "1"],
    ]
    for argv in usage:
        add(Case("usage " + " ".join(argv), argv))

    # sys: only what reads
    add(Case("sys", ["sys"]))
    add(Case("sys --help", ["sys", "--help"]))
    add(Case("sys bogus", ["sys", "bogus"]))
    add(Case("sys facts", ["sys", "facts"]))
    add(Case("sys preempt", ["sys", "preempt"]))
    add(Case("sys preempt --root missing", ["sys", "preempt", "--root", "{W}/missing"]))
    add(Case("sys status missing", ["sys", "status", "--journal", "{W}/none.journal"]))
    add(Case("sys restore missing", ["sys", "restore", "--journal", "{W}/none.journal"]))
    add(Case("sys journals empty", ["sys", "journals", "--dir", "{W}"]))
    add(Case("sys lockinfo missing", ["sys", "lockinfo", "--lock", "{W}/none.lock"]))
    add(Case("sys snapshot", ["sys", "snapshot"],
             stdin="/proc/sys/kernel/ostype\n/sys/devices/system/cpu/online\n"
                   "/proc/sys/kernel/sched_rt_*\n/nonexistent/file\n"))
    add(Case("sys snapshot bad pattern", ["sys", "snapshot"], stdin="relative/path\n"))
    # sys apply + status + restore on a process of our own (a sleeper)
    ops = ('{"op":"affinity","tid":{PID},"cpus":[0]}\n'
           '{"op":"sched","tid":{PID},"policy":"fifo","priority":3}\n'
           '{"op":"write","path":"/proc/sys/kernel/bogus_rtlab","value":"1"}\n'
           '{"op":"nope"}\n')
    add(Case("sys apply+restore", ["sh", "-c",
                                   "{E} sys apply --journal {W}/a.journal --detach && "
                                   "{E} sys status --journal {W}/a.journal && "
                                   "{E} sys journals --dir {W} && "
                                   "{E} sys restore --journal {W}/a.journal; echo rc=$?"],
             stdin=ops, before=_sleeper))

    # measuring runs (root)
    W = "{W}"
    runs = [
        ("timer 1s", ["timer", "--cpus", "0", "--duration", "1s", "--snapshot-interval",
                      "200ms"], ()),
        ("timer rr samples output", ["timer", "--cpus", "0,1", "--duration", "1s", "--policy",
                                     "rr", "--priority", "50", "--interval", "500us",
                                     "--snapshot-interval", "200ms", "--window", "100ms",
                                     "--samples", f"{W}/s.bin", "--output", f"{W}/o.jsonl"],
         ("s.bin", "o.jsonl")),
        ("timer loops realtime dma", ["timer", "--cpus", "1", "--loops", "200", "--clock",
                                      "realtime", "--dma-latency", "0", "--housekeeping", "0"],
         ()),
        ("timer threshold", ["timer", "--cpus", "0", "--stop-threshold", "1ns",
                             "--duration", "1s"], ()),
        ("timer deadline", ["timer", "--cpus", "1", "--policy", "deadline", "--duration", "1s"],
         ()),
        ("timer other no-mlock", ["timer", "--cpus", "0", "--policy", "other",
                                  "--duration", "500ms", "--no-mlock"], ()),
        ("timer tee", ["--tee", f"{W}/tee.jsonl", "timer", "--cpus", "1", "--duration",
                       "300ms"], ("tee.jsonl",)),
        ("timer output unwritable", ["timer", "--output", f"{W}/no/such/dir"], ()),
        ("timer samples unwritable", ["timer", "--samples", f"{W}/no/such/dir"], ()),
        ("noise 1s", ["noise", "--cpus", "1", "--duration", "1s", "--snapshot-interval",
                      "200ms"], ()),
        ("noise fifo", ["noise", "--cpus", "1", "--duration", "1s", "--policy", "fifo",
                        "--snapshot-interval", "200ms"], ()),
        ("noise monotonic threshold", ["noise", "--cpus", "1", "--duration", "1s",
                                       "--counter", "monotonic", "--stop-threshold", "100ns",
                                       "--max-gaps", "3"], ()),
        ("interfere amdahl", ["interfere", "--mode", "amdahl", "--cpus", "0,1", "--repeats",
                              "2", "--run-length", "1ms"], ()),
        ("interfere pairs", ["interfere", "--mode", "pairs", "--cpus", "0,1", "--repeats", "2",
                             "--run-length", "1ms", "--working-set", "64"], ()),
        ("interfere sharing", ["interfere", "--mode", "sharing", "--cpus", "0,1", "--ops",
                               "2000", "--batch", "100"], ()),
        ("switch all", ["switch", "--duration", "1s", "--snapshot-interval", "200ms",
                        "--pi-rounds", "1", "--order-rounds",
                        "1", "--pi-busy", "4ms", "--pi-hold", "1ms"], ()),
        ("switch both loops", ["switch", "--placement", "both", "--mechanism",
                               "futex,pipe,signal,mq", "--loops", "50", "--no-order-check",
                               "--no-pi-check", "--no-busy", "--interval", "200us"], ()),
        ("switch cross strict", ["switch", "--placement", "cross", "--mechanism", "condvar",
                                 "--duration", "300ms", "--check-strict", "--pi-rounds", "1",
                                 "--order-rounds", "1", "--pi-busy", "4ms", "--pi-hold",
                                 "1ms"], ()),
        ("overhead loops", ["overhead", "--loops", "2000"], ()),
        ("overhead test-duration", ["overhead", "--test-duration", "10ms", "--cpus", "0"], ()),
        ("overhead one cpu", ["overhead", "--loops", "500", "--cpus", "1", "--waker-cpu", "0",
                              "--duration", "50ms"], ()),
        ("event soft", ["event", "--duration", "1s", "--cpus", "1", "--snapshot-interval",
                        "200ms"], ()),
        ("event soft count", ["event", "--count", "100", "--rate", "5000", "--gen-cpu", "0",
                              "--policy", "rr", "--priority", "20"], ()),
        ("event net", ["event", "--source", "net", "--bind", f"127.0.0.1:{UDP_PORT + 9}",
                       "--duration", "300ms", "--snapshot-interval", "100ms"], ()),
        ("event gpio missing", ["event", "--source", "gpio", "--device", "/dev/gpiochip99"],
         ()),
        ("event pps missing", ["event", "--source", "pps", "--device", "/dev/null"], ()),
        ("udp ping unanswered", ["udp", "ping", "--peer", f"127.0.0.1:{UDP_PORT + 7}",
                                 "--session", "s", "--count", "3", "--timeout", "10ms"], ()),
        ("udp ping hardware refused", ["udp", "ping", "--peer", f"127.0.0.1:{UDP_PORT + 7}",
                                       "--session", "s", "--count", "3", "--timestamps",
                                       "hardware"], ()),
        ("udp reflect bind unavailable", ["udp", "reflect", "--bind", "10.254.254.254:7000",
                                          "--session", "s", "--duration", "100ms"], ()),
    ]
    for name, argv, files in runs:
        add(Case(name, argv, files=files))
    # udp ping-pong pairs: a reflector (compared too) and a pinger
    pairs = [
        ("udp ping-pong", [], []),
        ("udp ping-pong no stamps epoll", ["--timestamps", "none", "--wait", "epoll"],
         ["--wait", "epoll"]),
        ("udp ping-pong mmsg busy-poll", ["--recv", "recvmmsg", "--busy-poll", "50",
                                          "--shared-clock", "--size", "200"],
         ["--recv", "recvmmsg", "--dma-latency", "10"]),
        ("udp ping-pong sw-rx pace busy", ["--timestamps", "software-rx", "--pace", "busy",
                                           "--cpus", "1", "--policy", "other"], ["--cpus", "0"]),
    ]
    for i, (name, ping_extra, refl_extra) in enumerate(pairs):
        port = UDP_PORT + i
        refl = ["udp", "reflect", "--bind", f"127.0.0.1:{port}", "--session", "t",
                "--duration", "2s", "--output", f"{W}/reflect.jsonl", *refl_extra]
        ping = ["udp", "ping", "--peer", f"127.0.0.1:{port}", "--session", "t", "--count",
                "300", "--rate", "2000", *ping_extra]
        add(Case(name, ping, peer=refl, files=("reflect.jsonl",)))
    # without privileges: skipped, and measured anyway with --allow-non-rt
    unpriv = [
        ["timer", "--cpus", "0", "--duration", "300ms"],
        ["noise", "--cpus", "1", "--duration", "300ms", "--policy", "fifo"],
        ["noise", "--cpus", "1", "--duration", "300ms"],
        ["interfere", "--mode", "amdahl", "--cpus", "0,1", "--repeats", "1", "--run-length",
         "1ms", "--policy", "rr"],
        ["switch", "--duration", "300ms", "--mechanism", "futex", "--no-pi-check",
         "--no-order-check"],
        ["overhead", "--loops", "200"],
        ["event", "--duration", "300ms", "--cpus", "1"],
        ["udp", "ping", "--peer", f"127.0.0.1:{UDP_PORT + 7}", "--session", "s", "--count",
         "2", "--timeout", "10ms", "--cpus", "1"],
        ["udp", "ping", "--peer", f"127.0.0.1:{UDP_PORT + 7}", "--session", "s", "--count",
         "2", "--timeout", "10ms", "--dma-latency", "5"],
        ["timer", "--cpus", "0", "--duration", "300ms", "--dma-latency", "0", "--no-mlock",
         "--policy", "other"],
    ]
    # engines up to a48ab27: the interfere coordinator had pthread's default 8 MiB stack, which
    # mlockall(MCL_FUTURE) must lock: over an unprivileged RLIMIT_MEMLOCK (8 MiB) the thread
    # could not be created (exit 1 after the header); it now has the probe's 256 KiB
    coordinator_stack = ("the interfere coordinator's stack is the probe's 256 KiB, no longer "
                         "pthread's default 8 MiB that an unprivileged mlockall cannot lock")
    for argv in unpriv:
        # the words of the skip (and of the no_rt log) are the shared ones since issue 25
        words = ONE_WORDING if argv[0] != "timer" else None
        add(Case("unprivileged " + " ".join(argv), argv, nobody=True, expected_diff=words))
        add(Case("unprivileged --allow-non-rt " + " ".join(argv), [*argv, "--allow-non-rt"],
                 nobody=True,
                 expected_diff=coordinator_stack if argv[0] == "interfere" else words))
    for argv in unpriv[:8]:
        words = ONE_WORDING if argv[0] != "timer" else None
        add(Case("unprivileged no memlock " + " ".join(argv), argv, nobody=True,
                 no_memlock=True, expected_diff=words))
        add(Case("unprivileged no memlock --allow-non-rt " + " ".join(argv),
                 [*argv, "--allow-non-rt"], nobody=True, no_memlock=True, expected_diff=words))
    add(Case("exec true", ["exec", "--", "/bin/true"]))
    add(Case("exec missing", ["exec", "--", "/no/such/tool"]))
    return c


# ---- running ---------------------------------------------------------------------

def expand(argv: list[str], engine: str, work: Path, subst: dict[str, str]) -> list[str]:
    out = []
    for a in argv:
        a = a.replace("{W}", str(work)).replace("{E}", engine)
        for k, v in subst.items():
            a = a.replace("{" + k + "}", v)
        out.append(a)
    return out


def run_case(case: Case, engine: str, work: Path) -> Outcome:
    for f in work.iterdir():
        if f.is_dir():
            shutil.rmtree(f)
        else:
            f.unlink()
    os.chmod(work, 0o777)
    subst = case.before(work) if case.before else {}
    peer = None
    try:
        if case.peer:
            peer = subprocess.Popen([engine, *expand(case.peer, engine, work, subst)],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            time.sleep(0.3)  # the reflector binds its socket
        argv = expand(case.argv, engine, work, subst)
        if not argv or argv[0] != "sh":
            argv = [engine, *argv]
        if case.nobody:
            argv = NOBODY + argv
        if case.no_memlock:
            argv = NO_MEMLOCK + argv
        stdin = expand([case.stdin], engine, work, subst)[0] if case.stdin else None
        try:
            p = subprocess.run(argv, input=stdin.encode() if stdin else b"",
                               capture_output=True, timeout=case.timeout, cwd=work)
        except subprocess.TimeoutExpired:
            return Outcome(-1, {"timeout": [f"no end within {case.timeout:.0f} s"]})
        if peer:
            peer.wait(timeout=30)
        out = Outcome(p.returncode)
        out.streams["stdout"] = mask_lines(p.stdout.decode(errors="replace"), case.snapshots)
        out.streams["stderr"] = mask_lines(p.stderr.decode(errors="replace"))
        if peer:
            out.streams["peer.exit"] = [str(peer.returncode)]
            out.streams["peer.stderr"] = mask_lines(peer.stderr.read().decode(errors="replace"))
        for name in case.files:
            path = work / name
            if not path.exists():
                out.streams[name] = ["<missing>"]
            elif name.endswith(".bin"):
                out.streams[name] = samples_summary(path.read_bytes())
            else:
                out.streams[name] = mask_lines(path.read_text(errors="replace"), case.snapshots)
        return out
    finally:
        if peer and peer.poll() is None:
            peer.kill()
            peer.wait()
        pid_file = work / "sleeper.pid"
        if pid_file.exists():
            with contextlib.suppress(OSError):
                os.killpg(int(pid_file.read_text()), 9)


def first_difference(a: Outcome, b: Outcome) -> list[str]:
    diffs = []
    if a.code != b.code:
        diffs.append(f"exit code: base {a.code}, new {b.code}")
    for name in sorted(set(a.streams) | set(b.streams)):
        la, lb = a.streams.get(name, []), b.streams.get(name, [])
        for i in range(max(len(la), len(lb))):
            x = la[i] if i < len(la) else "<end>"
            y = lb[i] if i < len(lb) else "<end>"
            if x != y:
                diffs.append(f"{name} line {i + 1}:\n      base: {x[:2000]}\n"
                             f"      new:  {y[:2000]}")
                break
    return diffs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("base", nargs="?", help="the reference rtlab-probe")
    ap.add_argument("new", nargs="?", help="the rtlab-probe to compare with it")
    ap.add_argument("--only", default=None, help="run the cases whose name contains this")
    ap.add_argument("--list", action="store_true", help="list the cases and exit")
    ap.add_argument("--keep", default=None, help="work directory to use (kept)")
    a = ap.parse_args()
    all_cases = [c for c in cases(probe_names(a.base or a.new or "rtlab-probe"))
                 if not a.only or a.only in c.name]
    if a.list:
        for c in all_cases:
            print(c.name)
        return 0
    if not a.base or not a.new:
        ap.error("give BASE_PROBE and NEW_PROBE")
    if os.geteuid() != 0:
        print("run as root: the measuring cases need real-time scheduling", file=sys.stderr)
        return 4
    base, new = os.path.abspath(a.base), os.path.abspath(a.new)
    work = Path(a.keep or tempfile.mkdtemp(prefix="rtlab-engine-diff-"))
    work.mkdir(parents=True, exist_ok=True)
    failed = expected_diffs = 0
    try:
        for case in all_cases:
            ra = run_case(case, base, work)
            rb = run_case(case, new, work)
            diffs = first_difference(ra, rb)
            expected = bool(diffs) and case.expected_diff is not None
            tag = "ok  " if not diffs else "diff" if expected else "DIFF"
            print(f"{tag} {case.name}", flush=True)
            if expected:
                print(f"    expected: {case.expected_diff}")
            for d in diffs:
                print("    " + d)
            failed += bool(diffs) and not expected
            expected_diffs += expected
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
    print(f"{len(all_cases) - failed - expected_diffs} of {len(all_cases)} cases equal, "
          f"{expected_diffs} with an expected difference, {failed} different")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
