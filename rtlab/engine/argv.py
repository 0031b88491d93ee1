# SPDX-License-Identifier: MIT
"""Turning probe options (named like the engine header's `config` keys) into argv.

The mapping is generic so new probes need no code here: `foo_bar_ns` becomes
`--foo-bar DUR` (with a unit), lists of ints become CPU lists (`0,2-3`), True
becomes a bare flag, False/None are left out. A few keys whose flag differs
from the config key are in `_FLAG_NAMES`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rtlab.cpulist import format_cpulist

_FLAG_NAMES = {"samples_file": "samples", "threshold_ns": "stop-threshold"}
_UNITS = (("h", 3_600_000_000_000), ("m", 60_000_000_000), ("s", 1_000_000_000),
          ("ms", 1_000_000), ("us", 1_000), ("ns", 1))


def _duration(ns: int) -> str:
    for unit, size in _UNITS:
        if ns % size == 0:
            return f"{ns // size}{unit}"
    return f"{ns}ns"  # pragma: no cover - ns divides everything


def probe_args(probe: str, options: Mapping[str, Any]) -> list[str]:
    """['timer', '--cpus', '0-1', '--interval', '1ms', ...] (without the binary)."""
    args = [probe]
    for key in sorted(options):
        value = options[key]
        if value is None or value is False:
            continue
        name = _FLAG_NAMES.get(key)
        if name is None:
            name = key[:-3] if key.endswith("_ns") else key
            name = name.replace("_", "-")
        flag = f"--{name}"
        if value is True:
            args.append(flag)
        elif key.endswith("_ns"):
            args += [flag, _duration(int(value))]
        elif isinstance(value, list | tuple):
            args += [flag, format_cpulist([int(v) for v in value])]
        else:
            args += [flag, str(value)]
    return args
