# SPDX-License-Identifier: MIT
"""Kind `osadl-mid`: the OSADL QA farm "mid load", approximated (stress + net on this
machine; on a board the engine's own load, rtlab.loads.osadl_board)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rtlab.cpulist import format_cpulist
from rtlab.loads import net as netmod
from rtlab.loads.lifecycle import Command, Load, Placement, SpawnRecorder
from rtlab.loads.params import Param, format_size
from rtlab.loads.sockperf import NetLoad
from rtlab.loads.stress import StressLoad, stress_values

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
        stress = StressLoad(stress_values({
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


def check_osadl(v: Mapping[str, Any]) -> list[str]:
    err = netmod.check_subnet(v["subnet"])
    out = [f"osadl-mid.subnet: {err}"] if err else []
    try:
        netmod.parse_board_peer(v["peer"])
    except ValueError as exc:
        out.append(f"osadl-mid.peer: {exc}")
    return out

