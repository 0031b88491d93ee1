# SPDX-License-Identifier: MIT
"""sockperf ping-pong: the `--full-log FILE` table, or its printed summary alone.

**What is stored: the round trip.** sockperf measures rxTime − txTime of each
message and, unless run with `--full-rtt` (3.6 on), reports *half* of it as
"latency" (`avg-lat`, `avg-latency`, the percentiles, the `latency(usec)` column).
rtlab stores the round trip in every case (channel `rtt`, like its own udp probe):
from the full log it is rxTime − txTime of every row (ns, exact from sockperf's
9-decimal times), from a summary of half round trips each value is doubled. The
notes say which quantity sockperf printed.

Full-log layouts (sockperf writes its summary lines first, then the table between
two `------------------------------` lines):

* up to 3.3: `txTime, rxTime` and rows `tx, rx` (seconds, 9 decimals);
* 3.4, 3.5: `packet, txTime(sec), rxTime(sec), latency(usec)` (half round trip);
* 3.6 on: the same, or `rtt(usec)` with `--full-rtt`.

A table without its closing line, with a missing or repeated packet number, a row
whose printed value disagrees with its own times, or fewer rows than the
observations sockperf counted is a cut or damaged file: refused, naming the line.

**Summary only** (sockperf's stdout, no full log): sockperf prints the number of
observations, min, max, average and fixed percentiles (p25 … p99.999; 2.x: p25 …
p99.99). rtlab's result model holds a histogram, not a list of percentiles, so the
import keeps what sockperf printed and is flagged `partial`: the count is exact; min,
max and mean are sockperf's, doubled (it cuts each half round trip to the ns, so they
sit 0-3 ns below the full log's rxTime − txTime, measured with 3.7); each published
percentile is the sample of its rank (sockperf's `(int)(0.5 + p·N)`), and the samples
between two published ranks are placed at the upper one's value. Every percentile
rtlab computes is then an upper bound of the true one, exact at the published ones;
the published values are kept as printed in `provenance.imported.summary_only`. No window maxima.
"""

from __future__ import annotations

import re

from rtlab.results.histogram import LogLinHistogram
from rtlab.results.importers.common import (
    ImportFormatError,
    channel_from_ranks,
    imported_result,
    in_range,
)
from rtlab.results.model import Channel, RunResult

WINDOW_NS = 1_000_000_000
_ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_VERSION_RE = re.compile(r"version #?([0-9][0-9A-Za-z.\-]*)")
_DROP_RE = re.compile(r"# dropped messages = (\d+); # duplicated messages = (\d+); "
                      r"# out-of-order messages = (\d+)")
_TOTAL_RE = re.compile(r"Total (\d+) observations")
_MAXMIN_RE = re.compile(r"---> <(MAX|MIN)> observation =\s*(\S+)")
_PCT_RE = re.compile(r"---> percentile\s+(\S+)\s*=\s*(\S+)")
_AVG_RE = re.compile(r"====> avg-(lat|latency|rtt)=\s*(\S+)")
_SERVER_RE = re.compile(r"Printing statistics for Server No:\s*(\d+)")
_SECONDS_RE = re.compile(r"(\d+)\.(\d{1,9})")
_USEC_RE = re.compile(r"(\d+)\.(\d{1,3})")
# the percentiles sockperf prints (2.x: the first list, 3.x: the second)
_PERCENTILES = (0.9999, 0.999, 0.995, 0.99, 0.95, 0.90, 0.75, 0.50, 0.25, 0.99999)
_HALF = "half the round trip (sockperf's `latency`)"
_FULL = "the round trip (sockperf --full-rtt)"


def parse(text: str, run_id: str) -> RunResult:
    lines = [_ANSI_RE.sub("", ln).rstrip("\r") for ln in text.splitlines()]
    tables = [i for i, ln in enumerate(lines) if _table_kind(ln) is not None]
    if len(tables) > 1:
        raise ImportFormatError(f"line {tables[1] + 1}: a second --full-log table (one per "
                                "server): importing several servers is not supported")
    servers = {m.group(1) for ln in lines if (m := _SERVER_RE.search(ln))}
    if len(servers) > 1:
        raise ImportFormatError(f"statistics of {len(servers)} servers: importing several "
                                "servers is not supported")
    if not tables:
        return _summary_only(lines, run_id)
    return _full_log(lines, tables[0], run_id)


def _table_kind(line: str) -> str | None:
    """`old` (txTime, rxTime), `latency` (4 columns, half round trip) or `rtt`."""
    flat = line.replace(" ", "").lower()
    if flat == "txtime,rxtime":
        return "old"
    if flat.startswith("packet,txtime(sec),rxtime(sec),"):
        return "rtt" if flat.endswith(",rtt(usec)") else "latency"
    return None


