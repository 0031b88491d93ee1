# SPDX-License-Identifier: MIT
"""Hardware timestamping of a NIC for the udp probe: which interface carries the
traffic to a peer, and the journaled `hwtstamp` operation that turns the NIC's
timestamping on (tx on, rx_filter all) and is undone when the session ends
(docs/sys-protocol.md, docs/probes/udp.md)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rtlab.errors import RtlabError

HW_MODES = ("hardware", "auto")  # --timestamps values that want the NIC's timestamps


def hwtstamp_op(ifname: str) -> dict[str, Any]:
    """The `sys apply` operation: hardware TX stamps on, every received packet stamped."""
    return {"op": "hwtstamp", "ifname": ifname, "tx": "on", "rx_filter": "all"}


def route_interface(addr: str, netns_cmd: Sequence[str] = ()) -> str:
    """The interface the kernel sends to `addr` through (`ip -j route get`)."""
    cmd = [*netns_cmd, "ip", "-j", "route", "get", addr]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RtlabError(f"cannot ask for the route to {addr}: {exc}") from exc
    try:
        dev = json.loads(r.stdout)[0]["dev"] if r.returncode == 0 else None
    except (ValueError, LookupError, TypeError):
        dev = None
    if not isinstance(dev, str) or not dev:
        raise RtlabError(f"no route to {addr}: {r.stderr.strip() or 'ip route get gave none'}")
    return dev


@dataclass
class HwTimestamping:
    """What enabling hardware timestamping on one interface did."""

    ifname: str
    ok: bool
    error: str | None = None
    old: dict[str, Any] = field(default_factory=dict)
    new: dict[str, Any] = field(default_factory=dict)

    def describe(self) -> dict[str, Any]:
        return {"interface": self.ifname, "ok": self.ok, "error": self.error,
                "old": self.old or None, "new": self.new or None}


def enable_hw_timestamping(session: Any, ifname: str) -> HwTimestamping:
    """Apply `hwtstamp_op(ifname)` in a held `SystemSession` (journaled; leaving the
    session restores the old configuration). A refusal (no hardware timestamping, a
    driver that cannot report its configuration) is returned, not raised."""
    ans = session.apply([hwtstamp_op(ifname)])[0]
    if not ans.get("ok"):
        return HwTimestamping(ifname, False, str(ans.get("error") or "refused"))
    return HwTimestamping(ifname, True, None, dict(ans.get("old") or {}),
                          dict(ans.get("new") or {}))
