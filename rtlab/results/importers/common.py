# SPDX-License-Identifier: MIT
"""Shared pieces of the importers: errors, number checks, channels from peer histograms.

Placement rules (docs/results.md#importing-peer-tools-files): a peer's bucket k holds
the values [k, k + width) units; its counts go to the bucket's lower edge, but never
below the peer's min, and one count of the bucket that holds the peer's max goes to
that max, so the stored histogram agrees with the stored min and max
(rtlab.results.validate). Samples beyond the peer's range are placed at the max
(upper bounds; `beyond_range` says how many and from where).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rtlab import __version__
from rtlab.results.histogram import LogLinHistogram
from rtlab.results.model import Channel, Phase, RunResult

INT64_MAX = (1 << 63) - 1


class ImportFormatError(ValueError):
    """The file is not (a complete) file of the format; the message says what is wrong."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ImportFormatError(f"key {key!r} appears twice in one object ({out[key]!r} "
                                    f"and {value!r}): which one is meant is unknown")
        out[key] = value
    return out


def load_json(text: str) -> Any:
    """`json.loads`, refusing an object that names a key twice (the file says two things
    about one bucket, thread or field; json.loads would silently keep the last). Raises
    json.JSONDecodeError on invalid JSON, ImportFormatError on a repeated key."""
    return json.loads(text, object_pairs_hook=_unique_keys)


