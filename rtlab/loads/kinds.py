# SPDX-License-Identifier: MIT
"""The load kinds, each with its parameter table (declared once, see params.py).

stress       stress-ng stressors (CPU, memory, I/O, scheduler and timer heavy)
rt-competitor  extra rtlab-probe timer threads at a lower RT priority
net          UDP traffic at a bounded rate between two private network namespaces
osadl-mid    the OSADL QA farm "mid load", approximated (stress + net; on a board the
             engine's own load, rtlab.loads.osadl_board)
builtin      the engine's own CPU + memory load (`rtlab-probe load`), for targets without
             stress-ng: labelled as such, never substituted for `stress` silently
"""

from __future__ import annotations

import json
import math
import os
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rtlab.cpulist import format_cpulist
from rtlab.engine.locate import find_probe
from rtlab.errors import SkippedError, UsageError
from rtlab.loads import net as netmod
from rtlab.loads.lifecycle import (
    RT_POLICIES,
    Command,
    Load,
    Placement,
    Proc,
    SpawnRecorder,
    check_placement,
)
from rtlab.loads.params import Param, check_params, format_size
from rtlab.loads.proc import group_members, require_tool

MAX_WORKERS = 4096

# --------------------------------------------------------------------------------------------
# stress (stress-ng)

STRESSORS = ("cpu", "vm", "io", "hdd", "sock", "switch", "sem", "pipe", "timer")

STRESS_PRESETS: dict[str, dict[str, Any]] = {
    # the seed talk's `stress --cpu 8 --vm 8 --vm-bytes 20M`, with stress-ng
    "seed": {"cpu": 8, "vm": 8, "vm_bytes": 20 << 20},
}


def _workers(name: str, what: str) -> Param:
    return Param(name, "int", 0, what, min=0, max=MAX_WORKERS)


STRESS_PARAMS: tuple[Param, ...] = (
    Param("preset", "choice", "none",
          "start from a preset (its values are used for keys not given); "
          "seed = --cpu 8 --vm 8 --vm-bytes 20M", choices=("none", *STRESS_PRESETS)),
    _workers("cpu", "CPU hog workers (--cpu)"),
    Param("cpu_load", "int", 100, "busy percentage of each CPU worker (--cpu-load)",
          min=1, max=100),
    _workers("vm", "memory workers that mmap, dirty and munmap (--vm)"),
    Param("vm_bytes", "size", 64 << 20, "memory per vm worker (--vm-bytes)",
          min=4 << 10, max=64 << 30),
    Param("vm_hang", "int", 0, "seconds a vm worker sleeps before freeing its memory "
          "(--vm-hang); with vm_bytes this bounds the allocation rate", min=0, max=3600),
    _workers("io", "workers calling sync() (--io)"),
    _workers("hdd", "workers writing and unlinking a file in a private temp dir (--hdd)"),
    Param("hdd_bytes", "size", 64 << 20, "file size per hdd worker (--hdd-bytes)",
          min=1 << 20, max=16 << 30),
    Param("hdd_write_size", "size", 64 << 10, "size of each write (--hdd-write-size)",
          min=1, max=4 << 20),
    Param("hdd_sync", "bool", False, "fsync after each write (--hdd-opts fsync)"),
    _workers("sock", "TCP socket workers over loopback, in a private network namespace "
             "(--sock)"),
    _workers("switch", "context-switch workers (--switch)"),
    Param("switch_freq", "int", 0, "context switches per second per worker, 0 = unlimited "
          "(--switch-freq)", min=0, max=1_000_000_000),
    _workers("sem", "POSIX semaphore workers (--sem)"),
    _workers("pipe", "pipe I/O workers (--pipe)"),
    _workers("timer", "POSIX timer workers (--timer)"),
    Param("timer_freq", "int", 1_000_000, "timer frequency in Hz (--timer-freq)",
          min=1, max=100_000_000),
    Param("ionice", "choice", "none", "I/O scheduling class of the workers (--ionice-class)",
          choices=("none", "idle", "besteffort", "realtime")),
    Param("timeout", "duration", 0, "stop by itself after this time (0: run until stopped)",
          min=0, max=1000 * 3_600_000_000_000),
    Param("temp_dir", "str", "", "parent directory of the private temp dir used by hdd/io "
          "(default: the load's work directory)"),
)


