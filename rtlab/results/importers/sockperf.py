# SPDX-License-Identifier: MIT
"""sockperf ping-pong `--full-log FILE`: one CSV row per message.

The file holds sockperf's summary text, then `packet, txTime(sec), rxTime(sec),
rtt(usec)` and one row per round trip. Every round trip time becomes a sample
(ns, sockperf prints µs with 3 decimals); per-window maxima are built from the
send times (1 s windows). The printed percentile summary alone (sockperf's
stdout) is not a histogram and is refused with a hint.
"""

from __future__ import annotations

import re

from rtlab.results.histogram import LogLinHistogram
from rtlab.results.importers.common import ImportFormatError, imported_result
from rtlab.results.model import Channel, RunResult

WINDOW_NS = 1_000_000_000
_VERSION_RE = re.compile(r"version #?([0-9][0-9A-Za-z.\-]*)")
_DROP_RE = re.compile(r"# dropped messages = (\d+); # duplicated messages = (\d+); "
                      r"# out-of-order messages = (\d+)")


def parse(text: str, run_id: str) -> RunResult:
    lines = text.splitlines()
    try:
        start = next(i for i, ln in enumerate(lines)
                     if ln.replace(" ", "").lower().startswith("packet,txtime"))
    except StopIteration:
        hint = None
        if "percentile" in text and "sockperf" in text:
            hint = "run `sockperf ping-pong ... --full-log FILE` and import FILE"
        raise ImportFormatError("no `packet, txTime(sec), rxTime(sec), rtt(usec)` table: not a "
                                "sockperf --full-log file", hint=hint) from None
    head = "\n".join(lines[:start])
    version = _VERSION_RE.search(head)
    notes: list[str] = []
    drops = _DROP_RE.search(head)
    if drops and any(int(x) for x in drops.groups()):
        notes.append(f"sockperf reported {drops.group(1)} dropped, {drops.group(2)} duplicated "
                     f"and {drops.group(3)} out-of-order messages")
    hist = LogLinHistogram()
    windows: dict[int, list[int]] = {}
    n = total = 0
    lo = hi = None
    hi_at = None
    t0 = None
    for lineno in range(start + 1, len(lines)):
        line = lines[lineno].strip()
        if not line or line.startswith("-"):
            continue
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 4:
            raise ImportFormatError(f"line {lineno + 1}: expected 4 comma-separated fields")
        try:
            tx = float(parts[1])
            rtt_ns = round(float(parts[3]) * 1000)
        except ValueError:
            raise ImportFormatError(f"line {lineno + 1}: not a number in {line[:40]!r}") from None
        if rtt_ns < 0:
            raise ImportFormatError(f"line {lineno + 1}: negative round trip time")
        if t0 is None:
            t0 = tx
        at = round((tx - t0) * 1e9)
        hist.add(rtt_ns)
        n += 1
        total += rtt_ns
        lo = rtt_ns if lo is None else min(lo, rtt_ns)
        if hi is None or rtt_ns > hi:
            hi, hi_at = rtt_ns, at
        w = windows.setdefault(at // WINDOW_NS, [0, 0])
        w[0] = max(w[0], rtt_ns)
        w[1] += 1
    if n == 0:
        raise ImportFormatError("the --full-log table has no rows")
    ch = Channel(name="rtt", cpu=None, samples=n, min_ns=lo, max_ns=hi, sum_ns=total,
                 max_at_ns=hi_at, hist=hist, window_ns=WINDOW_NS,
                 windows=[(i, v[0], v[1]) for i, v in sorted(windows.items())])
    elapsed = (max(windows) + 1) * WINDOW_NS
    return imported_result(
        run_id, probe="udp", tool="sockperf", fmt="sockperf", channels=[ch], system={},
        elapsed_ns=elapsed, notes=notes, tool_version=version.group(1) if version else None,
        resolution_ns=1, extra={"measure": "round-trip time"})
