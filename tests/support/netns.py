# SPDX-License-Identifier: MIT
"""Network namespaces for the udp/event end-to-end tests: created here, always deleted."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


@dataclass(frozen=True)
class VethPair:
    ns_a: str
    ns_b: str
    addr_a: str
    addr_b: str


@contextmanager
def veth_pair(tag: str, queues: int = 1) -> Iterator[VethPair]:
    """Namespaces rtl-<tag>-a/b joined by a veth pair, 10.231.0.1/2 (private), with
    `queues` RX and TX queues on each end."""
    suffix = f"{tag}-{os.getpid() % 100000}"
    a, b = f"rtl-{suffix}-a", f"rtl-{suffix}-b"
    q = ["numrxqueues", str(queues), "numtxqueues", str(queues)]
    try:
        _ip("netns", "add", a)
        _ip("netns", "add", b)
        _ip("link", "add", "rtlv-a", "netns", a, *q, "type", "veth", "peer", "name",
            "rtlv-b", "netns", b, *q)
        for ns, dev, addr in ((a, "rtlv-a", "10.231.0.1"), (b, "rtlv-b", "10.231.0.2")):
            _ip("-n", ns, "addr", "add", f"{addr}/24", "dev", dev)
            _ip("-n", ns, "link", "set", dev, "up")
            _ip("-n", ns, "link", "set", "lo", "up")
        yield VethPair(a, b, "10.231.0.1", "10.231.0.2")
    finally:
        for ns in (a, b):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, check=False)


@contextmanager
def loopback_ns(tag: str) -> Iterator[str]:
    """One namespace with only lo up (127.0.0.1 stays inside it)."""
    ns = f"rtl-{tag}-{os.getpid() % 100000}"
    try:
        _ip("netns", "add", ns)
        _ip("-n", ns, "link", "set", "lo", "up")
        yield ns
    finally:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True, check=False)


def in_ns(ns: str, *cmd: str) -> list[str]:
    return ["ip", "netns", "exec", ns, *cmd]