def _check_stress(v: Mapping[str, Any]) -> list[str]:
    if not any(v[s] for s in STRESSORS):
        return ["stress: no stressor selected; set at least one of "
                + ", ".join(STRESSORS) + " to a positive number, or preset = \"seed\""]
    return []


def _stress_values(params: Mapping[str, Any]) -> dict[str, Any]:
    """Defaults, then the preset's values, then the given keys."""
    values = {p.name: p.default for p in STRESS_PARAMS}
    values.update(STRESS_PRESETS.get(params.get("preset", "none"), {}))
    values.update(params)
    return values


class StressLoad(Load):
    """stress-ng with the selected stressors, placed with --taskset and --sched."""

    kind = "stress"
    default_placement = Placement(None, "other", 0)

    def check_tools(self) -> None:
        require_tool("stress-ng")
        if self.params["sock"]:
            require_tool("unshare")
            require_tool("ip")

    def setup(self, recorder: SpawnRecorder, workdir: Path) -> None:
        parent = Path(self.params["temp_dir"]) if self.params["temp_dir"] else workdir
        self.temp_path = parent / f"rtlab-stress-{os.getpid()}-{id(self):x}"
        self.temp_path.mkdir(parents=True, exist_ok=True)

    def argv(self, temp_path: str = "TEMP") -> list[str]:
        v, pl = self.params, self.placement
        a = ["stress-ng"]
        for s in STRESSORS:
            if v[s]:
                a += [f"--{s}", str(v[s])]
        if v["cpu"] and v["cpu_load"] != 100:
            a += ["--cpu-load", str(v["cpu_load"])]
        if v["vm"]:
            a += ["--vm-bytes", format_size(v["vm_bytes"])]
            if v["vm_hang"]:
                a += ["--vm-hang", str(v["vm_hang"])]
        if v["hdd"]:
            a += ["--hdd-bytes", format_size(v["hdd_bytes"]),
                  "--hdd-write-size", str(v["hdd_write_size"])]
            if v["hdd_sync"]:
                a += ["--hdd-opts", "fsync"]
        if v["switch"] and v["switch_freq"]:
            a += ["--switch-freq", str(v["switch_freq"])]
        if v["timer"]:
            a += ["--timer-freq", str(v["timer_freq"])]
        if v["ionice"] != "none":
            a += ["--ionice-class", v["ionice"]]
        if pl.cpus is not None:
            a += ["--taskset", format_cpulist(pl.cpus)]
        if pl.policy != "other":
            a += ["--sched", pl.policy]
            if pl.policy in RT_POLICIES:
                a += ["--sched-prio", str(pl.priority)]
        a += ["--timeout", f"{math.ceil(v['timeout'] / 1e9)}s" if v["timeout"] else "0",
              "--temp-path", temp_path]
        if v["sock"]:
            # loopback traffic stays in an anonymous namespace that dies with stress-ng
            a = ["unshare", "--net", "--", "sh", "-c", 'ip link set lo up && exec "$@"',
                 "sh", *a]
        return a

    def commands(self) -> list[Command]:
        return [Command("stress-ng", self.argv(str(self.temp_path)), workers=True)]

    def teardown(self) -> None:
        temp = getattr(self, "temp_path", None)
        if temp is not None:
            shutil.rmtree(temp, ignore_errors=True)


# --------------------------------------------------------------------------------------------
# builtin (rtlab-probe load: the engine's own CPU + memory load)

BUILTIN_MAX_WORKERS = 1024  # of each kind (the engine's LOAD_MAX_WORKERS)
BUILTIN_LABEL = ("the engine's built-in CPU+memory load (rtlab-probe load), not stress-ng: "
                 "cpu workers spin on square roots, vm workers map, dirty and unmap vm_bytes")

BUILTIN_PRESETS: dict[str, dict[str, Any]] = {
    # the seed talk's `stress --cpu 8 --vm 8 --vm-bytes 20M`, with the engine's load
    "seed": {"cpu": 8, "vm": 8, "vm_bytes": 20 << 20},
}

BUILTIN_PARAMS: tuple[Param, ...] = (
    Param("preset", "choice", "none",
          "start from a preset (its values are used for keys not given); "
          "seed = --cpu 8 --vm 8 --vm-bytes 20M", choices=("none", *BUILTIN_PRESETS)),
    Param("cpu", "int", 0, "workers spinning on square roots (like stress --cpu)",
          min=0, max=BUILTIN_MAX_WORKERS),
    Param("vm", "int", 0, "workers that map vm_bytes, write every page, unmap, repeat "
          "(like stress --vm)", min=0, max=BUILTIN_MAX_WORKERS),
    Param("vm_bytes", "size", 64 << 20, "memory a vm worker maps per loop (--vm-bytes)",
          min=4 << 10, max=64 << 30),
)


