# SPDX-License-Identifier: MIT
"""Kind `stress`: stress-ng with the selected stressors (CPU, memory, I/O, scheduler and
timer heavy), placed with --taskset and --sched; its parameter table and presets."""

from __future__ import annotations

import math
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rtlab.cpulist import format_cpulist
from rtlab.loads.lifecycle import RT_POLICIES, Command, Load, Placement, SpawnRecorder
from rtlab.loads.params import Param, format_size, preset_values
from rtlab.loads.proc import require_tool

MAX_WORKERS = 4096

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


def check_stress(v: Mapping[str, Any]) -> list[str]:
    if not any(v[s] for s in STRESSORS):
        return ["stress: no stressor selected; set at least one of "
                + ", ".join(STRESSORS) + " to a positive number, or preset = \"seed\""]
    return []



def stress_values(params: Mapping[str, Any]) -> dict[str, Any]:
    """Defaults, then the preset's values, then the given keys."""
    return preset_values(STRESS_PARAMS, STRESS_PRESETS, params)


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
