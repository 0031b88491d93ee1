#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""rtlab `udp` ping-pong against `sockperf ping-pong`, side by side (root).

Both tools run over the same paths, created here and deleted afterwards:
  veth      two network namespaces joined by a veth pair (10.231.0.1 <-> 10.231.0.2)
  loopback  127.0.0.1 inside one namespace
with the same placement (taskset), message size and duration, in interleaved A/B
rounds. sockperf's round trips come from its --full-log CSV (never its human text),
rtlab's from its JSON Lines histogram. Prints median, p99, p99.9 and max per tool and
the ratio rtlab/sockperf (< 1: rtlab is faster).

With --xdp, a third contender runs on the veth path in the same rotation: rtlab with
both ends on its AF_XDP path (`--path xdp`, with --xdp-mode), reported beside the
socket path (ratio xdp/socket) and sockperf.

With --rate HZ both tools ping at that rate (rtlab `--rate`, sockperf `--mps`) instead
of back to back. Pacing then matters: sockperf's client spins between sends (it makes no
system call but sendto and recvfrom), rtlab's sleeps by default (`--pace sleep`,
clock_nanosleep to an absolute deadline) and spins with `--pace busy`. At a rate both
rtlab pacings run by default ("rtlab" sleeping, "rtlab-busy" spinning; --pace selects),
and every run also records what the CPUs did: the pinging process's CPU time per second
of run ("cpu %", from wait4) and the idle-state entries per second of each CPU
(cpuidle sysfs: how often a vCPU halted) — the cause of any difference at a rate.

What each number includes: both are the full round trip on the pinger (send -> reply
returned to the application). rtlab's `rtt` is CLOCK_MONOTONIC read just before send()
-> read just after the receive returned. sockperf's --full-log `rtt` column is its txTime
(before sendto) -> rxTime (after recvfrom); sockperf's own summary prints half of that
as "latency" unless --full-rtt is given, and leaves out its first 400 ms (warm-up).

  sudo bench/udp_vs_sockperf.py --probe build/engine/rtlab-probe --duration 5 --rounds 3
  sudo bench/udp_vs_sockperf.py --rate 1000 --paths veth --server-cpu any --client-cpu any
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from benchlib import channel_percentile, default_probe, lacks

QS = (0.5, 0.99, 0.999)
TRACING = Path("/sys/kernel/tracing")
# the xdp path sends with sendto (the TX kick) and waits in poll/ppoll (ready count > 0)
OBS_EVENTS = ("sys_enter_sendto", "sys_exit_recvfrom", "sys_exit_recvmsg", "sys_exit_poll",
              "sys_exit_ppoll", "sys_exit_epoll_wait")
ERRQ_EVENTS = ("sys_enter_recvmsg",)  # --errqueue: rtlab's reads of TX timestamps
MSG_ERRQUEUE = 0x2000
_LINE = re.compile(r"^\s*.+?-(\d+)\s+\[\d+\]\s+\S+\s+(\d+): (.*)$")
_ERRQ = re.compile(r"^sys_recvmsg\(.*flags: (0x[0-9a-f]+)\)")
_EXIT = re.compile(r"^sys_(?:recvfrom|recvmsg|poll|ppoll|epoll_wait) -> (0x[0-9a-f]+|-?\d+)")
PORT_RTLAB, PORT_SOCKPERF = 7601, 7602
CPUIDLE = Path("/sys/devices/system/cpu")
# rtlab's split channels shown beside the round trip at a rate (where the time went)
SPLIT = ("wakeup", "peer.wakeup", "stack")


def idle_entries() -> dict[int, int]:
    """Per CPU: entries into idle states other than POLL (a vCPU halting), cumulative."""
    out: dict[int, int] = {}
    for cpu in sorted(CPUIDLE.glob("cpu[0-9]*")):
        n = 0
        for st in cpu.glob("cpuidle/state*"):
            with contextlib.suppress(OSError):
                if (st / "name").read_text().strip() != "POLL":
                    n += int((st / "usage").read_text())
        out[int(cpu.name[3:])] = n
    return out


