# SPDX-License-Identifier: MIT
"""A fake rtlab-probe for host tests (run with the Python interpreter).

It speaks the JSON Lines contract (docs/engine-output.md, schema 1) with
synthetic latencies, and misbehaves on request. Environment:

FAKE_MODE       normal | truncate | corrupt | schema | crash | skip | usage |
                hang | ignore_int | threshold | error | silent_fail | lie
FAKE_LIE        with mode lie, how the final result contradicts itself:
                negative_samples | hist_total | huge_sum | negative_minmax | window_max
FAKE_PERIOD     wall seconds between snapshots (default 0.02)
FAKE_CRASH_AFTER  snapshots before crash/truncate/hang (default 2)
FAKE_SAMPLES    samples per channel per snapshot (default 500)
FAKE_SEED       random seed (default 1)
FAKE_ARGV_OUT   if set, the argv is written to this file

The histogram index math is written out here independently of rtlab's own.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sys
import time

SUB = 7
B = 1 << SUB
UNITS = {"ns": 1, "us": 10**3, "ms": 10**6, "s": 10**9, "m": 60 * 10**9, "h": 3600 * 10**9}


def hindex(v: int) -> int:
    if v < B:
        return v
    e = v.bit_length() - 1
    return B + (e - SUB) * B + ((v >> (e - SUB)) - B)


def dur(text: str) -> int:
    for unit in ("ns", "us", "ms", "s", "m", "h"):
        if text.endswith(unit) and text[: -len(unit)].isdigit():
            if unit in ("s", "m") and text.endswith(("ns", "us", "ms")):
                continue
            return int(text[: -len(unit)]) * UNITS[unit]
    raise SystemExit(f"fake: bad duration {text}")


def cpulist(text: str) -> list[int]:
    out: list[int] = []
    for part in text.split(","):
        a, _, b = part.partition("-")
        out.extend(range(int(a), int(b or a) + 1))
    return out


def emit(rec: dict) -> None:
    sys.stdout.write(json.dumps(rec, separators=(",", ":")) + "\n")
    sys.stdout.flush()


class Chan:
    def __init__(self, cpu: int) -> None:
        self.cpu = cpu
        self.samples = 0
        self.missed = 0
        self.min = None
        self.max = None
        self.sum = 0
        self.max_at = None
        self.hist: dict[int, int] = {}
        self.windows: list[list[int]] = []

    def add(self, v: int, at: int) -> None:
        self.samples += 1
        self.sum += v
        self.min = v if self.min is None else min(self.min, v)
        if self.max is None or v > self.max:
            self.max, self.max_at = v, at
        i = hindex(v)
        self.hist[i] = self.hist.get(i, 0) + 1

    def state(self, with_windows: bool = True) -> dict:
        rec = {
            "name": f"cpu{self.cpu}", "cpu": self.cpu, "tid": 1000 + self.cpu,
            "samples": self.samples, "missed": self.missed,
            "min_ns": self.min, "max_ns": self.max, "sum_ns": self.sum, "max_at_ns": self.max_at,
            "hist": {"layout": "loglin", "sub_bits": SUB,
                     "buckets": [[i, self.hist[i]] for i in sorted(self.hist)]},
            "windows": self.windows if with_windows else [], "windows_lost": 0, "ring_lost": 0,
        }
        self.windows = []
        return rec


def lie(ch: dict, how: str) -> None:
    """Make one channel's final state contradict itself (validation tests)."""
    if how == "negative_samples":
        ch["samples"] = -5
    elif how == "hist_total":
        ch["samples"] = ch["samples"] * 500
    elif how == "huge_sum":
        ch["sum_ns"] = 10**40
    elif how == "negative_minmax":
        ch["min_ns"], ch["max_ns"] = -5000, -1
    elif how == "window_max":
        ch["windows"] = [[10_000, ch["max_ns"] * 2, 1]]
    else:
        raise SystemExit(f"fake: unknown FAKE_LIE {how}")