def _check_builtin(v: Mapping[str, Any]) -> list[str]:
    if not v["cpu"] and not v["vm"]:
        return ["builtin: no worker selected; set cpu and/or vm to a positive number, "
                "or preset = \"seed\""]
    return []


def _builtin_values(params: Mapping[str, Any]) -> dict[str, Any]:
    """Defaults, then the preset's values, then the given keys."""
    values = {p.name: p.default for p in BUILTIN_PARAMS}
    values.update(BUILTIN_PRESETS.get(params.get("preset", "none"), {}))
    values.update(params)
    return values


BUILTIN_POLICIES = ("other", "fifo", "rr")  # the engine's load --policy


class BuiltinLoad(Load):
    """`rtlab-probe load --cpu N --vm M --vm-bytes SIZE [--cpus LIST] [--policy P
    --priority N]`: the engine's own CPU + memory load (docs/engine.md). It leads its own
    process group, forks its workers into it (each set to the placement's policy before
    it works) and prints a `load` record, then a `load_result` with loop counts."""

    kind = "builtin"
    default_placement = Placement(None, "other", 0)

    def __init__(self, params: Mapping[str, Any] | None = None,
                 placement: Placement | None = None, *, name: str | None = None):
        super().__init__(params, placement, name=name)
        self.extra["label"] = BUILTIN_LABEL

    def check_tools(self) -> None:
        self.probe = _find_probe("")
        if not (os.path.isfile(self.probe) and os.access(self.probe, os.X_OK)):
            raise SkippedError(f"rtlab-probe {self.probe} is not an executable file",
                               hint="build it (make setup) or set RTLAB_PROBE")

    def load_args(self) -> list[str]:
        """The engine's arguments: `load --cpu N ...` (the same here and on a board)."""
        v, pl = self.params, self.placement
        a = ["load"]
        if v["cpu"]:
            a += ["--cpu", str(v["cpu"])]
        if v["vm"]:
            a += ["--vm", str(v["vm"]), "--vm-bytes", format_size(v["vm_bytes"])]
        if pl.cpus is not None:
            a += ["--cpus", format_cpulist(pl.cpus)]
        if pl.policy in RT_POLICIES:
            a += ["--policy", pl.policy, "--priority", str(pl.priority)]
        return a

    def commands(self) -> list[Command]:
        def ready(p: Proc) -> bool:  # the `load` record: every worker has been forked
            return p.stdout_path.is_file() and p.stdout_path.stat().st_size > 0

        return [Command("rtlab-probe-load",
                        [getattr(self, "probe", "rtlab-probe"), *self.load_args()],
                        workers=True, ready=ready)]

    def collect(self) -> None:
        for p in self.procs:
            try:
                lines = p.stdout_path.read_text().splitlines()
            except OSError:
                continue
            self.take_records(_json_records(lines))

    def take_records(self, records: Sequence[Mapping[str, Any]]) -> None:
        """The engine's `load_result` (loop counts, how it ended) and the scheduling in
        effect on its workers (its `load` record, read back there) into the description."""
        sched = None
        for rec in records:
            if rec.get("type") == "load":
                sched = sorted({(w.get("policy"), w.get("priority"))
                                for w in rec.get("workers") or [] if isinstance(w, dict)},
                               key=str)
            if rec.get("type") == "load_result":
                self.extra["builtin"] = {k: rec.get(k) for k in (
                    "status", "exit_code", "elapsed_ns", "loops", "error")}
        if sched is not None:
            # each distinct (policy, priority) of the workers: one, unless the engine
            # changed (it stops when a worker's differs from the asked one)
            self.extra.setdefault("builtin", {})["workers_sched"] = [
                {"policy": p, "priority": n} for p, n in sched]


