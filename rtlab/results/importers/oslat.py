# SPDX-License-Identifier: MIT
"""oslat (rt-tests): its printed summary (v1.x, v2.x) or its `--json=FILE` (v2.x).

oslat spins on each CPU, reads a cycle counter in a loop and counts each gap in a
bucket of `-W` width (1 µs unless given, 2.5 on) and `-b` buckets (32 unless given).
Per CPU it prints one line per bucket, labelled with the bucket's **upper** edge
(`001 (us)` holds the gaps below 1 µs; `-B` adds a bias to every label), and its
last bucket **includes the overflows** (every gap beyond the range). Its minimum and
maximum are whole µs (ns with a `-W` that is no multiple of 1000), and they changed
meaning in 2.5: up to 2.4 they are rounded up like the labels (⌊gap⌋ + 1 µs), from
2.5 on truncated (⌊gap⌋). The importer decides which from the numbers themselves
(the lowest non-empty label equals the min up to 2.4 and lies one bucket above it
from 2.5 on), else from `CPU Freq` (1.x, 2.0–2.2) or the version line.

Stored, like every µs peer: each bucket at its lower edge (label − width), the min
and max truncated (so up to 2.4 one µs is taken off oslat's printed values). When
the max lies beyond the last bucket, that bucket's counts mix in-range gaps and
overflows: all of them are placed at the max and recorded in `beyond_range` (their
values are only known to lie between the bucket's lower edge and the max). oslat's
average is not used for the mean (it is computed from the labels and, for every
thread, adds the first thread's overflow excess): it is kept in the notes.
"""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass, field
from typing import Any

from rtlab.results.importers.common import (
    ImportFormatError,
    as_float,
    as_int,
    channel_from_buckets,
    imported_result,
    in_range,
    rt_tests_json,
)
from rtlab.results.model import Channel, RunResult

_VERSION_RE = re.compile(r"^oslat V (\d+\.\d+)")
_FIELD_RE = re.compile(r"^\s*([^:]+?):\s+(.*)$")
_BUCKET_RE = re.compile(r"^(\d+(?:\.\d{1,3})?) \(us\)$")
_BIAS_RE = re.compile(r"^Global bias set to (\d+(?:\.\d{1,3})?) \(us\)")
_SUFFIXES = (" (including overflows)", " (us)", " (sec)", " (Mhz)", " (MHz)")
_OLD_VERSIONS = ("2.30", "2.40")  # "Counter Freq" with rounded-up min/max


@dataclass
class _Thread:
    cpu: int
    buckets: dict[int, int] = field(default_factory=dict)  # upper edge ns -> count
    min_ns: int | None = None
    max_ns: int | None = None
    average: str | None = None
    duration_s: float | None = None


@dataclass
class _Oslat:
    threads: list[_Thread]
    version: str | None = None
    cpu_freq: bool = False  # the v1.x / early v2.x "CPU Freq" label
    bias: bool = False
    last_edge: int | None = None  # upper edge (ns) of the last bucket (with overflows)
    system: dict[str, Any] = field(default_factory=dict)
    argv: list[str] = field(default_factory=list)
    return_code: int | None = None


def parse(text: str, run_id: str) -> RunResult:
    data = _from_json(text) if text.lstrip().startswith("{") else _from_text(text)
    if not data.threads:
        raise ImportFormatError("no `Core:` line and no bucket lines: not an oslat output",
                                hint="import oslat's whole stdout or its --json file")
    width = _width(data)
    old = _rounded_up(data, width)
    channels, notes, beyond = [], [], {}
    for t in data.threads:
        ch, censored = _channel(t, data, width, old)
        channels.append(ch)
        if censored is not None:
            beyond[ch.name] = censored
            notes.append(f"{ch.name}: the max lies beyond oslat's last bucket, which includes "
                         f"the overflows: its {censored['count']:,} gap(s) are placed at the "
                         "max (true values between the bucket's lower edge and the max)")
        if t.average is not None:
            notes.append(f"{ch.name}: oslat's own average {t.average} µs (not used: computed "
                         "from the bucket labels)")
    notes.append("min and max " + ("printed rounded up by oslat (≤ 2.4), stored truncated (one "
                                   "µs less)" if old else "truncated, as oslat ≥ 2.5 prints "
                                   "them") + "; buckets at their lower edge (label − width)")
    durations = [t.duration_s for t in data.threads if t.duration_s is not None]
    return imported_result(
        run_id, probe="noise", tool="oslat", fmt="oslat", channels=channels,
        system=data.system, notes=notes, tool_version=data.version,
        elapsed_ns=round(max(durations) * 1e9) if durations else None, argv=data.argv,
        resolution_ns=width, beyond=beyond,
        status="completed" if data.return_code in (0, None) else "failed",
        extra={"bucket_width_ns": width, "rounded_up_min_max": old,
               **({"return_code": data.return_code} if data.return_code is not None else {})})


