# SPDX-License-Identifier: MIT
"""Kind `net`: UDP traffic at a bounded rate between two private network namespaces
joined by a veth pair (a sockperf server in one, `sockperf throughput` in the other)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rtlab.loads import net as netmod
from rtlab.loads.lifecycle import Command, Load, Placement, Proc, SpawnRecorder
from rtlab.loads.params import Param
from rtlab.loads.proc import require_tool

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


def check_net(v: Mapping[str, Any]) -> list[str]:
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

