# SPDX-License-Identifier: MIT
"""Number (and provenance) text formatting, below every layer that shows numbers: the
probes' summaries, the analysis notes, the terminal report and the exporters."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rtlab.cpulist import format_cpulist

NA = "n/a"


def us(ns: float | None) -> str:
    """ns -> µs text with sensible precision: 3.21, 45.6, 2410."""
    if ns is None:
        return NA
    v = ns / 1000.0
    if v < 10:
        return f"{v:.2f}"
    if v < 100:
        return f"{v:.1f}"
    return f"{v:.0f}"


def bounded_us(ns: float | None, lower: float | None) -> str:
    """us(ns), or '≥ lower' when the value is only known to be at least `lower` (a
    percentile among samples beyond a peer tool's histogram range)."""
    return us(ns) if lower is None or ns is None else f"≥{us(lower)}"


def human(ns: float | None) -> str:
    """ns -> '850 ns', '12.3 µs', '2.41 ms', '1.20 s'."""
    if ns is None:
        return NA
    if ns < 1_000:
        return f"{ns:.0f} ns"
    for unit, size in (("µs", 1e3), ("ms", 1e6), ("s", 1e9)):
        v = ns / size
        if v < 1000 or unit == "s":
            prec = 2 if v < 10 else 1 if v < 100 else 0
            return f"{v:.{prec}f} {unit}"
    raise AssertionError("unreachable")  # pragma: no cover


def seconds(ns: float | None) -> str:
    """A run time: '13.3 s' below 1000 s, else '5:02:19' or '2 d 06:02:19'."""
    if ns is None:
        return NA
    s = ns / 1e9
    if abs(s) < 999.95:
        return f"{s:.1f} s"
    whole = round(s)
    d, rest = divmod(whole, 86400)
    h, rest = divmod(rest, 3600)
    m, sec = divmod(rest, 60)
    return (f"{d} d " if d else "") + f"{h:d}:{m:02d}:{sec:02d}"


def duration(ns: float | None) -> str:
    """A length of time for prose: '45.0 s', '12 min', '5.2 h', '7.0 days'."""
    if ns is None:
        return NA
    if ns == float("inf"):
        return "never"
    s = ns / 1e9
    for unit, size in (("years", 365.25 * 86400), ("days", 86400), ("h", 3600), ("min", 60)):
        if s >= 2 * size or (unit in ("h", "min") and s >= size):
            return f"{s / size:.3g} {unit}"
    return f"{s:.3g} s"


def preemption(system: Mapping[str, Any]) -> str | None:
    """The recorded preemption model with where the engine read it, e.g.
    "none (kernel config default: /proc/config.gz (CONFIG_PREEMPT_NONE=y); live mode
    unreadable: debugfs not mounted)"; None when nothing was recorded."""
    model = system.get("preempt")
    if not model:
        return None
    why = [str(system["preempt_source"])] if system.get("preempt_source") else []
    if system.get("preempt_live_error"):
        why.append(f"live mode unreadable: {system['preempt_live_error']}")
    return f"{model} ({'; '.join(why)})" if why else str(model)


def core_groups(system: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The recorded cores as (CPU list, name) pairs, e.g. [("0-3", "Cortex-A55"),
    ("4-7", "Cortex-A76")], from `cpu_models` (docs/engine-output.md#cpu-model); [] when
    not recorded (an older engine) or malformed."""
    out: list[tuple[str, str]] = []
    for g in system.get("cpu_models") or []:
        if isinstance(g, Mapping) and isinstance(g.get("model"), str) and isinstance(
                g.get("cpus"), list):
            out.append((format_cpulist(int(c) for c in g["cpus"]), g["model"]))
    return out


def processor(system: Mapping[str, Any]) -> str | None:
    """The recorded CPU model, and which CPUs are which core when they differ:
    "Cortex-A53", "4x Cortex-A55 + 4x Cortex-A76 (CPUs 0-3 Cortex-A55, 4-7 Cortex-A76)";
    None when nothing was recorded."""
    model = system.get("cpu_model")
    if not model:
        return None
    groups = core_groups(system)
    if len(groups) < 2:
        return str(model)
    return f"{model} (CPUs " + ", ".join(f"{c} {m}" for c, m in groups) + ")"


SHOWN_CHARS = 60  # how much of a bad value a message quotes


def shown(value: object, limit: int = SHOWN_CHARS) -> str:
    """A value as an error message quotes it: repr-quoted (control characters escaped),
    cut to `limit` characters with the total length named, so a 10-MB argument is one
    short line."""
    text = value if isinstance(value, str) else str(value)
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}... ({len(text)} characters)"