# the printed summary ---------------------------------------------------------------------


def _from_text(text: str) -> _Oslat:
    data = _Oslat(threads=[])
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.rstrip()
        if m := _VERSION_RE.match(line.strip()):
            data.version = m.group(1)
        elif _BIAS_RE.match(line.strip()):
            data.bias = True
        elif line.strip() == "...":
            continue
        elif (m := _FIELD_RE.match(line)) is not None:
            _field(data, m.group(1), m.group(2), lineno)
    return data


def _field(data: _Oslat, label: str, rest: str, lineno: int) -> None:
    """One `label:\\t v1 v2 ... (unit)` line of oslat's summary."""
    if label == "Core":
        data.threads = [_Thread(cpu=in_range(int(v), f"line {lineno}: core"))
                        for v in _values(rest, lineno, len(rest.split()))]
        return
    if not data.threads:
        return  # the configuration lines before the summary
    n = len(data.threads)
    if label in ("CPU Freq", "Counter Freq"):
        data.cpu_freq = label == "CPU Freq"
        _values(rest, lineno, n)
    elif (m := _BUCKET_RE.match(label)) is not None:
        edge = _us_to_ns(m.group(1), lineno)
        if edge in data.threads[0].buckets:
            raise ImportFormatError(f"line {lineno}: bucket {m.group(1)} (us) appears twice "
                                    "(two counts for one bucket)")
        for t, v in zip(data.threads, _values(rest, lineno, n), strict=True):
            t.buckets[edge] = in_range(int(v), f"line {lineno}: count")
        if rest.endswith("(including overflows)"):
            data.last_edge = edge
    elif label in ("Minimum", "Maximum"):
        for t, v in zip(data.threads, _values(rest, lineno, n), strict=True):
            setattr(t, "min_ns" if label == "Minimum" else "max_ns", _us_to_ns(v, lineno))
    elif label == "Average":
        for t, v in zip(data.threads, _values(rest, lineno, n), strict=True):
            t.average = v
    elif label == "Duration":
        for t, v in zip(data.threads, _values(rest, lineno, n), strict=True):
            t.duration_s = as_float(v, f"line {lineno}: duration")
    elif label not in ("Max-Min",):
        raise ImportFormatError(f"line {lineno}: unknown summary line {label!r}")


def _values(rest: str, lineno: int, n: int) -> list[str]:
    for suffix in _SUFFIXES:
        rest = rest.removesuffix(suffix)
    values = rest.split()
    if len(values) != n or not all(re.fullmatch(r"\d+(\.\d+)?", v) for v in values):
        raise ImportFormatError(f"line {lineno}: expected {n} number(s), got {rest.strip()!r}")
    return values


def _us_to_ns(text: str, lineno: int) -> int:
    """oslat's µs (whole, or with 3 decimals when its unit is the ns) in ns."""
    whole, _, frac = text.partition(".")
    if not whole.isdigit() or (frac and (not frac.isdigit() or len(frac) > 3)):
        raise ImportFormatError(f"line {lineno}: {text!r} is not a number of µs")
    return in_range(int(whole) * 1000 + int(frac.ljust(3, "0") or 0), f"line {lineno}: value")


# --json ----------------------------------------------------------------------------------


def _from_json(text: str) -> _Oslat:
    doc = rt_tests_json(text, "an oslat --json file")
    threads = [_json_thread(k, v) for k, v in sorted(
        doc["thread"].items(), key=lambda kv: as_int(kv[0], "thread index"))]
    ns_unit = any("." in str(k) for t in doc["thread"].values() if isinstance(t, dict)
                  for k in (t.get("histogram") or {}))
    if ns_unit:  # -W not a multiple of 1000: labels in µs with 3 decimals, min/max in ns
        for t in threads:
            t.min_ns = None if t.min_ns is None else t.min_ns // 1000
            t.max_ns = None if t.max_ns is None else t.max_ns // 1000
    sysinfo = doc.get("sysinfo") if isinstance(doc.get("sysinfo"), dict) else {}
    cmdline = doc.get("cmdline:", doc.get("cmdline"))
    rc = doc.get("return_code")
    return _Oslat(
        threads=threads, version=str(doc.get("rt_test_version:", doc.get("rt_test_version"))),
        system={k: sysinfo.get(src) for k, src in (
            ("hostname", "nodename"), ("sysname", "sysname"), ("release", "release"),
            ("version", "version"), ("machine", "machine"))},
        argv=str(cmdline).split() if cmdline else [],
        return_code=as_int(rc, "return_code") if rc is not None else None)