class CpuUse:
    """What the CPUs did during one pinger run: the pinger's CPU time (its rusage, from
    wait4 of the process subprocess.run waited for) and the halts per CPU, per second."""

    def __enter__(self) -> CpuUse:
        self._ru = resource.getrusage(resource.RUSAGE_CHILDREN)
        self._idle = idle_entries()
        self._t = time.monotonic()
        return self

    def __exit__(self, *exc: object) -> None:
        dt = time.monotonic() - self._t
        ru = resource.getrusage(resource.RUSAGE_CHILDREN)
        idle = idle_entries()
        self.cpu_pct = 100 * (ru.ru_utime + ru.ru_stime - self._ru.ru_utime
                              - self._ru.ru_stime) / dt
        self.halts = {c: (idle[c] - self._idle.get(c, 0)) / dt for c in idle}

    def record(self, out: dict) -> None:
        out["cpu_pct"] = self.cpu_pct
        out["halts_per_s"] = self.halts


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


@contextmanager
def namespaces(kind: str) -> Iterator[tuple[str, str, str]]:
    """Yield (server_ns, client_ns, server_addr)."""
    tag = os.getpid() % 100000
    a, b = f"rtlb-{tag}-a", f"rtlb-{tag}-b"
    made = [a] if kind == "loopback" else [a, b]
    try:
        for ns in made:
            _ip("netns", "add", ns)
            _ip("-n", ns, "link", "set", "lo", "up")
        if kind == "loopback":
            yield a, a, "127.0.0.1"
            return
        _ip("link", "add", "rtlb-a", "netns", a, "type", "veth", "peer", "name", "rtlb-b",
            "netns", b)
        for ns, dev, addr in ((a, "rtlb-a", "10.231.0.1"), (b, "rtlb-b", "10.231.0.2")):
            _ip("-n", ns, "addr", "add", f"{addr}/24", "dev", dev)
            _ip("-n", ns, "link", "set", dev, "up")
        yield a, b, "10.231.0.1"
    finally:
        for ns in made:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, check=False)


def quantiles(values: list[float]) -> dict[str, float]:
    v = sorted(values)
    out = {f"p{q * 100:g}": v[min(len(v) - 1, int(q * len(v)))] for q in QS}
    out["max"] = v[-1]
    out["n"] = len(v)
    return out


def hist_quantiles(ch: dict) -> dict[str, float]:
    """p50/p99/p99.9 (µs) by rtlab's percentile rule, exact max, sample count."""
    out: dict[str, float] = {}
    for q in QS:
        v = channel_percentile(ch, q * 100)
        out[f"p{q * 100:g}"] = float("nan") if v is None else v / 1000
    out["max"] = ch["max_ns"] / 1000
    out["n"] = ch["samples"]
    return out


def in_ns(ns: str, cpu: str, *cmd: str) -> list[str]:
    pin = [] if cpu == "any" else ["taskset", "-c", cpu]
    return ["ip", "netns", "exec", ns, *pin, *cmd]


def sockperf_cmd(a: argparse.Namespace, *args: str) -> list[str]:
    return [*(["chrt", "-f", "98"] if a.sched == "fifo" else []), "sockperf", *args]


