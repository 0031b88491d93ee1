# SPDX-License-Identifier: MIT
"""What a run on a board needs to know before it starts: the board's CPUs, and whether
the scenario asks for something that is not available on a board."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rtlab.cpulist import parse_cpulist
from rtlab.engine.snapshot import record_bytes, snapshot
from rtlab.engine.transport import Transport
from rtlab.errors import RtlabError, UsageError
from rtlab.loads.board import board_kind_error
from rtlab.scenario.units import online_cpus


def target_online_cpus(transport: Transport) -> list[int]:
    """The online CPUs of the target (a board's, read there by its engine)."""
    if transport.is_local:

        return online_cpus()

    online = "/sys/devices/system/cpu/online"  # one file, not every task (`sys facts`)
    recs = [r for r in snapshot(transport, [online]) if r.get("type") == "file"]
    try:
        cpus = parse_cpulist(record_bytes(recs[0]).decode(), strides=True) if recs else []
    except ValueError:
        cpus = []
    if not cpus:
        raise RtlabError(f"cannot read the online CPUs of {transport.target} ({online})")
    return cpus


def check_remote(variants: Sequence[Any], transport: Transport) -> None:
    """UsageError (one line, nothing started) for what a board run cannot do yet."""
    where = transport.target
    for sc in variants:
        for ld in sc.loads:  # stress, builtin and rt-competitor run on boards

            why = board_kind_error(ld.kind, where)
            if why is not None:
                raise UsageError(f"scenario {sc.name}, load {ld.name}: {why}")
