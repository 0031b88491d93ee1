# SPDX-License-Identifier: MIT
"""Network addresses as the user writes them: `ADDR:PORT` of a peer (an IPv4 address,
or [IPv6]:PORT), for `--peer` and a scenario's [reflector] address."""

from __future__ import annotations

import ipaddress

from rtlab.errors import UsageError


def parse_peer(text: str) -> tuple[str, int]:
    """`ADDR:PORT` (IPv4, or [IPv6]:PORT) -> (addr, port); UsageError with one line."""
    host, sep, port = text.rpartition(":")
    host = host.strip("[]")
    try:
        ipaddress.ip_address(host)
        p = int(port)
    except ValueError:
        p = -1
    if not sep or not 1 <= p <= 65535:
        raise UsageError(f"--peer {text}: expected ADDR:PORT, e.g. 192.0.2.7:7400")
    return host, p