class Observer:
    """Round trips of the pinging process as ftrace sees its syscalls (see --observer).

    Uses a trace instance of its own (instances/rtlab-udpbench-PID): its buffer, clock,
    events and pid filter are private, so other users of tracefs neither disturb it nor
    are disturbed; the instance is removed at the end."""

    def __init__(self, errqueue: bool = False) -> None:
        self.events = OBS_EVENTS + (ERRQ_EVENTS if errqueue else ())
        self.errq: list[float] = []  # µs per error-queue read of the last stop()
        if not (TRACING / "events/syscalls").is_dir():
            subprocess.run(["mount", "-t", "tracefs", "nodev", str(TRACING)],
                           capture_output=True, check=False)
        if not all((TRACING / "events/syscalls" / e).is_dir() for e in self.events):
            raise SystemExit("--observer needs tracefs with syscall events "
                             "(CONFIG_FTRACE_SYSCALLS)")
        self._dir = TRACING / "instances" / f"rtlab-udpbench-{os.getpid()}"

    def _w(self, name: str, value: str) -> None:
        (self._dir / name).write_text(value)

    def __enter__(self) -> Observer:
        self._dir.mkdir()
        self._w("tracing_on", "0")
        self._w("trace_clock", "x86-tsc")
        self._w("buffer_size_kb", "65536")
        self._w("options/event-fork", "1")
        for e in self.events:
            self._w(f"events/syscalls/{e}/enable", "1")
        return self

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(OSError):
            self._w("tracing_on", "0")
            for e in self.events:
                self._w(f"events/syscalls/{e}/enable", "0")
        self._dir.rmdir()  # the instance and its buffer go away

    def wrap(self, cmd: list[str]) -> list[str]:
        """cmd, started by a shell that first puts itself into set_event_pid."""
        return ["sh", "-c", f'echo $$ > {self._dir}/set_event_pid && exec "$@"', "sh", *cmd]

    def start(self) -> None:
        self._w("set_event_pid", "")
        self._w("trace", "")
        self._w("tracing_on", "1")
        self._mark = (time.monotonic_ns(), "rtlab-cal0")
        self._w("trace_marker", "rtlab-cal0")

    def stop(self) -> list[float]:
        """Round trips in µs from the trace since start()."""
        end = time.monotonic_ns()
        self._w("trace_marker", "rtlab-cal1")
        self._w("tracing_on", "0")
        text = (self._dir / "trace").read_text()
        cal: dict[str, int] = {}
        pending: dict[int, int] = {}
        errq: dict[int, int] = {}
        ticks: list[int] = []
        eticks: list[int] = []
        for line in text.splitlines():
            m = _LINE.match(line)
            if not m:
                continue
            tid, ts, rest = int(m.group(1)), int(m.group(2)), m.group(3)
            if rest.startswith("tracing_mark_write: "):
                cal[rest.split(": ", 1)[1].strip()] = ts
            elif rest.startswith("sys_sendto("):
                # a send whose reply needed no waiting syscall (the xdp path finds it
                # in its RX ring) is replaced by the next send: never mispaired
                pending[tid] = ts
            elif (e := _ERRQ.match(rest)) and int(e.group(1), 16) & MSG_ERRQUEUE:
                errq[tid] = ts
            elif tid in errq and rest.startswith("sys_recvmsg ->"):
                eticks.append(ts - errq.pop(tid))
            elif tid in pending and (x := _EXIT.match(rest)):
                ret = int(x.group(1), 0)
                if 0 < ret < 1 << 31:
                    ticks.append(ts - pending.pop(tid))
        if "rtlab-cal0" not in cal or "rtlab-cal1" not in cal:
            raise SystemExit("--observer: the calibration markers are missing from the trace")
        per_us = (cal["rtlab-cal1"] - cal["rtlab-cal0"]) / ((end - self._mark[0]) / 1000)
        self.errq = [t / per_us for t in eticks]
        return [t / per_us for t in ticks]