def _json_records(lines: Sequence[str]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for line in lines:
        try:
            rec = json.loads(line)
        except ValueError:
            continue  # not a JSON line (a tool's message), or a torn last line
        if isinstance(rec, dict):
            out.append(rec)
    return out


# --------------------------------------------------------------------------------------------
# rt-competitor (rtlab-probe timer at a lower RT priority)

COMPETITOR_PARAMS: tuple[Param, ...] = (
    Param("interval", "duration", 1_000_000, "wake-up period of the competing threads",
          min=1_000, max=10_000_000_000),
    Param("probe", "str", "", "path of rtlab-probe (default: $RTLAB_PROBE, beside the "
          "running Python, or PATH)"),
    Param("capture", "bool", True, "keep the competitor's JSON Lines in the work directory "
          "and its last record in the load's description (false: --output /dev/null)"),
)


def _find_probe(explicit: str) -> str:
    if explicit:
        return explicit

    try:
        return str(find_probe())
    except Exception as e:  # RtlabError: not found
        raise SkippedError("rtlab-probe not found for the rt-competitor load",
                           hint="build it (make setup) or set RTLAB_PROBE") from e


class RtCompetitorLoad(Load):
    """Competing timer threads: `rtlab-probe timer --cpus X --priority 98 ...`. Under a
    cgroup v2 partition the threads of the partition's CPUs run as a second process that
    joins it (`rtlab-probe --cgroup DIR timer ...`): the seed's competitors in both sets."""

    kind = "rt-competitor"
    default_placement = Placement(None, "fifo", 98)
    splits = True

    def check_tools(self) -> None:
        self.probe = _find_probe(self.params["probe"])
        if not (os.path.isfile(self.probe) and os.access(self.probe, os.X_OK)):
            raise SkippedError(f"rtlab-probe {self.probe} is not an executable file",
                               hint="build it (make setup) or set RTLAB_PROBE")

    def argv(self, output: str, cpus: tuple[int, ...] | None = None,
             cgroup: str | None = None) -> list[str]:
        """The engine's command line: the placement's CPUs, or `cpus` (one part)."""
        pl = self.placement
        cpus = pl.cpus if cpus is None else cpus
        a = [getattr(self, "probe", "rtlab-probe"),
             *(["--cgroup", cgroup] if cgroup else []), "timer",
             "--policy", pl.policy if pl.policy in ("fifo", "rr") else "other",
             "--priority", str(pl.priority),
             "--interval", f"{self.params['interval']}ns", "--output", output]
        if cpus is not None:
            a += ["--cpus", format_cpulist(cpus)]
        return a

    def setup(self, recorder: SpawnRecorder, workdir: Path) -> None:
        n = len(self.placement_parts())
        self.outputs: list[Path] = (
            [workdir / ("competitor.jsonl" if i == 0 else f"competitor-{i}.jsonl")
             for i in range(n)] if self.params["capture"] else [])

    def commands(self) -> list[Command]:
        out: list[Command] = []
        for i, (cpus, cgroup) in enumerate(self.placement_parts()):
            path = self.outputs[i] if self.outputs else None
            ready: Callable[[Proc], bool] | None = None
            if path is not None:
                def ready(p: Proc, path: Path = path) -> bool:
                    return path.exists() and path.stat().st_size > 0
            out.append(Command("rtlab-probe", self.argv(str(path) if path else os.devnull,
                                                        cpus, cgroup), ready=ready))
        return out

    def collect(self) -> None:
        """The last record of each process: its channels into the description."""
        outputs = getattr(self, "outputs", [])
        if not outputs:
            return
        self.extra["output"] = str(outputs[0]) if len(outputs) == 1 else [str(o) for o in outputs]
        records = [r for r in (_last_record(o) for o in outputs) if r is not None]
        self.last_record = records[0] if records else None
        if records:
            self.extra["competitor"] = {
                "record": "result" if all(r["type"] == "result" for r in records)
                else "snapshot",
                "channels": [{k: c.get(k) for k in ("name", "cpu", "samples", "missed",
                                                     "min_ns", "max_ns", "sum_ns")}
                             for r in records for c in (r.get("channels") or [])
                             if isinstance(c, dict)],
            }


def _last_record(path: Path) -> dict[str, Any] | None:
    """The last result or snapshot record of an engine's JSON Lines file (None: none)."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        try:
            rec = json.loads(line)
        except ValueError:
            continue  # a torn last line of a killed probe
        if isinstance(rec, dict) and rec.get("type") in ("result", "snapshot"):
            return rec
    return None


# --------------------------------------------------------------------------------------------
# net (sockperf between two namespaces)

NET_PARAMS: tuple[Param, ...] = (
    Param("rate_kbit", "int", 1000, "UDP payload rate from one namespace to the other, "
          "kbit/s (sockperf --mps = rate / msg_bytes)", min=1, max=10_000_000),
    Param("msg_bytes", "int", 1000, "UDP payload bytes per message (sockperf -m)",
          min=14, max=65000),
    Param("subnet", "str", "198.18.0.0/30",
          "private IPv4 /30 for the veth pair, used only inside the two namespaces "
          "(default from 198.18.0.0/15, reserved for benchmarks by RFC 2544)"),
    Param("port", "int", 11111, "UDP port of the sockperf server", min=1024, max=65535),
)


def _check_net(v: Mapping[str, Any]) -> list[str]:
    err = netmod.check_subnet(v["subnet"])
    return [f"net.subnet: {err}"] if err else []


class NetLoad(Load):
    """sockperf server in namespace A, `sockperf throughput --mps N` from namespace B."""

    kind = "net"
    default_placement = Placement(None, "other", 0)

    def check_tools(self) -> None:
        for tool in ("ip", "sockperf", "taskset"):
            require_tool(tool)
        if self.placement.policy != "other":
            require_tool("chrt")

    @property
    def mps(self) -> int:
        return max(1, round(self.params["rate_kbit"] * 1000 / 8 / self.params["msg_bytes"]))

    def setup(self, recorder: SpawnRecorder, workdir: Path) -> None:
        self.pair = netmod.VethPair.create(self.params["subnet"], recorder)
        self.extra["netns"] = list(self.pair.namespaces)
        self.extra["addresses"] = [self.pair.addr_a, self.pair.addr_b]
        self.extra["mps"] = self.mps

    def commands(self) -> list[Command]:
        pair, v = self.pair, self.params
        pre = netmod.placement_prefix(self.placement)
        server = ["ip", "netns", "exec", pair.ns_a, *pre, "sockperf", "server",
                  "-i", pair.addr_a, "-p", str(v["port"])]
        client = ["ip", "netns", "exec", pair.ns_b, *pre, "sockperf", "throughput",
                  "-i", pair.addr_a, "-p", str(v["port"]), "-m", str(v["msg_bytes"]),
                  f"--mps={self.mps}", "-t", str(netmod.SOCKPERF_MAX_TIME)]

        def listening(p: Proc) -> bool:
            return netmod.udp_listening(p.pid, v["port"])

        return [Command("sockperf-server", server, ready=listening),
                Command("sockperf-client", client)]

    def counters(self) -> dict[str, int]:
        pair = getattr(self, "pair", None)
        return pair.counters() if pair is not None else {}

    def before_signal(self) -> None:
        self.extra["counters"] = self.counters()

    def teardown(self) -> None:
        pair = getattr(self, "pair", None)
        if pair is not None:
            pair.delete()


# --------------------------------------------------------------------------------------------
# osadl-mid (stress + net)

OSADL_PARAMS: tuple[Param, ...] = (
    Param("net_kbit", "int", 1000, "UDP payload rate of the network part, kbit/s (here "
          "between two private namespaces, on a board to its peer)", min=1, max=10_000_000),
    Param("io_bytes", "size", 1 << 20, "file size of the one file I/O worker (written in "
          "synced 4k writes and removed, over and over, at idle I/O priority)",
          min=1 << 20, max=1 << 30),
    Param("alloc_bytes", "size", 1 << 20, "memory one worker maps, dirties and frees "
          "every alloc_period seconds", min=4 << 10, max=1 << 30),
    Param("alloc_period", "int", 1, "seconds between allocations of the memory worker",
          min=1, max=3600),
    Param("subnet", "str", "198.18.0.0/30", "private IPv4 /30 of the network part on this "
          "machine"),
    Param("peer", "str", "", "on a board, where its network part goes: \"\" this machine "
          "(at the address the board sees it at), \"TARGET=ADDR:PORT\" a sink rtlab starts "
          "on board TARGET bound to ADDR:PORT (its address on the link), \"none\" left out; "
          "this machine always uses two namespaces"),
    Param("temp_dir", "str", "", "parent directory of the file I/O's private directory "
          "(default: the load's work directory here, /tmp on a board)"),
)

OSADL_MSG_BYTES = 1000  # UDP payload per message of the network part
OSADL_BOARD_LABEL = ("osadl-mid on a board: the engine's own load (rtlab-probe load), not "
                     "stress-ng/sockperf")


class CompositeLoad(Load):
    """Several loads started, watched and stopped as one (their processes are merged)."""

    def __init__(self, parts: Sequence[Load], params: Mapping[str, Any],
                 placement: Placement, name: str | None = None):
        super().__init__(params, placement, name=name)
        self.parts = list(parts)

    def check_tools(self) -> None:
        for part in self.parts:
            part.check_tools()

    def setup(self, recorder: SpawnRecorder, workdir: Path) -> None:
        for part in self.parts:
            part.workdir = workdir
            part.setup(recorder, workdir)
            self.extra.update(part.extra)

    def commands(self) -> list[Command]:
        return [c for part in self.parts for c in part.commands()]

    def before_signal(self) -> None:
        for part in self.parts:
            part.before_signal()
            self.extra.update(part.extra)

    def teardown(self) -> None:
        for part in reversed(self.parts):
            part.teardown()

    def collect(self) -> None:
        for part in self.parts:
            part.collect()
            self.extra.update(part.extra)


class OsadlMidLoad(CompositeLoad):
    """On this machine: one stress-ng (a vm worker at a bounded rate, a synced hdd worker
    at idle I/O priority) and the net load. A board runs it as the engine's own load
    (rtlab.loads.osadl_board), built from the same parameters by `engine_args`."""

    kind = "osadl-mid"
    default_placement = Placement(None, "other", 0)

    def __init__(self, params: Mapping[str, Any], placement: Placement):
        v = params
        stress = StressLoad(_stress_values({
            "vm": 1, "vm_bytes": v["alloc_bytes"], "vm_hang": v["alloc_period"],
            "hdd": 1, "hdd_bytes": v["io_bytes"], "hdd_write_size": 4096, "hdd_sync": True,
            "ionice": "idle", "temp_dir": v.get("temp_dir", "")}), placement)
        net = NetLoad({"rate_kbit": v["net_kbit"], "msg_bytes": OSADL_MSG_BYTES,
                       "subnet": v["subnet"], "port": 11111}, placement)
        super().__init__([stress, net], params, placement)
        self.notes: list[str] = []  # one line each for the run's notes (taken after the start)

    def setup(self, recorder: SpawnRecorder, workdir: Path) -> None:
        super().setup(recorder, workdir)
        if self.params.get("peer"):
            self.notes = [f"load {self.name}: osadl-mid's peer {self.params['peer']!r} is for "
                          "runs on a board; on this machine its network part runs between two "
                          "private network namespaces"]

    def engine_args(self, io_dir: str) -> tuple[list[str], list[str]]:
        """The engine's `load` arguments on a board: (memory + file I/O, the UDP sender
        without its --net-to), placed on the load's CPUs."""
        v, pl = self.params, self.placement
        place = ["--cpus", format_cpulist(pl.cpus)] if pl.cpus is not None else []
        local = ["load", "--alloc-bytes", format_size(v["alloc_bytes"]), "--alloc-period",
                 f"{v['alloc_period']}s", "--io", "1", "--io-bytes", format_size(v["io_bytes"]),
                 "--io-dir", io_dir, *place]
        net = ["load", "--net-kbit", str(v["net_kbit"]), "--net-size", str(OSADL_MSG_BYTES),
               *place]
        return local, net