def _ns(text: str, what: str, lineno: int, pattern: re.Pattern[str] = _SECONDS_RE,
        digits: int = 9) -> int:
    """A decimal number of sockperf's (seconds with 9 decimals, or µs with 3) in ns."""
    m = pattern.fullmatch(text.strip())
    if m is None:
        raise ImportFormatError(f"line {lineno}: {what} {text.strip()!r} is not a number "
                                f"with up to {digits} decimals")
    # seconds with 9 decimals and µs with 3 are both whole ns
    ns = int(m.group(1)) * 10 ** digits + int(m.group(2).ljust(digits, "0"))
    return in_range(ns, f"line {lineno}: {what}")


def _full_log(lines: list[str], start: int, run_id: str) -> RunResult:
    kind = _table_kind(lines[start])
    assert kind is not None
    head = lines[:start]
    hist = LogLinHistogram()
    windows: dict[int, list[int]] = {}
    n = total = 0
    lo = hi = hi_at = t0 = None
    closed = False
    for i in range(start + 1, len(lines)):
        line = lines[i].strip()
        if line.startswith("---"):
            closed = True
            break
        if not line:
            continue
        tx, rtt = _row(line, kind, n, i + 1)
        t0 = tx if t0 is None else t0
        at = tx - t0
        hist.add(rtt)
        n += 1
        total += rtt
        lo = rtt if lo is None else min(lo, rtt)
        if hi is None or rtt > hi:
            hi, hi_at = rtt, at
        w = windows.setdefault(at // WINDOW_NS, [0, 0])
        w[0] = max(w[0], rtt)
        w[1] += 1
    observed = _observations(head)
    if not closed:
        counted = f" after {n:,} of {observed:,} observations" if observed else ""
        raise ImportFormatError(f"line {len(lines)}: the --full-log table ends without "
                                f"sockperf's closing `-----` line{counted}: the file was cut",
                                hint="import an intact copy; sockperf's summary above the "
                                "table covers every observation")
    if n == 0:
        raise ImportFormatError(f"line {start + 1}: the --full-log table has no rows")
    if observed is not None and observed != n:
        raise ImportFormatError(f"line {start + 1}: the --full-log table has {n:,} rows but "
                                f"sockperf counted {observed:,} observations")
    assert lo is not None and hi is not None
    _check_against_summary(head, lo, hi, total / n)
    ch = Channel(name="rtt", cpu=None, samples=n, min_ns=lo, max_ns=hi, sum_ns=total,
                 max_at_ns=hi_at, hist=hist, window_ns=WINDOW_NS,
                 windows=[(k, v[0], v[1]) for k, v in sorted(windows.items())])
    printed = {"old": None, "latency": _HALF, "rtt": _FULL}[kind]
    notes = [_drops(head), "stored: the round trip rxTime − txTime of every message"
             + (f"; sockperf's own column is {printed}" if printed else
                "; sockperf's summary in this file reports half of it as latency")]
    version = _VERSION_RE.search("\n".join(head))
    return imported_result(
        run_id, probe="udp", tool="sockperf", fmt="sockperf", channels=[ch], system={},
        elapsed_ns=(max(windows) + 1) * WINDOW_NS, notes=[x for x in notes if x],
        tool_version=version.group(1) if version else None, resolution_ns=1,
        extra={"measure": "round-trip time", "full_log": kind})


def _check_against_summary(head: list[str], lo: int, hi: int, avg: float) -> None:
    """sockperf's summary above the table describes the same messages: its min, max and
    average (doubled when it printed half round trips; it cuts each to the ns, 0-3 ns
    below rxTime - txTime) must be the table's."""
    found = _read_summary(head)
    if found is None:
        return
    _n, half, _pct, s_lo, s_hi, s_avg = found
    factor = 2 if half else 1
    slack = 4 * factor
    for what, printed, table in (("<MIN>", s_lo, lo), ("<MAX>", s_hi, hi),
                                 ("average", s_avg, avg)):
        if printed is not None and abs(printed * factor - table) > slack:
            raise ImportFormatError(
                f"sockperf's summary {what} {printed / 1000:.3f} µs"
                + (" (half round trip)" if half else "")
                + f" but the --full-log table gives {table / factor / 1000:.3f} µs")


def _row(line: str, kind: str, expect: int, lineno: int) -> tuple[int, int]:
    """(txTime ns, round trip ns) of one table row, checked against itself."""
    parts = [p.strip() for p in line.split(",")]
    want = 2 if kind == "old" else 4
    if len(parts) != want:
        raise ImportFormatError(f"line {lineno}: {len(parts)} comma-separated fields, "
                                f"expected {want}")
    if kind != "old":
        if not parts[0].isdigit() or int(parts[0]) != expect:
            raise ImportFormatError(f"line {lineno}: packet {parts[0]!r} where {expect} was "
                                    "expected (a row is missing, repeated or damaged)")
        parts = parts[1:]
    tx = _ns(parts[0], "txTime", lineno)
    rtt = _ns(parts[1], "rxTime", lineno) - tx
    if rtt < 0:
        raise ImportFormatError(f"line {lineno}: rxTime is before txTime")
    if kind != "old":
        shown = _ns(parts[2], "the value", lineno, _USEC_RE, 3)
        factor = 2 if kind == "latency" else 1
        if abs(shown * factor - rtt) > 2 * factor + 2:  # sockperf rounds both to the ns
            raise ImportFormatError(f"line {lineno}: {parts[2]} µs does not match rxTime − "
                                    "txTime (the row is damaged or cut)")
    return tx, rtt


def _observations(head: list[str]) -> int | None:
    for line in head:
        if m := _TOTAL_RE.search(line):
            return int(m.group(1))
    return None


def _drops(head: list[str]) -> str | None:
    for line in head:
        m = _DROP_RE.search(line)
        if m and any(int(x) for x in m.groups()):
            return (f"sockperf reported {m.group(1)} dropped, {m.group(2)} duplicated and "
                    f"{m.group(3)} out-of-order messages")
    return None


def _summary_only(lines: list[str], run_id: str) -> RunResult:
    found = _read_summary(lines)
    if found is None:
        raise ImportFormatError("no --full-log table and no sockperf ping-pong summary "
                                "(`Total N observations`, `<MAX>`, percentiles, `<MIN>`)",
                                hint="import `sockperf ping-pong ... --full-log FILE`'s FILE "
                                "or its complete output")
    n, half, pct, lo, hi, avg = found
    factor = 2 if half else 1
    if lo > hi:
        raise ImportFormatError(f"sockperf's <MIN> {lo / 1000:.3f} µs is above its <MAX> "
                                f"{hi / 1000:.3f} µs")
    if avg is not None and not lo - 1 <= avg <= hi + 1:  # each printed to the ns
        raise ImportFormatError(f"sockperf's average {avg / 1000:.3f} µs lies outside <MIN> "
                                f"{lo / 1000:.3f} .. <MAX> {hi / 1000:.3f} µs")
    points = [(1, lo * factor)]
    for p, v in sorted(pct.items()):
        rank = int(0.5 + p * n)
        if 1 <= rank <= n:
            points.append((rank, v * factor))
    points.append((n, hi * factor))
    ch = channel_from_ranks("rtt", None, points, (avg or 0) * factor * n)
    shown = _HALF if half else _FULL
    notes = [f"sockperf's summary only (no --full-log): {n:,} observations; min, max and "
             "mean exact; the samples between two printed percentiles are placed at the "
             "upper one, so every percentile is an upper bound (exact at sockperf's own)",
             f"stored: the round trip; sockperf printed {shown}"
             + (", doubled here" if half else "")]
    published = {f"{100 * p:.3f}": v * factor for p, v in sorted(pct.items(), reverse=True)}
    version = _VERSION_RE.search("\n".join(lines))
    return imported_result(
        run_id, probe="udp", tool="sockperf", fmt="sockperf", channels=[ch], system={},
        notes=notes, tool_version=version.group(1) if version else None, resolution_ns=1,
        partial=True,
        extra={"measure": "round-trip time", "summary_only": {
            "observations": n, "printed": "half round trip" if half else "round trip",
            "percentiles_ns": published, "min_ns": lo * factor, "max_ns": hi * factor}})


def _read_summary(lines: list[str]
                  ) -> tuple[int, bool, dict[float, int], int, int, int | None] | None:
    """(observations, values are half round trips, {percentile: ns}, min, max, mean) of
    the first summary block, or None when there is none."""
    n = lo = hi = avg = None
    half = True
    pct: dict[float, int] = {}
    for lineno, line in enumerate(lines, 1):
        if (m := _AVG_RE.search(line)) and avg is None:
            half = m.group(1) != "rtt"
            avg = _ns(m.group(2), "the average", lineno, _USEC_RE, 3)
        elif (m := _TOTAL_RE.search(line)) and n is None:
            n = in_range(int(m.group(1)), f"line {lineno}: observations")
        elif n is not None and (m := _MAXMIN_RE.search(line)):
            value = _ns(m.group(2), m.group(1), lineno, _USEC_RE, 3)
            if m.group(1) == "MIN":
                lo = value
                break  # the end of the first block
            hi = value
        elif n is not None and (m := _PCT_RE.search(line)):
            p = _percentile(m.group(1), lineno)
            value = _ns(m.group(2), "a percentile", lineno, _USEC_RE, 3)
            if pct.get(p, value) != value:
                raise ImportFormatError(f"line {lineno}: percentile {m.group(1)} printed twice "
                                        f"with two values ({pct[p] / 1000:.3f} and "
                                        f"{value / 1000:.3f} µs)")
            pct[p] = value
    if n is None or lo is None or hi is None or n == 0:
        return None
    return n, half, pct, lo, hi, avg


def _percentile(text: str, lineno: int) -> float:
    """The fraction sockperf used for a printed percentile (its constant, not the text)."""
    try:
        shown = float(text)
    except ValueError:
        raise ImportFormatError(f"line {lineno}: percentile {text!r} is not a number") from None
    for p in _PERCENTILES:
        if abs(100 * p - shown) < 0.0006:
            return p
    raise ImportFormatError(f"line {lineno}: percentile {text} is not one sockperf prints")