def run_rtlab(probe: str, srv: str, cli: str, addr: str, a: argparse.Namespace,
              obs: Observer | None = None, xdp: bool = False, pace: str = "sleep") -> dict:
    sched = ["--policy", "fifo", "--priority", "98"] if a.sched == "fifo" else \
        ["--policy", "other", "--priority", "0", "--no-mlock"]
    sched += a.extra
    if xdp:
        sched += ["--path", "xdp", "--xdp-mode", a.xdp_mode]
    refl = subprocess.Popen(in_ns(srv, a.server_cpu, probe, "udp", "reflect", "--bind",
                                  f"{addr}:{PORT_RTLAB}", "--session", "bench", "--duration",
                                  f"{a.duration + 3}s",
                                  # back-to-back pings exceed the reflector's safety limit
                                  # (100k/s by default; sockperf's server has none): a
                                  # refused ping costs the pinger a whole --timeout
                                  "--max-rate", "10000000", "--burst", "4096", *sched),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    time.sleep(0.3)
    cmd = in_ns(cli, a.client_cpu, probe, "udp", "ping", "--peer", f"{addr}:{PORT_RTLAB}",
                "--session", "bench", "--rate", str(a.rate), "--size", str(a.size),
                "--duration", f"{a.duration}s", *(["--pace", pace] if a.rate else []), *sched)
    try:
        if obs:
            obs.start()
        with CpuUse() as use:
            r = subprocess.run(obs.wrap(cmd) if obs else cmd, capture_output=True, text=True,
                               timeout=a.duration + 30, check=False)
        seen = obs.stop() if obs else None
        if r.returncode != 0:
            raise SystemExit(f"rtlab-probe udp ping failed ({r.returncode}): "
                             f"{r.stderr.strip()}")
    finally:
        refl.terminate()
        refl.wait(timeout=10)
    recs = [json.loads(x) for x in r.stdout.splitlines() if x]
    res = recs[-1]
    rtt = next(c for c in res["channels"] if c["name"] == "rtt")
    out = hist_quantiles(rtt)
    use.record(out)
    for c in res["channels"]:
        if c["name"] in SPLIT and c["samples"]:
            out["split_" + c["name"]] = channel_percentile(c, 50) / 1000
    if xdp:
        out["attach"] = recs[0]["effective"]["xdp"]["attach"]
    if seen is not None:
        out["observed"] = quantiles(seen)
        if obs is not None and obs.errq:
            out["errqueue"] = quantiles(obs.errq)
            out["errqueue"]["per_rtt"] = len(obs.errq) / max(1, len(seen))
    return out


def run_sockperf(srv: str, cli: str, addr: str, a: argparse.Namespace,
                 obs: Observer | None = None) -> dict:
    server = subprocess.Popen(in_ns(srv, a.server_cpu, *sockperf_cmd(a, "server", "-i", addr,
                                                                      "-p", str(PORT_SOCKPERF))),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.3)
    with tempfile.TemporaryDirectory() as td:
        log = Path(td) / "full.csv"
        cmd = in_ns(cli, a.client_cpu, *sockperf_cmd(
            a, "ping-pong", "-i", addr, "-p", str(PORT_SOCKPERF), "-m", str(a.size), "--time",
            str(a.duration), *([f"--mps={a.rate}"] if a.rate else []), "--full-rtt",
            "--full-log", str(log)))
        try:
            if obs:
                obs.start()
            with CpuUse() as use:
                subprocess.run(obs.wrap(cmd) if obs else cmd, capture_output=True,
                               timeout=a.duration + 30, check=True)
            seen = obs.stop() if obs else None
        finally:
            server.terminate()
            server.wait(timeout=10)
        rtts: list[float] = []
        with log.open() as f:
            for row in csv.reader(f):
                if len(row) == 4 and row[0].strip().isdigit():
                    rtts.append(float(row[3]))
    out = quantiles(rtts)
    use.record(out)
    if seen is not None:
        out["observed"] = quantiles(seen)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--probe", default=default_probe())
    ap.add_argument("--duration", type=int, default=5, help="seconds per run")
    ap.add_argument("--rounds", type=int, default=3, help="A/B rounds per path")
    ap.add_argument("--size", type=int, default=64, help="message bytes (>= 64)")
    ap.add_argument("--server-cpu", default="1", help="CPU of both servers, or any "
                    "(not pinned)")
    ap.add_argument("--client-cpu", default="1", help="CPU of both pingers, or any")
    ap.add_argument("--rate", type=int, default=0,
                    help="pings per second of both tools (rtlab --rate, sockperf --mps); "
                    "default 0: back to back")
    ap.add_argument("--pace", default="sleep,busy",
                    help="with --rate: rtlab's pacings to run, each a contender beside "
                    "sockperf: sleep (rtlab), busy (rtlab-busy); default both")
    ap.add_argument("--paths", default="veth,loopback")
    ap.add_argument("--sched", choices=("other", "fifo"), default="other",
                    help="both tools' both ends as SCHED_OTHER, or SCHED_FIFO 98 (sockperf "
                    "under chrt; rtlab with its own --policy, which also locks memory)")
    ap.add_argument("--json", action="store_true", help="print the raw numbers as JSON too")
    ap.add_argument("--observer", action="store_true",
                    help="also time both pingers' round trips alike from ftrace syscall "
                    "events (entry of sendto -> exit of the receive)")
    ap.add_argument("--errqueue", action="store_true",
                    help="with --observer: also time rtlab's pinger reading TX timestamps "
                    "off the socket error queue (recvmsg MSG_ERRQUEUE, after the reply)")
    ap.add_argument("--rtlab-opt", dest="extra", action="append", default=[], metavar="ARG",
                    help="extra argument for both rtlab ends, e.g. --rtlab-opt=--timestamps "
                    "--rtlab-opt=none (repeatable)")
    ap.add_argument("--xdp", action="store_true",
                    help="veth path: also rtlab with both ends on --path xdp")
    ap.add_argument("--xdp-mode", choices=("auto", "native", "generic"), default="auto",
                    help="the XDP hook of --xdp (default: auto, native where possible)")
    a = ap.parse_args()
    if lacks(root="needs root (network namespaces)",
             tools={"sockperf": "sockperf is not installed"}):
        return 4
    allres: dict[str, dict[str, list[dict]]] = {}
    if a.errqueue and not a.observer:
        ap.error("--errqueue needs --observer")
    for cpu in (a.server_cpu, a.client_cpu):
        if cpu != "any" and not cpu.isdigit():
            ap.error(f"--server-cpu/--client-cpu: a CPU number or any, not {cpu!r}")
    a.paces = [p for p in a.pace.split(",") if p] if a.rate else ["sleep"]
    if not a.paces or set(a.paces) - {"sleep", "busy"}:
        ap.error("--pace: sleep, busy or sleep,busy")
    with (Observer(a.errqueue) if a.observer else contextlib.nullcontext()) as obs:
        for path in a.paths.split(","):
            allres[path] = run_path(path, a, obs)
            report(path, allres[path], a)
    if a.json:
        print(json.dumps(allres))
    return 0


PACED = {"sleep": "rtlab", "busy": "rtlab-busy"}


def run_path(path: str, a: argparse.Namespace, obs: Observer | None) -> dict[str, list[dict]]:
    tools = [PACED[p] for p in a.paces] + ["sockperf"] + (
        ["rtlab-xdp"] if a.xdp and path == "veth" else [])
    res: dict[str, list[dict]] = {t: [] for t in tools}
    with namespaces(path) as (srv, cli, addr):
        for rnd in range(a.rounds):
            # every tool goes first, second, ... equally often
            order = tools[rnd % len(tools):] + tools[:rnd % len(tools)]
            if len(tools) == 2 and rnd % 2:
                order = order[::-1]
            for tool in order:
                if tool.startswith("rtlab"):
                    res[tool].append(run_rtlab(a.probe, srv, cli, addr, a, obs,
                                               xdp=tool == "rtlab-xdp",
                                               pace="busy" if tool == "rtlab-busy" else "sleep"))
                else:
                    res[tool].append(run_sockperf(srv, cli, addr, a, obs))
    return res


def _median_row(runs: list[dict]) -> dict[str, float]:
    return {k: sorted(r[k] for r in runs)[len(runs) // 2]
            for k in ("p50", "p99", "p99.9", "max", "n")}


def report(path: str, res: dict[str, list[dict]], a: argparse.Namespace) -> None:
    rate = f"{a.rate}/s" if a.rate else "back to back"
    print(f"\n{path}: {a.rounds} interleaved rounds x {a.duration} s, {a.size} B, {rate}, "
          f"server CPU {a.server_cpu}, client CPU {a.client_cpu}, SCHED_{a.sched.upper()} "
          "(RTT in µs, median over rounds)")
    print(f"{'':22} {'p50':>9} {'p99':>9} {'p99.9':>9} {'max':>10} {'round trips':>12}")
    if "rtlab-xdp" in res:
        attach = sorted({r["attach"] for r in res["rtlab-xdp"]})
        print(f"rtlab-xdp: --path xdp on both ends, XDP attached in {'/'.join(attach)} mode")
    views = [("own clock", lambda r: r)]
    if a.observer:
        views.append(("observer", lambda r: r["observed"]))
    keys = ("p50", "p99", "p99.9", "max")
    for view, get in views:
        med: dict[str, dict[str, float]] = {}
        if view == "observer":
            for tool in res:
                seen = sum(r["observed"]["n"] for r in res[tool])
                own = sum(r["n"] for r in res[tool])
                if seen < 0.95 * own:
                    print(f"note: the observer saw {seen} of {tool}'s {own} round trips "
                          "(the others needed no waiting syscall): its percentiles for "
                          f"{tool} cover only the round trips that waited")
        for tool in res:
            med[tool] = m = _median_row([get(r) for r in res[tool]])
            print(f"{tool + ' (' + view + ')':22} {m['p50']:9.2f} {m['p99']:9.2f} "
                  f"{m['p99.9']:9.2f} {m['max']:10.1f} {int(m['n']):12d}")
        pairs = [(t, "sockperf", f"{t} / sockperf; < 1: rtlab faster")
                 for t in ("rtlab", "rtlab-busy") if t in med]
        if "rtlab" in med and "rtlab-busy" in med:
            pairs.append(("rtlab-busy", "rtlab", "--pace busy / sleep"))
        if "rtlab-xdp" in med:
            pairs += [("rtlab-xdp", "sockperf", "rtlab xdp / sockperf"),
                      ("rtlab-xdp", "rtlab", "xdp path / socket path; < 1: xdp faster")]
        for num, den, what in pairs:
            ratio = {k: med[num][k] / med[den][k] for k in keys}
            label = "ratio (" + view + ")" if num == "rtlab" and den == "sockperf" else \
                f"{num}/{den}"[:22]
            # the same ratio per round (both runs of a pair back to back), median: robust
            # to a machine whose load drifts between rounds
            paired = sorted(get(x)["p50"] / get(y)["p50"] for x, y in
                            zip(res[num], res[den], strict=True))
            print(f"{label:22} {ratio['p50']:9.3f} {ratio['p99']:9.3f} "
                  f"{ratio['p99.9']:9.3f} {ratio['max']:10.3f}   ({what}; p50 per round "
                  f"{paired[0]:.2f}..{paired[-1]:.2f}, median {paired[len(paired) // 2]:.3f})")
    print("what the CPUs did (median over rounds): the pinger's CPU time per second of run, "
          "idle-state entries (halts) per second per CPU" + (
              "; rtlab's split medians in µs" if any(
                  k.startswith("split_") for t in res for r in res[t] for k in r) else ""))
    for tool in res:
        runs = res[tool]
        cpu = sorted(r["cpu_pct"] for r in runs)[len(runs) // 2]
        cpus = sorted(runs[0]["halts_per_s"])
        halts = ", ".join(f"CPU{c} {sorted(r['halts_per_s'][c] for r in runs)[len(runs) // 2]:,.0f}"
                          for c in cpus)
        split = ", ".join(f"{k} {sorted(r['split_' + k] for r in runs)[len(runs) // 2]:.1f}"
                          for k in SPLIT if all("split_" + k in r for r in runs))
        print(f"  {tool:20} cpu {cpu:5.1f} %   halts/s {halts}" + (f"   {split}" if split else ""))
    eq = [r["errqueue"] for r in res.get("rtlab", []) if "errqueue" in r]
    if eq:
        m = {k: sorted(e[k] for e in eq)[len(eq) // 2] for k in ("p50", "p99", "p99.9", "max",
                                                                 "per_rtt")}
        print(f"{'rtlab error-queue read':22} {m['p50']:9.2f} {m['p99']:9.2f} "
              f"{m['p99.9']:9.2f} {m['max']:10.1f}   ({m['per_rtt']:.2f} per round trip, "
              "pinger, after the reply; µs)")


if __name__ == "__main__":
    sys.exit(main())
