# SPDX-License-Identifier: MIT
"""Two private network namespaces joined by a veth pair, for network load.

The pair's addresses exist only inside the two namespaces (nothing is added
to the host's namespace, no route leaves them), so the traffic cannot reach
any other machine. Both namespaces are recorded in the journal before they
are created, so `rtlab restore` deletes them after a `kill -9` of rtlab.
"""

from __future__ import annotations

import ipaddress
import json
import os
import secrets
import subprocess
from dataclasses import dataclass
from pathlib import Path

from rtlab.cpulist import format_cpulist
from rtlab.errors import RtlabError
from rtlab.loads.lifecycle import Placement, SpawnRecorder

SOCKPERF_MAX_TIME = 36_000_000  # seconds, sockperf's own maximum of -t
NETNS_DIR = Path("/run/netns")
DEV_A, DEV_B = "rtl-a", "rtl-b"
_CHRT_FLAGS = {"fifo": "-f", "rr": "-r", "batch": "-b", "idle": "-i", "other": "-o"}


def check_subnet(text: str) -> str | None:
    """None if `text` is a private IPv4 /30, else what is wrong and what is allowed."""
    allowed = "allowed: a private IPv4 /30 such as \"198.18.0.0/30\""
    try:
        net = ipaddress.IPv4Network(text, strict=True)
    except ValueError:
        return f"{text!r} is not an IPv4 network; {allowed}"
    if net.prefixlen != 30:
        return f"{text!r} is not a /30; {allowed}"
    if not net.is_private or net.is_loopback or net.is_link_local:
        return f"{text!r} is not private; {allowed}"
    return None


def placement_prefix(pl: Placement) -> list[str]:
    """`taskset -c CPUS chrt -f PRIO` for commands that cannot place themselves."""
    a: list[str] = []
    if pl.cpus is not None:
        a += ["taskset", "-c", format_cpulist(pl.cpus)]
    if pl.policy != "other":
        a += ["chrt", _CHRT_FLAGS[pl.policy], str(pl.priority)]
    return a


def udp_listening(pid: int, port: int) -> bool:
    """True once a UDP socket is bound to `port` in the network namespace of `pid`."""
    try:
        lines = Path(f"/proc/{pid}/net/udp").read_text().splitlines()[1:]
    except OSError:
        return False
    want = f":{port:04X}"
    return any(line.split()[1].endswith(want) for line in lines if len(line.split()) > 2)


def _ip(*args: str) -> str:
    r = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
    if r.returncode != 0:
        raise RtlabError(f"ip {' '.join(args)} failed: {r.stderr.strip()}")
    return r.stdout


def netns_exists(name: str) -> bool:
    return (NETNS_DIR / name).exists()


def delete_netns(name: str) -> None:
    """`ip netns del NAME`, quietly if it is already gone."""
    if netns_exists(name):
        subprocess.run(["ip", "netns", "del", name], capture_output=True, check=False)


@dataclass
class VethPair:
    ns_a: str
    ns_b: str
    addr_a: str
    addr_b: str

    @property
    def namespaces(self) -> tuple[str, str]:
        return (self.ns_a, self.ns_b)

    @classmethod
    def create(cls, subnet: str, recorder: SpawnRecorder) -> VethPair:
        hosts = list(ipaddress.IPv4Network(subnet).hosts())
        token = f"{os.getpid()}-{secrets.token_hex(3)}"
        pair = cls(f"rtlab-{token}-a", f"rtlab-{token}-b", str(hosts[0]), str(hosts[1]))
        try:
            for ns in pair.namespaces:
                recorder.record_netns(ns)  # journal first, then create
                _ip("netns", "add", ns)
            _ip("link", "add", DEV_A, "netns", pair.ns_a, "type", "veth",
                "peer", "name", DEV_B, "netns", pair.ns_b)
            for ns, dev, addr in ((pair.ns_a, DEV_A, pair.addr_a),
                                  (pair.ns_b, DEV_B, pair.addr_b)):
                _ip("-n", ns, "addr", "add", f"{addr}/30", "dev", dev)
                _ip("-n", ns, "link", "set", "lo", "up")
                _ip("-n", ns, "link", "set", dev, "up")
        except BaseException:
            pair.delete()
            raise
        return pair

    def counters(self) -> dict[str, int]:
        """Byte and packet counters of both ends ({} if the namespaces are gone)."""
        out: dict[str, int] = {}
        for side, ns, dev in (("a", self.ns_a, DEV_A), ("b", self.ns_b, DEV_B)):
            try:
                info = json.loads(_ip("-n", ns, "-j", "-s", "link", "show", "dev", dev))[0]
            except (RtlabError, ValueError, IndexError):
                return {}
            stats = info.get("stats64", {})
            for d in ("rx", "tx"):
                for k in ("bytes", "packets"):
                    out[f"{side}_{d}_{k}"] = int(stats.get(d, {}).get(k, 0))
        return out

    def xdp_prog(self, side: str) -> int | None:
        """Id of the XDP program attached to end `side` ("a" or "b"), None if none."""
        ns, dev = (self.ns_a, DEV_A) if side == "a" else (self.ns_b, DEV_B)
        try:
            info = json.loads(_ip("-n", ns, "-j", "-d", "link", "show", "dev", dev))[0]
            return int(info["xdp"]["prog"]["id"])
        except (RtlabError, ValueError, IndexError, KeyError, TypeError):
            return None

    def delete(self) -> None:
        """Delete both namespaces (the veth pair goes with them). Idempotent."""
        for ns in self.namespaces:
            delete_netns(ns)


# --------------------------------------------------------------------------------------------
# The peer of a board's network load (osadl-mid's `peer`)

PEER_HOST, PEER_NONE = "", "none"


@dataclass(frozen=True)
class BoardPeer:
    """`TARGET=ADDR:PORT`: the sink runs on board TARGET, bound to ADDR:PORT (TARGET's
    address on the link to the sending board, as that board reaches it)."""

    target: str
    addr: str
    port: int

    @property
    def endpoint(self) -> str:
        """ADDR:PORT as the engine reads it ([v6]:PORT for IPv6)."""
        return endpoint(self.addr, self.port)


def endpoint(addr: str, port: int) -> str:
    return f"[{addr}]:{port}" if ":" in addr else f"{addr}:{port}"


def parse_board_peer(text: str) -> BoardPeer | None:
    """None for "" (this machine) and "none"; else the BoardPeer of `TARGET=ADDR:PORT`.
    ValueError saying what is allowed."""
    if text in (PEER_HOST, PEER_NONE):
        return None
    allowed = ('allowed: "" (this machine), "none", or "TARGET=ADDR:PORT", e.g. '
               '"board2=10.77.0.2:7500" (ADDR: TARGET\'s numeric address on the link)')
    target, eq, rest = text.partition("=")
    if not eq or not target.strip() or target != target.strip() or " " in target:
        raise ValueError(f"{text!r} is not a peer; {allowed}")
    host, colon, port = rest.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    try:
        ip = ipaddress.ip_address(host)
        n = int(port)
    except ValueError:
        raise ValueError(f"{text!r} is not a peer; {allowed}") from None
    if not colon or not 1 <= n <= 65535 or ip.is_unspecified:
        raise ValueError(f"{text!r} is not a peer; {allowed}")
    return BoardPeer(target, str(ip), n)
