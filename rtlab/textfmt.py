# SPDX-License-Identifier: MIT
"""Number text formatting, below every layer that shows numbers: the probes' summaries,
the analysis notes, the terminal report and the exporters; and how a bad value is
quoted in a message (`shown`). A run's recorded machine in words: rtlab.machine_text."""

from __future__ import annotations

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


SHOWN_CHARS = 60  # how much of a bad value a message quotes


def shown(value: object, limit: int = SHOWN_CHARS) -> str:
    """A value as an error message quotes it: repr-quoted (control characters escaped),
    cut to `limit` characters with the total length named, so a 10-MB argument is one
    short line."""
    text = value if isinstance(value, str) else str(value)
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}... ({len(text)} characters)"
