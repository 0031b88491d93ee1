# SPDX-License-Identifier: MIT
"""cyclictest: `--json=FILE` and the text histogram of `-h N` (see docs/report.md)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from email.utils import parsedate_to_datetime
from typing import Any

from rtlab.results.importers.common import (
    ImportFormatError,
    as_int,
    channel_from_buckets,
    channel_from_ranks,
    channel_from_record,
    imported_result,
    in_range,
    int_keyed,
    rt_tests_json,
    uname_system,
)
from rtlab.results.model import Channel, RunResult


def _rfc2822(text: Any) -> datetime | None:
    if not isinstance(text, str):
        return None
    try:
        return parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None


def _hist_rows(cmdline: Any) -> int | None:
    """N of `-h N` / `--histogram=N` in cyclictest's recorded command line."""
    tokens = str(cmdline or "").split()
    for i, tok in enumerate(tokens):
        value = None
        if tok in ("-h", "--histogram", "-H", "--histofall") and i + 1 < len(tokens):
            value = tokens[i + 1]
        elif tok.startswith(("--histogram=", "--histofall=")):
            value = tok.split("=", 1)[1]
        elif re.fullmatch(r"-[hH]\d+", tok):
            value = tok[2:]
        if value is not None and value.isdigit():
            return int(value)
    return None


def _interval_us(cmdline: Any) -> int:
    """The base interval (µs) of `-i N` / `--interval=N` in the command line (1000 when it
    names none, cyclictest's default); every thread's interval is at least this."""
    tokens = str(cmdline or "").split()
    for i, tok in enumerate(tokens):
        value = None
        if tok in ("-i", "--interval") and i + 1 < len(tokens):
            value = tokens[i + 1]
        elif tok.startswith("--interval="):
            value = tok.split("=", 1)[1]
        elif re.fullmatch(r"-i\d+", tok):
            value = tok[2:]
        if value is not None and value.isdigit() and int(value) > 0:
            return int(value)
    return 1000