def json_document(text: str, key: str, what: str,
                  invalid: Callable[[json.JSONDecodeError], ImportFormatError] | None = None
                  ) -> dict[str, Any]:
    """A peer's JSON file read whole (`load_json`): an object that holds the object `key`,
    else "no `key` object: not WHAT". Text that is not JSON is "invalid JSON (...)", or
    what `invalid` makes of the decoder's error."""
    try:
        doc = load_json(text)
    except ImportFormatError:
        raise
    except json.JSONDecodeError as exc:
        raise (invalid(exc) if invalid is not None
               else ImportFormatError(f"invalid JSON ({exc})")) from None
    except ValueError as exc:
        raise ImportFormatError(f"invalid JSON ({exc})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get(key), dict):
        raise ImportFormatError(f"no `{key}` object: not {what}")
    return doc


def rt_tests_json(text: str, what: str) -> dict[str, Any]:
    """The `--json=FILE` of an rt-tests tool (cyclictest, oslat: `what` names it): its
    `thread` object and file_version 1, the one they write."""
    doc = json_document(text, "thread", what)
    version = doc.get("file_version")
    if version != 1:
        raise ImportFormatError(f"unsupported file_version {version!r} (this rtlab reads 1)")
    return doc


def int_keyed(items: Mapping[str, Any], what: str) -> dict[int, int]:
    """{int(key): int(count)} of a peer's histogram object, refusing two spellings of one
    bucket ("5" and "05")."""
    out: dict[int, int] = {}
    for k, v in items.items():
        key = as_int(k, f"{what} bucket")
        if key in out:
            raise ImportFormatError(f"{what}: bucket {key} appears twice ({k!r} and another "
                                    "spelling)")
        out[key] = as_int(v, f"{what} count")
    return out


def need(d: Mapping[str, Any], key: str, what: str) -> Any:
    """d[key], or an ImportFormatError naming what is missing."""
    if not isinstance(d, Mapping) or key not in d or d[key] is None:
        raise ImportFormatError(f"{what} has no `{key}`")
    return d[key]


def in_range(v: int, what: str) -> int:
    """`v` when it fits a signed 64-bit integer (what the store and the engine hold)."""
    if not -INT64_MAX - 1 <= v <= INT64_MAX:
        raise ImportFormatError(f"{what} {v} is beyond the 64-bit integer range")
    return v


def as_int(v: Any, what: str) -> int:
    if isinstance(v, bool):
        raise ImportFormatError(f"{what} is not a number: {v!r}")
    if isinstance(v, int):
        return in_range(v, what)
    if isinstance(v, float) and v.is_integer():
        return in_range(int(v), what)
    if isinstance(v, str) and v.strip().lstrip("-").isdigit():
        return in_range(int(v.strip()), what)
    raise ImportFormatError(f"{what} is not an integer: {v!r}")


def as_float(v: Any, what: str) -> float:
    if isinstance(v, bool):
        raise ImportFormatError(f"{what} is not a number: {v!r}")
    try:
        f = float(v)
    except (TypeError, ValueError):
        raise ImportFormatError(f"{what} is not a number: {v!r}") from None
    if not math.isfinite(f) or abs(f) > INT64_MAX:
        raise ImportFormatError(f"{what} is not a finite number in range: {v!r}")
    return f


def _sum_from_avg(name: str, avg: float, total: int, min_ns: int, max_ns: int,
                  unit_ns: int) -> int:
    """The sum of a channel from the peer's printed average, kept within [min, max]
    (the peer rounds its average; beyond rounding, the file contradicts itself)."""
    sum_ns = round(avg * unit_ns * total)
    lo, hi = min_ns * total, max_ns * total
    slack = unit_ns * total  # printed averages are rounded to at most 1 unit
    if not lo - slack <= sum_ns <= hi + slack:
        raise ImportFormatError(f"{name}: average {avg} lies outside [min, max]")
    return in_range(min(max(sum_ns, lo), hi), f"{name}: sum of the samples")


def channel_from_buckets(
    name: str, cpu: int | None, buckets: Mapping[int, int], *, unit_ns: int,
    samples: int | None = None, min_v: int | None = None, max_v: int | None = None,
    avg_v: float | None = None, width: int = 1,
) -> tuple[Channel, int, int]:
    """A channel from fixed-width bucket counts (bucket k holds values [k, k+width) units).

    Returns the channel, the number of samples beyond the histogram (placed at the
    max) and a lower bound of their values (ns): the end of the highest non-empty
    bucket, or the min. `samples` is the tool's total count (None: the histogram's sum).
    Raises ImportFormatError when the numbers contradict each other.
    """
    for what, v in (("min", min_v), ("max", max_v), ("avg", avg_v)):
        if v is not None and v < 0:
            raise ImportFormatError(f"{name}: negative {what} {v}")
    if min_v is not None and max_v is not None and min_v > max_v:
        raise ImportFormatError(f"{name}: min {min_v} is above max {max_v}")
    filled = {}
    for k, count in sorted(buckets.items()):
        if k < 0 or count < 0:
            raise ImportFormatError(f"negative histogram bucket or count in {name}: {k}: {count}")
        in_range(k * unit_ns, f"{name}: bucket {k}")
        if count:
            filled[k] = in_range(count, f"{name}: count of bucket {k}")
    in_hist = sum(filled.values())
    total = in_range(in_hist if samples is None else samples, f"{name}: sample count")
    if total < in_hist:
        raise ImportFormatError(f"{name}: count {total} is smaller than the histogram's sum "
                                f"{in_hist}")
    overflow = total - in_hist
    min_ns = in_range(min_v * unit_ns, f"{name}: min") if min_v is not None else (
        min(filled) * unit_ns if filled else None)
    max_ns = in_range(max_v * unit_ns, f"{name}: max") if max_v is not None else (
        max(filled) * unit_ns if filled else None)
    hist = LogLinHistogram()
    placed = _place_buckets(name, hist, filled, unit_ns, width, min_ns, max_ns,
                            overflow, max_v is not None)
    top_k = max(filled, default=None)
    above_ns = (top_k + width) * unit_ns if top_k is not None else (min_ns or 0)
    if overflow and max_v is not None and top_k is not None and max_v < top_k + width:
        # a sample beyond the histogram is at least the end of its highest bucket
        raise ImportFormatError(f"{name}: {overflow:,} sample(s) beyond the histogram "
                                f"(count {total:,}, histogram {in_hist:,}) but max {max_v} is "
                                f"below the end of its highest non-empty bucket "
                                f"({top_k}..{top_k + width})")
    if overflow:
        placed += _place_overflow(name, hist, overflow, in_hist, min_ns, max_ns)
    if avg_v is not None and total and min_ns is not None and max_ns is not None:
        sum_ns = _sum_from_avg(name, avg_v, total, min_ns, max_ns, unit_ns)
    else:
        sum_ns = in_range(placed, f"{name}: sum of the samples")
    ch = Channel(name=name, cpu=cpu, samples=total, min_ns=min_ns if total else None,
                 max_ns=max_ns if total else None, sum_ns=sum_ns if total else 0, hist=hist)
    if overflow and max_ns is not None:
        above_ns = min(max(above_ns, min_ns or 0), max_ns)
    return ch, overflow, above_ns


def uname_system(sysinfo: Mapping[str, Any]) -> dict[str, Any]:
    """rtlab's system facts from a peer's `sysinfo` object, which holds uname's fields
    (cyclictest's, jitterdebugger's)."""
    return {"hostname": sysinfo.get("nodename"), "sysname": sysinfo.get("sysname"),
            "release": sysinfo.get("release"), "version": sysinfo.get("version"),
            "machine": sysinfo.get("machine")}


def channel_from_record(name: str, cpu: int | None, buckets: Mapping[int, int],
                        record: Mapping[str, Any], what: str, samples: int, unit_ns: int
                        ) -> tuple[Channel, int, int]:
    """`channel_from_buckets` for a peer's JSON record of one thread (cyclictest's
    `thread.N`, jitterdebugger's `cpu.N`): its `min` and `max` (needed when it counted
    samples) and `avg` (when there), in the peer's unit; `what` names it in messages."""
    avg = record.get("avg")
    return channel_from_buckets(
        name, cpu, buckets, unit_ns=unit_ns, samples=samples,
        min_v=as_int(need(record, "min", what), f"{what} min") if samples else None,
        max_v=as_int(need(record, "max", what), f"{what} max") if samples else None,
        avg_v=as_float(avg, f"{what} avg") if samples and avg is not None else None)


def _place_buckets(name: str, hist: LogLinHistogram, filled: Mapping[int, int], unit_ns: int,
                   width: int, min_ns: int | None, max_ns: int | None, overflow: int,
                   max_given: bool) -> int:
    """Put every bucket's counts into `hist` (lower edge, not below the min; one count at
    the max in the bucket that holds it); the sum of the values placed."""
    placed = 0
    max_seen = not max_given or overflow > 0
    if filled and min_ns is not None and min(filled) * unit_ns > min_ns:
        raise ImportFormatError(f"{name}: min {min_ns // unit_ns} lies below the lowest "
                                f"histogram bucket {min(filled)}")
    for k, count in filled.items():
        lo, end = k * unit_ns, (k + width) * unit_ns
        if max_ns is not None and lo > max_ns:
            raise ImportFormatError(f"{name}: bucket {k} holds {count} sample(s) above the "
                                    f"max {max_ns // unit_ns}")
        if min_ns is not None and end <= min_ns:
            raise ImportFormatError(f"{name}: bucket {k} holds {count} sample(s) below the "
                                    f"min {min_ns // unit_ns}")
        at = max(lo, min_ns) if min_ns is not None else lo
        if max_ns is not None and lo <= max_ns < end and max_ns != at:
            hist.add(max_ns, 1)
            placed += max_ns
            count -= 1
            max_seen = True
        elif max_ns is not None and lo <= max_ns < end:
            max_seen = True
        if count:
            hist.add(at, count)
            placed += at * count
    if not max_seen and filled:
        raise ImportFormatError(f"{name}: max {max_ns // unit_ns if max_ns else max_ns} "
                                "lies in no histogram bucket and no sample is beyond it")
    return placed


def _place_overflow(name: str, hist: LogLinHistogram, overflow: int, in_hist: int,
                    min_ns: int | None, max_ns: int | None) -> int:
    """Samples beyond the histogram at the max; when all are beyond, the min is one of
    them. The sum of the values placed."""
    if max_ns is None:
        raise ImportFormatError(f"{name}: {overflow} samples beyond the histogram and no max")
    if in_hist == 0 and min_ns is not None and min_ns != max_ns:
        hist.add(min_ns, 1)
        hist.add(max_ns, overflow - 1)
        return min_ns + max_ns * (overflow - 1)
    hist.add(max_ns, overflow)
    return max_ns * overflow


def channel_from_ranks(name: str, cpu: int | None, points: Sequence[tuple[int, int]],
                       sum_ns: int) -> Channel:
    """A channel of which only some order statistics are known: `points` are (rank, value
    ns), 1-based ranks, the first rank 1 (the min) and the last the sample count (the
    max). The samples between two known ranks are placed at the upper one's value, so
    every percentile computed from the channel is an upper bound of the true one, exact
    at the known ranks."""
    hist = LogLinHistogram()
    prev_rank, prev_value = 0, -1
    for rank, value in points:
        if rank <= prev_rank:  # two percentiles of one rank (few samples): one sample
            if value != prev_value:
                raise ImportFormatError(f"{name}: rank {rank} is given two values "
                                        f"({prev_value} and {value} ns): one sample has one "
                                        "value")
            continue
        if value < prev_value:
            raise ImportFormatError(f"{name}: the value at rank {rank} ({value} ns) is below "
                                    f"the one at rank {prev_rank} ({prev_value} ns)")
        hist.add(in_range(value, f"{name}: value"), rank - prev_rank)
        prev_rank, prev_value = rank, value
    total = prev_rank
    min_ns, max_ns = points[0][1], points[-1][1]
    sum_ns = min(max(sum_ns, min_ns * total), max_ns * total)
    return Channel(name=name, cpu=cpu, samples=total, min_ns=min_ns, max_ns=max_ns,
                   sum_ns=in_range(sum_ns, f"{name}: sum of the samples"), hist=hist)


def imported_result(
    run_id: str, *, probe: str, tool: str, fmt: str, channels: list[Channel],
    system: dict[str, Any], elapsed_ns: int | None = None, notes: list[str] | None = None,
    tool_version: str | None = None, argv: list[str] | None = None,
    start_wall: str | None = None, end_wall: str | None = None, resolution_ns: int = 1000,
    status: str = "completed", extra: dict[str, Any] | None = None,
    beyond: dict[str, dict[str, int]] | None = None, partial: bool = False,
) -> RunResult:
    """`beyond`: per channel name, samples the peer counted beyond its histogram range
    ({"count", "above_ns"}: placed at the max, their true values are >= above_ns);
    percentiles among them are only known to lie in [above_ns, max]. `partial`: part of
    the measurement is missing from the file (status `partial`, e.g. only a summary)."""
    imported = {"format": fmt, "tool": tool, "tool_version": tool_version,
                "resolution_ns": resolution_ns, **(extra or {})}
    if beyond:
        imported["beyond_range"] = beyond
    return RunResult(
        run_id=run_id, status="partial" if partial else status, probe=probe,
        phases=[Phase("main", channels, elapsed_ns)],
        notes=[f"imported from {tool} ({fmt}); resolution {resolution_ns} ns", *(notes or [])],
        rt_valid=None, partial=partial,
        scenario={"name": f"imported:{tool}", "hash": None},
        provenance={
            "engine": {"engine_version": None, "argv": argv or [], "system": system},
            "host": {"rtlab_version": __version__, "hostname": system.get("hostname"),
                     "start_wall": start_wall, "end_wall": end_wall, "transport": None},
            "imported": imported,
        },
    )