def main() -> int:
    argv = sys.argv[1:]
    if argv[:2] == ["sys", "preempt"]:  # the doctor asks (rtlab/system/doctor/kernel.py)
        emit({"type": "preempt", "schema": 1, "root": "/", "preempt": "full",
              "preempt_source": "uname -v", "preempt_dynamic": False,
              "preempt_live_error": None, "version": "#1 SMP PREEMPT fake", "realtime": None,
              "live": None, "config": None})
        return 0
    if os.environ.get("FAKE_ARGV_OUT"):
        with open(os.environ["FAKE_ARGV_OUT"], "w") as f:
            json.dump(argv, f)
    mode = os.environ.get("FAKE_MODE", "normal")
    period = float(os.environ.get("FAKE_PERIOD", "0.02"))
    crash_after = int(os.environ.get("FAKE_CRASH_AFTER", "2"))
    per_snap = int(os.environ.get("FAKE_SAMPLES", "500"))
    rng = random.Random(int(os.environ.get("FAKE_SEED", "1")))

    if mode == "usage":
        print("rtlab-probe: --cpus: CPU 7 is not online; online CPUs are 0-1", file=sys.stderr)
        return 2
    if mode == "skip":
        print("rtlab-probe: cannot set SCHED_FIFO priority 99: Operation not permitted "
              "(run as root or grant CAP_SYS_NICE)", file=sys.stderr)
        return 4
    if mode == "silent_fail":
        print("rtlab-probe: out of memory", file=sys.stderr)
        return 1

    opts: dict[str, str] = {}
    it = iter(argv[1:])
    for a in it:
        if a.startswith("--") and a[2:] not in ("allow-non-rt", "mlock"):
            opts[a[2:]] = next(it)
    duration = dur(opts.get("duration", "1s"))
    snap_ns = dur(opts.get("snapshot-interval", "1s"))
    interval = dur(opts.get("interval", "1ms"))
    stop = opts.get("stop-threshold", opts.get("threshold"))  # an old spelling too
    threshold = dur(stop) if stop is not None else None
    cpus = cpulist(opts.get("cpus", "0"))

    stop = {"sig": None}

    def on_signal(signum: int, _frame: object) -> None:
        stop["sig"] = signum

    if mode in ("ignore_int", "hang"):
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    else:
        signal.signal(signal.SIGINT, on_signal)
        signal.signal(signal.SIGTERM, on_signal)

    emit({
        "type": "header", "schema": 99 if mode == "schema" else 1, "engine_version": "0.0.0-fake",
        "probe": argv[0] if argv else "timer", "argv": ["rtlab-probe", *argv],
        "start_realtime_ns": time.time_ns(), "start_monotonic_ns": time.monotonic_ns(),
        "config": {"cpus": cpus, "policy": opts.get("policy", "fifo"),
                   "priority": int(opts.get("priority", "99")), "interval_ns": interval,
                   "duration_ns": duration, "snapshot_interval_ns": snap_ns,
                   "window_ns": snap_ns, "threshold_ns": threshold,
                   "allow_non_rt": "--allow-non-rt" in argv},
        "effective": {"rt_valid": "--allow-non-rt" not in argv,
                      "mlock": {"requested": True, "locked": True, "error": None}},
        "system": {"hostname": "fakehost", "sysname": "Linux", "release": "6.1.0-fake",
                   "preempt": "full", "preempt_source": "uname -v", "cpus_online": [0, 1]},
    })
    if mode == "schema":
        return 0
    emit({"type": "log", "schema": 1, "level": "info", "code": "fake", "msg": "fake engine"})

    chans = [Chan(c) for c in cpus]
    nsnap = max(1, -(-duration // snap_ns))
    status, code, hit = "completed", 0, None
    for seq in range(1, nsnap + 1):
        time.sleep(period)
        for ch in chans:
            wmax = 0
            for k in range(per_snap):
                at = (seq - 1) * snap_ns + k * (snap_ns // per_snap)
                v = int(rng.lognormvariate(9.6, 0.35))  # ~15 us
                if rng.random() < 0.002:
                    v = rng.randint(1_000_000, 3_000_000)  # a VM stall
                ch.add(v, at)
                wmax = max(wmax, v)
                if threshold is not None and v > threshold and hit is None:
                    hit = {"channel": f"cpu{ch.cpu}", "cpu": ch.cpu, "latency_ns": v, "at_ns": at}
            ch.windows.append([seq - 1, wmax, per_snap])
        if mode == "threshold" or hit is not None:
            status, code = "threshold", 3
            hit = hit or {"channel": f"cpu{chans[0].cpu}", "cpu": chans[0].cpu,
                          "latency_ns": chans[0].max, "at_ns": chans[0].max_at}
            break
        if mode == "crash" and seq > crash_after:
            os.kill(os.getpid(), signal.SIGSEGV)
        if mode == "truncate" and seq > crash_after:
            line = json.dumps({"type": "snapshot", "schema": 1, "seq": seq,
                               "elapsed_ns": seq * snap_ns,
                               "channels": [c.state() for c in chans]})
            sys.stdout.write(line[: len(line) // 2])
            sys.stdout.flush()
            os.kill(os.getpid(), signal.SIGKILL)
        if mode == "hang" and seq > crash_after:
            while True:
                time.sleep(3600)
        emit({"type": "snapshot", "schema": 1, "seq": seq, "elapsed_ns": seq * snap_ns,
              "channels": [c.state() for c in chans]})
        if mode == "corrupt" and seq == 1:
            sys.stdout.write('{"type": "snapshot", "schema": 1, "channels": [{"na\n')
            sys.stdout.write("garbage that is not json\n")
            sys.stdout.write("[1, 2, 3]\n")
            sys.stdout.write('{"type": "snapshot"}\n')
            sys.stdout.flush()
        if stop["sig"] is not None:
            status, code = "interrupted", 130
            break
    if mode == "error":
        status, code = "error", 1
    final = [c.state() for c in chans]
    if mode == "lie":
        lie(final[0], os.environ.get("FAKE_LIE", "negative_samples"))
    emit({"type": "result", "schema": 1, "status": status, "exit_code": code,
          "elapsed_ns": seq * snap_ns, "end_realtime_ns": time.time_ns(),
          "channels": final, "threshold_hit": hit,
          "samples_file": None, "error": "fake failure" if mode == "error" else None})
    return code


if __name__ == "__main__":
    sys.exit(main())