def _most_cycles(cmdline: Any, start: datetime | None, end: datetime | None) -> int | None:
    """The most cycles a thread can count between start_time and end_time (whole seconds:
    up to 2 s more) at the base interval, or None when the file lacks the times. A
    thread that falls behind catches up, it never counts two cycles for one period."""
    if start is None or end is None:
        return None
    span_us = ((end - start).total_seconds() + 2) * 1e6
    return int(span_us // _interval_us(cmdline)) + 1


def _check_thread(what: str, buckets: dict[int, int], cycles: int, t: dict[str, Any],
                  rows: int | None, most: int | None) -> None:
    """What channel_from_buckets cannot know: the -h range of the command line (no bucket
    at or beyond it; samples beyond it mean a max at or beyond it) and the run's length."""
    if most is not None and cycles > most:
        raise ImportFormatError(f"{what}: cycles {cycles:,} but start_time to end_time at "
                                f"the command line's interval allows at most {most:,}")
    if not rows:
        return
    beyond = [k for k, n in buckets.items() if n and k >= rows]
    if beyond:
        raise ImportFormatError(f"{what}: histogram bucket {max(beyond)} but the command "
                                f"line's -h {rows} has buckets 0..{rows - 1} only")
    over = cycles - sum(buckets.values())
    top = t.get("max")
    if over > 0 and isinstance(top, int) and not isinstance(top, bool) and top < rows:
        raise ImportFormatError(f"{what}: {over:,} sample(s) beyond the -h {rows} histogram "
                                f"(cycles minus its sum) but max {top} is below {rows}")


def parse_json(text: str, run_id: str) -> RunResult:
    doc = rt_tests_json(text, "a cyclictest --json file")
    # rt-tests writes two keys with a stray colon; accept both spellings.
    cmdline = doc.get("cmdline:", doc.get("cmdline"))
    tool_version = doc.get("rt_test_version:", doc.get("rt_test_version"))
    sysinfo = doc.get("sysinfo") if isinstance(doc.get("sysinfo"), dict) else {}
    unit_ns = 1 if doc.get("resolution_in_ns") else 1000
    channels, notes = [], []
    beyond: dict[str, dict[str, int]] = {}
    rows = _hist_rows(cmdline)
    declared = doc.get("num_threads")
    if declared is not None and as_int(declared, "num_threads") != len(doc["thread"]):
        raise ImportFormatError(f"num_threads says {declared} but `thread` holds "
                                f"{len(doc['thread'])} thread(s)")
    start, end = _rfc2822(doc.get("start_time")), _rfc2822(doc.get("end_time"))
    if start and end and end < start:
        raise ImportFormatError(f"end_time {doc['end_time']!r} is before start_time "
                                f"{doc['start_time']!r}")
    most = _most_cycles(cmdline, start, end)
    for key in sorted(doc["thread"], key=lambda k: as_int(k, "thread index")):
        t = doc["thread"][key]
        if not isinstance(t, dict) or not isinstance(t.get("histogram"), dict):
            raise ImportFormatError(f"thread {key} has no histogram")
        buckets = int_keyed(t["histogram"], f"thread {key}")
        what = f"thread {key}"
        cycles = as_int(t.get("cycles"), f"{what} cycles")
        cpu = as_int(t["cpu"], f"{what} cpu") if t.get("cpu") is not None else None
        _check_thread(what, buckets, cycles, t, rows, most)
        ch, overflow, above = channel_from_record(
            f"cpu{cpu}" if cpu is not None else f"thread{key}", cpu, buckets, t, what,
            cycles, unit_ns)
        if overflow:
            if rows and ch.max_ns is not None:  # the -h range, when the command line says it
                above = max(above, min(rows * unit_ns, ch.max_ns))
            beyond[ch.name] = {"count": overflow, "above_ns": above}
            notes.append(f"{ch.name}: {overflow} sample(s) beyond the -h range placed at the max "
                         "(cyclictest's JSON has no overflow field: cycles minus histogram sum)")
        channels.append(ch)
    if not channels:
        raise ImportFormatError("no threads")
    elapsed = int((end - start).total_seconds() * 1e9) if start and end else None
    system = uname_system(sysinfo) | {
        "realtime": bool(sysinfo["realtime"]) if "realtime" in sysinfo else None}
    rc = doc.get("return_code")
    return imported_result(
        run_id, probe="timer", tool="cyclictest", fmt="cyclictest-json", channels=channels,
        system=system, elapsed_ns=elapsed, notes=notes, tool_version=str(tool_version),
        argv=str(cmdline).split() if cmdline else [], resolution_ns=unit_ns,
        start_wall=start.isoformat() if start else None,
        end_wall=end.isoformat() if end else None,
        status="completed" if rc in (0, None) else "failed",
        extra={"return_code": rc}, beyond=beyond)


_ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_ROW_RE = re.compile(r"^(\d+)[ \t]+(\d+(?:\t\d+)*)\s*$")
# cyclictest's status line, printed while it runs (and once at the end with -q)
_STATUS_RE = re.compile(r"^T:\s*(?P<t>\d+)\s*\(\s*\d+\)\s*P:\s*\d+\s*I:\s*\d+\s*"
                        r"C:\s*(?P<c>\d+)\s*Min:\s*(?P<min>\d+)\s*Act:\s*\d+\s*"
                        r"Avg:\s*\d+\s*Max:\s*(?P<max>\d+)")
_TRAILER_RE = re.compile(r"^#\s*(Min Latencies|Avg Latencies|Max Latencies|Histogram Overflows"
                         r"|Total):\s*(.*)$")


def parse_hist(text: str, run_id: str, unit_ns: int = 1000) -> RunResult:
    """`unit_ns` 1 for the output of `cyclictest -N/--nsecs` (the text does not say so)."""
    h = _read_hist(text)
    rows, trailer, width = h.rows, h.trailer, h.width
    if "Max Latencies" not in trailer or not rows or width is None:
        raise ImportFormatError("no histogram rows or no '# Max Latencies:' trailer: not a "
                                "complete `cyclictest -h` output",
                                hint="use the whole stdout of cyclictest -h N")
    nthreads = len(trailer["Max Latencies"])
    if width not in (nthreads, nthreads + 1):  # -H adds a summary column
        raise ImportFormatError(f"{width} histogram columns but {nthreads} threads in the trailer")
    for key in ("Min Latencies", "Avg Latencies", "Histogram Overflows"):
        if key in trailer and len(trailer[key]) != nthreads:
            raise ImportFormatError(f"'# {key}' has {len(trailer[key])} values, expected "
                                    f"{nthreads}")
    _check_hist(h, nthreads)
    cut = _rows_cut(h, nthreads)
    if cut is not None:
        return _footer_only(run_id, trailer, nthreads, unit_ns, cut)
    channels, notes = [], []
    beyond: dict[str, dict[str, int]] = {}
    range_ns = (max(rows) + 1) * unit_ns  # cyclictest prints every row of -h N
    unit = "ns" if unit_ns == 1 else "µs"
    for t in range(nthreads):
        buckets = {k: v[t] for k, v in rows.items()}
        overflow = trailer.get("Histogram Overflows", [0] * nthreads)[t]
        samples = sum(buckets.values()) + overflow
        ch, extra, _above = channel_from_buckets(
            f"thread{t}", None, buckets, unit_ns=unit_ns, samples=samples,
            min_v=trailer["Min Latencies"][t] if "Min Latencies" in trailer and samples else None,
            max_v=trailer["Max Latencies"][t] if samples else None,
            avg_v=float(trailer["Avg Latencies"][t]) if "Avg Latencies" in trailer else None)
        if extra:
            notes.append(f"{ch.name}: {extra} histogram overflow(s) placed at the max")
            beyond[ch.name] = {"count": extra, "above_ns": min(range_ns, ch.max_ns or range_ns)}
        channels.append(ch)
    in_rows = sum(sum(v[:nthreads]) for v in rows.values())
    if unit_ns == 1000 and in_rows == 0 and min(ch.min_ns or 0 for ch in channels) >= 1_000_000:
        notes.append("every sample is beyond the histogram and the smallest latency reads as "
                     "at least 1 ms: if the file was written by `cyclictest -N/--nsecs` (values "
                     "in ns), import it again with --nsecs")
    notes.append("the text histogram does not say which CPU a thread ran on (with -S / "
                 f"-a, thread N is usually CPU N); the average is cyclictest's integer {unit}")
    return imported_result(
        run_id, probe="timer", tool="cyclictest", fmt="cyclictest-hist", channels=channels,
        system={}, notes=notes, resolution_ns=unit_ns,
        extra={"rows": len(rows)}, beyond=beyond)


@dataclass
class _Hist:
    """What a `cyclictest -h` text says: rows (index -> counts), trailers, the number of
    columns, the line of each row and trailer, and the last `T:` status line of each
    thread ({thread: (line, cycles, min, max)})."""

    rows: dict[int, list[int]] = field(default_factory=dict)
    trailer: dict[str, list[int]] = field(default_factory=dict)
    width: int | None = None
    lines: dict[int, int] = field(default_factory=dict)
    trailer_lines: dict[str, int] = field(default_factory=dict)
    status: dict[int, tuple[int, int, int, int]] = field(default_factory=dict)


def _read_hist(text: str) -> _Hist:
    h = _Hist()
    rows, lines, trailer = h.rows, h.lines, h.trailer
    width = None
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = _ANSI_RE.sub("", raw.split("\r")[-1]).strip()
        if not line:
            continue
        m = _TRAILER_RE.match(line)
        if m:
            try:
                trailer[m.group(1)] = [in_range(int(x), f"line {lineno}: '# {m.group(1)}'")
                                       for x in m.group(2).split()]
            except ValueError:
                raise ImportFormatError(f"line {lineno}: bad numbers in '# {m.group(1)}'") from None
            h.trailer_lines[m.group(1)] = lineno
            continue
        if (m := _STATUS_RE.match(line)) is not None:
            h.status[int(m["t"])] = (lineno, int(m["c"]), int(m["min"]), int(m["max"]))
            continue
        if line.startswith("#") or line.startswith("T:") or line.startswith("policy:"):
            continue
        m = _ROW_RE.match(line)
        if not m:
            raise ImportFormatError(f"line {lineno}: unexpected text {line[:40]!r}")
        counts = [in_range(int(x), f"line {lineno}: count") for x in m.group(2).split("\t")]
        if width is None:
            width = len(counts)
        elif len(counts) != width:
            raise ImportFormatError(f"line {lineno}: {len(counts)} columns, expected {width}")
        index = int(m.group(1))
        if index in rows:
            raise ImportFormatError(f"line {lineno}: row {index} appears twice")
        rows[index] = counts
        lines[index] = lineno
    h.width = width
    return h


def _check_hist(h: _Hist, nthreads: int) -> None:
    """Refuse a text whose own numbers contradict each other (rows cut or not): `# Total:`
    below its rows (cutting rows only lowers the rows' sum), overflows with a max inside
    the histogram's range, a `-H` summary column that is not the sum of the threads', and
    `T:` status lines of threads the trailer does not have, or that counted more cycles,
    a higher max or a lower min than the trailer's final numbers."""
    rows, trailer = h.rows, h.trailer
    total = trailer.get("Total")
    at = h.trailer_lines
    if total is not None:
        if len(total) not in (nthreads, nthreads + 1):
            raise ImportFormatError(f"line {at['Total']}: '# Total' has {len(total)} values, "
                                    f"expected {nthreads}")
        for t in range(nthreads):
            in_rows = sum(v[t] for v in rows.values())
            if in_rows > total[t]:
                raise ImportFormatError(
                    f"line {at['Total']}: thread {t}: '# Total:' says {total[t]:,} but its "
                    f"rows hold {in_rows:,} (cut rows would make the rows' sum smaller, not "
                    "larger)")
    if h.width == nthreads + 1 and nthreads > 1:  # -H: the last column sums the threads
        for index, counts in rows.items():
            if counts[-1] != sum(counts[:nthreads]):
                raise ImportFormatError(
                    f"line {h.lines[index]}: the summary column (-H) says {counts[-1]:,} but "
                    f"the threads' columns add up to {sum(counts[:nthreads]):,}")
        if total is not None and len(total) == nthreads + 1 and \
                total[-1] != sum(total[:nthreads]):
            raise ImportFormatError(f"line {at['Total']}: '# Total:' of the summary column "
                                    f"is {total[-1]:,} but the threads' add up to "
                                    f"{sum(total[:nthreads]):,}")
    span = max(rows) + 1  # cyclictest prints every row 0..N-1
    overflows = trailer.get("Histogram Overflows", [0] * nthreads)
    for t in range(nthreads):
        top = trailer["Max Latencies"][t]
        if overflows[t] and top < span:
            raise ImportFormatError(
                f"line {at['Histogram Overflows']}: thread {t}: {overflows[t]:,} overflow(s) "
                f"(samples of {span} or more) but '# Max Latencies:' says {top}")
    _check_status(h, nthreads)


def _check_status(h: _Hist, nthreads: int) -> None:
    """The last `T:` line of each thread was printed at the end or before it: its cycles,
    max and min cannot exceed (max, cycles) or undercut (min) the trailer's."""
    trailer = h.trailer
    overflows = trailer.get("Histogram Overflows", [0] * nthreads)
    for t, (lineno, cycles, lo, hi) in sorted(h.status.items()):
        if t >= nthreads:
            raise ImportFormatError(f"line {lineno}: a status line of thread {t} but the "
                                    f"trailer has {nthreads} thread(s)")
        if not cycles:
            continue  # no sample yet: cyclictest prints a placeholder min
        counted: int | None = sum(v[t] for v in h.rows.values()) + overflows[t]
        if "Total" in trailer:
            counted = max(counted, trailer["Total"][t] + overflows[t])
        elif len(h.rows) != max(h.rows) + 1:
            counted = None  # rows cut and no `# Total:`: the count is unknown
        if counted is not None and cycles > counted:
            raise ImportFormatError(f"line {lineno}: thread {t}: the status line counts "
                                    f"C: {cycles:,} cycles but the histogram {counted:,}")
        top = trailer["Max Latencies"][t]
        if hi > top:
            raise ImportFormatError(f"line {lineno}: thread {t}: the status line's Max: {hi} "
                                    f"is above '# Max Latencies:' {top}")
        low = (trailer.get("Min Latencies") or [None] * nthreads)[t]
        if low is not None and lo < low:
            raise ImportFormatError(f"line {lineno}: thread {t}: the status line's Min: {lo} "
                                    f"is below '# Min Latencies:' {low}")


def _rows_cut(h: _Hist, nthreads: int) -> str | None:
    """Why the histogram rows are not all there (cyclictest prints every row 0..N-1, and
    `# Total:` is their sum per thread), or None when they are."""
    rows, trailer, lines = h.rows, h.trailer, h.lines
    expected = set(range(max(rows) + 1))
    if set(rows) != expected:
        gap = min(expected - set(rows))
        after = max((k for k in rows if k < gap), default=None)
        where = f"after line {lines[after]}" if after is not None else "before the first row"
        return f"row {gap} is missing ({where})"
    total = trailer.get("Total")
    if total is not None:
        for t in range(nthreads):
            in_rows = sum(v[t] for v in rows.values())
            if in_rows != total[t]:
                return (f"thread {t}'s rows hold {in_rows:,} samples but '# Total:' says "
                        f"{total[t]:,}")
    return None


def _footer_only(run_id: str, trailer: dict[str, list[int]], nthreads: int, unit_ns: int,
                 cut: str) -> RunResult:
    """The trailer's statistics alone, for a file whose rows were cut: per thread the
    count (`# Total:` plus overflows), min, average and max; every other sample is only
    known to lie in [min, max] (placed at the max, `beyond_range`)."""
    total = trailer.get("Total")
    if total is None or "Min Latencies" not in trailer:
        raise ImportFormatError(f"histogram rows cut ({cut}) and no '# Total:' and "
                                "'# Min Latencies:' lines: the sample count is unknown",
                                hint="import the complete output of cyclictest -h N")
    channels = []
    beyond: dict[str, dict[str, int]] = {}
    overflows = trailer.get("Histogram Overflows", [0] * nthreads)
    for t in range(nthreads):
        name = f"thread{t}"
        n = in_range(total[t] + overflows[t], f"{name}: sample count")
        lo, hi = trailer["Min Latencies"][t] * unit_ns, trailer["Max Latencies"][t] * unit_ns
        if n == 0:
            channels.append(Channel(name=name))
            continue
        if lo > hi or (n == 1 and lo != hi):
            raise ImportFormatError(f"{name}: min {lo // unit_ns} and max {hi // unit_ns} "
                                    f"do not fit {n} sample(s)")
        avg = trailer.get("Avg Latencies", [None] * nthreads)[t]
        sum_ns = avg * unit_ns * n if avg is not None else hi * n
        channels.append(channel_from_ranks(name, None, [(1, lo), (n, hi)], sum_ns))
        if n > 1:
            beyond[name] = {"count": n - 1, "above_ns": lo}
    unit = "ns" if unit_ns == 1 else "µs"
    notes = [f"histogram rows cut ({cut}): only the trailer's statistics are kept (count = "
             f"'# Total:' + overflows, min, integer average in {unit}, max); every sample "
             "but the min is placed at the max, so each percentile is only known to lie "
             "between min and max (shown as such)"]
    return imported_result(
        run_id, probe="timer", tool="cyclictest", fmt="cyclictest-hist", channels=channels,
        system={}, notes=notes, resolution_ns=unit_ns, partial=True,
        extra={"footer_only": True, "rows_cut": cut}, beyond=beyond)