def _json_thread(key: str, t: Any) -> _Thread:
    what = f"thread {key}"
    if not isinstance(t, dict) or not isinstance(t.get("histogram"), dict):
        raise ImportFormatError(f"{what} has no histogram")
    th = _Thread(cpu=as_int(t.get("cpu"), f"{what} cpu"))
    for label, count in t["histogram"].items():
        edge = _us_to_ns(str(label), 0)
        if edge in th.buckets:
            raise ImportFormatError(f"{what}: bucket {label!r} appears twice (another "
                                    "spelling of one label)")
        th.buckets[edge] = as_int(count, f"{what} count of {label}")
    # min/max: whole µs, or ns when the labels have decimals (fixed in _from_json)
    th.min_ns = as_int(t["min"], f"{what} min") * 1000 if "min" in t else None
    th.max_ns = as_int(t["max"], f"{what} max") * 1000 if "max" in t else None
    if "avg" in t:
        th.average = f"{as_float(t['avg'], f'{what} avg'):.3f}"
    if "duration" in t:
        th.duration_s = as_float(t["duration"], f"{what} duration")
    return th


# meaning of the numbers ------------------------------------------------------------------


def _width(data: _Oslat) -> int:
    """The bucket width in ns: the gcd of the label steps (1 µs with a single label)."""
    edges = sorted({e for t in data.threads for e in t.buckets})
    if not edges:
        raise ImportFormatError("no bucket lines")
    if data.last_edge is None:
        data.last_edge = edges[-1]  # JSON: the highest label printed (empty ones are not)
    # without a bias the labels are multiples of the width, from one width on
    steps = [b - a for a, b in itertools.pairwise(edges)]
    width = math.gcd(*steps, *([] if data.bias else edges[:1]))
    return width or 1000


def _rounded_up(data: _Oslat, width: int) -> bool:
    """True when min and max are printed like the labels (⌊gap⌋ + 1 µs, oslat ≤ 2.4)."""
    votes = set()
    for t in data.threads:
        if t.min_ns is None or not any(t.buckets.values()):
            continue
        lowest = min(e for e, c in t.buckets.items() if c)
        if t.min_ns == lowest:
            votes.add(True)
        elif lowest - width <= t.min_ns < lowest:
            votes.add(False)
    if len(votes) == 1:
        return votes.pop()
    if len(votes) > 1:
        raise ImportFormatError("the minimum lies at the lowest bucket label for one CPU and "
                                "below it for another: not one oslat version's output")
    if data.cpu_freq:
        return True
    return data.version in _OLD_VERSIONS


def _channel(t: _Thread, data: _Oslat, width: int, old: bool
             ) -> tuple[Channel, dict[str, int] | None]:
    """One CPU's channel; the `beyond_range` entry when its last bucket holds overflows."""
    shift = 1000 if old else 0
    min_ns = None if t.min_ns is None else t.min_ns - shift
    max_ns = None if t.max_ns is None else t.max_ns - shift
    buckets = {edge - width: count for edge, count in t.buckets.items() if count}
    samples = sum(buckets.values())
    if data.bias and buckets and min_ns is not None and min(buckets) > min_ns:
        # -B: the gaps below the bias are counted in the first bucket
        buckets[min_ns] = buckets.pop(min(buckets))
    last_lo = (data.last_edge - width) if data.last_edge is not None else None
    censored = None
    if (last_lo is not None and max_ns is not None and last_lo in buckets
            and max_ns >= last_lo + width):
        censored = {"count": buckets.pop(last_lo), "above_ns": last_lo}
    name = f"cpu{t.cpu}"
    ch, _over, _above = channel_from_buckets(
        name, t.cpu, buckets, unit_ns=1, samples=samples, width=width,
        min_v=min_ns if samples else None, max_v=max_ns if samples else None)
    return ch, censored