# --------------------------------------------------------------------------------------------
# the table of kinds


@dataclass(frozen=True)
class LoadKind:
    name: str
    help: str
    params: tuple[Param, ...]
    load_class: Callable[..., Load]
    default_placement: Placement
    cross_check: Callable[[Mapping[str, Any]], list[str]] | None = None
    values: Callable[[Mapping[str, Any]], dict[str, Any]] | None = None
    policies: tuple[str, ...] | None = None  # the placement policies it can honour (None: all)

    def check_policy(self, placement: Placement) -> list[str]:
        if self.policies is None or placement.policy in self.policies:
            return []
        return [f"{self.name}.policy: {placement.policy!r} is not available for this kind; "
                "allowed: " + ", ".join(repr(p) for p in self.policies)]

    def resolve(self, params: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
        """All values (defaults filled in) and the errors, each naming its key."""
        given, errors = check_params(self.name, self.params, params)
        if self.values is not None:
            full = self.values(given)
        else:
            full = {p.name: p.default for p in self.params}
            full.update(given)
        if not errors and self.cross_check is not None:
            errors += self.cross_check(full)
        return full, errors

    def build(self, params: Mapping[str, Any] | None = None,
              placement: Placement | None = None) -> Load:
        full, errors = self.resolve(params or {})
        if placement is None:
            placement = self.default_placement
        else:
            given = {k: v for k, v in placement.to_dict().items() if v is not None}
            errors += check_placement(self.name, given, self.default_placement)[1]
            errors += self.check_policy(placement)
        if errors:
            raise UsageError("; ".join(errors))
        return self.load_class(full, placement)


def _check_osadl(v: Mapping[str, Any]) -> list[str]:
    err = netmod.check_subnet(v["subnet"])
    out = [f"osadl-mid.subnet: {err}"] if err else []
    try:
        netmod.parse_board_peer(v["peer"])
    except ValueError as exc:
        out.append(f"osadl-mid.peer: {exc}")
    return out


LOAD_KINDS: dict[str, LoadKind] = {
    k.name: k for k in (
        LoadKind("stress", "stress-ng stressors: CPU, memory, I/O, scheduler and timer load",
                 STRESS_PARAMS, StressLoad, StressLoad.default_placement,
                 _check_stress, _stress_values),
        LoadKind("rt-competitor", "competing rtlab-probe timer threads at a lower RT "
                 "priority (default SCHED_FIFO 98)", COMPETITOR_PARAMS, RtCompetitorLoad,
                 RtCompetitorLoad.default_placement),
        LoadKind("net", "UDP traffic at a bounded rate between two private network "
                 "namespaces joined by a veth pair", NET_PARAMS, NetLoad,
                 NetLoad.default_placement, _check_net),
        LoadKind("osadl-mid", "approximation of the OSADL QA farm mid load: ~1 Mbit/s "
                 "network, small synced file I/O, ~1 MB/s memory allocation", OSADL_PARAMS,
                 OsadlMidLoad, OsadlMidLoad.default_placement, _check_osadl),
        LoadKind("builtin", "the engine's own CPU + memory load (rtlab-probe load), for "
                 "targets without stress-ng", BUILTIN_PARAMS, BuiltinLoad,
                 BuiltinLoad.default_placement, _check_builtin, _builtin_values,
                 policies=BUILTIN_POLICIES),
    )
}

PLACEMENT_KEYS = ("cpus", "policy", "priority")


def validate(kind: str, params: Mapping[str, Any]) -> list[str]:
    """Errors of one load's parameters (empty if valid); each names the key and what is allowed."""
    k = LOAD_KINDS.get(kind)
    if k is None:
        return [f"kind: unknown load kind {kind!r}; allowed: " + ", ".join(LOAD_KINDS)]
    return k.resolve(params)[1]


def validate_spec(spec: Mapping[str, Any], online: Sequence[int] | None = None) -> list[str]:
    """Errors of a scenario's load table: `kind`, the kind's keys and cpus/policy/priority."""
    return _from_spec(spec, online)[1]


def from_spec(spec: Mapping[str, Any], online: Sequence[int] | None = None) -> Load:
    """A Load from a scenario's load table, or UsageError with every problem."""
    load, errors = _from_spec(spec, online)
    if errors or load is None:
        raise UsageError("; ".join(errors))
    return load


def _from_spec(spec: Mapping[str, Any], online: Sequence[int] | None
               ) -> tuple[Load | None, list[str]]:
    kind_name = spec.get("kind")
    if not isinstance(kind_name, str):
        return None, ["kind: missing; allowed: " + ", ".join(LOAD_KINDS)]
    kind = LOAD_KINDS.get(kind_name)
    if kind is None:
        return None, validate(kind_name, {})
    params = {k: v for k, v in spec.items() if k != "kind" and k not in PLACEMENT_KEYS}
    placement_keys = {k: v for k, v in spec.items() if k in PLACEMENT_KEYS}
    full, errors = kind.resolve(params)
    placement, perr = check_placement(kind_name, placement_keys, kind.default_placement, online)
    errors += perr or kind.check_policy(placement)
    if errors:
        return None, errors
    return kind.load_class(full, placement), []


def running_workers(load: Load) -> list[int]:
    """PIDs of every live process of a load's groups (leaders and workers)."""
    return [m.pid for p in load.procs for m in group_members(p.pgid)]
