# SPDX-License-Identifier: MIT
"""Shared pieces of the importers: errors, channels from 1-µs bucket counts."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rtlab import __version__
from rtlab.results.histogram import LogLinHistogram
from rtlab.results.model import Channel, Phase, RunResult


class ImportFormatError(ValueError):
    """The file is not (a complete) file of the format; the message says what is wrong."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint


def need(d: Mapping[str, Any], key: str, what: str) -> Any:
    """d[key], or an ImportFormatError naming what is missing."""
    if not isinstance(d, Mapping) or key not in d or d[key] is None:
        raise ImportFormatError(f"{what} has no `{key}`")
    return d[key]


def as_int(v: Any, what: str) -> int:
    if isinstance(v, bool):
        raise ImportFormatError(f"{what} is not a number: {v!r}")
    if isinstance(v, int):
        return v
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if isinstance(v, str) and v.strip().lstrip("-").isdigit():
        return int(v.strip())
    raise ImportFormatError(f"{what} is not an integer: {v!r}")


def as_float(v: Any, what: str) -> float:
    if isinstance(v, bool):
        raise ImportFormatError(f"{what} is not a number: {v!r}")
    try:
        return float(v)
    except (TypeError, ValueError):
        raise ImportFormatError(f"{what} is not a number: {v!r}") from None


def channel_from_buckets(
    name: str, cpu: int | None, buckets: Mapping[int, int], *, unit_ns: int,
    samples: int | None = None, min_v: int | None = None, max_v: int | None = None,
    avg_v: float | None = None, width: int = 1,
) -> tuple[Channel, int, int]:
    """A channel from fixed-width bucket counts (bucket k holds values [k, k+width) units).

    Returns the channel, the number of samples beyond the histogram (placed at the
    max) and a lower bound of their values (ns): the end of the highest non-empty
    bucket, or the min. `samples` is the tool's total count (None: the histogram's sum).
    """
    for what, v in (("min", min_v), ("max", max_v), ("avg", avg_v)):
        if v is not None and v < 0:
            raise ImportFormatError(f"{name}: negative {what} {v}")
    if min_v is not None and max_v is not None and min_v > max_v:
        raise ImportFormatError(f"{name}: min {min_v} is above max {max_v}")
    hist = LogLinHistogram()
    in_hist = 0
    for k, count in sorted(buckets.items()):
        if k < 0 or count < 0:
            raise ImportFormatError(f"negative histogram bucket or count in {name}: {k}: {count}")
        if count:
            hist.add(k * unit_ns, count)
            in_hist += count
    total = in_hist if samples is None else samples
    if total < in_hist:
        raise ImportFormatError(f"{name}: count {total} is smaller than the histogram's sum "
                                f"{in_hist}")
    overflow = total - in_hist
    max_ns = max_v * unit_ns if max_v is not None else None
    if max_ns is None and hist.total:
        max_ns = max(b.lo for b in hist.buckets())
    top_k = max((k for k, c in buckets.items() if c), default=None)
    above_ns = (top_k + width) * unit_ns if top_k is not None else (min_v or 0) * unit_ns
    if overflow:
        if max_ns is None:
            raise ImportFormatError(f"{name}: {overflow} samples beyond the histogram and no max")
        hist.add(max_ns, overflow)
    min_ns = min_v * unit_ns if min_v is not None else (
        min((b.lo for b in hist.buckets()), default=None))
    if avg_v is not None:
        sum_ns = round(avg_v * unit_ns * total)
    else:
        sum_ns = sum(b.lo * b.count for b in hist.buckets())
    ch = Channel(name=name, cpu=cpu, samples=total, min_ns=min_ns if total else None,
                 max_ns=max_ns if total else None, sum_ns=sum_ns, hist=hist)
    if overflow and max_ns is not None:
        above_ns = min(max(above_ns, min_ns or 0), max_ns)
    return ch, overflow, above_ns


def imported_result(
    run_id: str, *, probe: str, tool: str, fmt: str, channels: list[Channel],
    system: dict[str, Any], elapsed_ns: int | None = None, notes: list[str] | None = None,
    tool_version: str | None = None, argv: list[str] | None = None,
    start_wall: str | None = None, end_wall: str | None = None, resolution_ns: int = 1000,
    status: str = "completed", extra: dict[str, Any] | None = None,
    beyond: dict[str, dict[str, int]] | None = None,
) -> RunResult:
    """`beyond`: per channel name, samples the peer counted beyond its histogram range
    ({"count", "above_ns"}: placed at the max, their true values are >= above_ns);
    percentiles among them are only known to lie in [above_ns, max]."""
    imported = {"format": fmt, "tool": tool, "tool_version": tool_version,
                "resolution_ns": resolution_ns, **(extra or {})}
    if beyond:
        imported["beyond_range"] = beyond
    return RunResult(
        run_id=run_id, status=status, probe=probe,
        phases=[Phase("main", channels, elapsed_ns)],
        notes=[f"imported from {tool} ({fmt}); resolution {resolution_ns} ns", *(notes or [])],
        rt_valid=None,
        scenario={"name": f"imported:{tool}", "hash": None},
        provenance={
            "engine": {"engine_version": None, "argv": argv or [], "system": system},
            "host": {"rtlab_version": __version__, "hostname": system.get("hostname"),
                     "start_wall": start_wall, "end_wall": end_wall, "transport": None},
            "imported": imported,
        },
    )
