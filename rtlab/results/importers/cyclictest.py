# SPDX-License-Identifier: MIT
"""cyclictest: `--json=FILE` and the text histogram of `-h N` (see docs/report.md)."""

from __future__ import annotations

import json
import re
from datetime import datetime
from email.utils import parsedate_to_datetime
from typing import Any

from rtlab.results.importers.common import (
    ImportFormatError,
    as_float,
    as_int,
    channel_from_buckets,
    channel_from_ranks,
    imported_result,
    in_range,
    need,
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


def parse_json(text: str, run_id: str) -> RunResult:
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise ImportFormatError(f"invalid JSON ({exc})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("thread"), dict):
        raise ImportFormatError("no `thread` object: not a cyclictest --json file")
    version = doc.get("file_version")
    if version != 1:
        raise ImportFormatError(f"unsupported file_version {version!r} (this rtlab reads 1)")
    # rt-tests writes two keys with a stray colon; accept both spellings.
    cmdline = doc.get("cmdline:", doc.get("cmdline"))
    tool_version = doc.get("rt_test_version:", doc.get("rt_test_version"))
    sysinfo = doc.get("sysinfo") if isinstance(doc.get("sysinfo"), dict) else {}
    unit_ns = 1 if doc.get("resolution_in_ns") else 1000
    channels, notes = [], []
    beyond: dict[str, dict[str, int]] = {}
    rows = _hist_rows(cmdline)
    for key in sorted(doc["thread"], key=lambda k: as_int(k, "thread index")):
        t = doc["thread"][key]
        if not isinstance(t, dict) or not isinstance(t.get("histogram"), dict):
            raise ImportFormatError(f"thread {key} has no histogram")
        buckets = {as_int(k, f"thread {key} bucket"): as_int(v, f"thread {key} count")
                   for k, v in t["histogram"].items()}
        what = f"thread {key}"
        cycles = as_int(t.get("cycles"), f"{what} cycles")
        cpu = as_int(t["cpu"], f"{what} cpu") if t.get("cpu") is not None else None
        avg = t.get("avg")
        ch, overflow, above = channel_from_buckets(
            f"cpu{cpu}" if cpu is not None else f"thread{key}", cpu, buckets, unit_ns=unit_ns,
            samples=cycles, min_v=as_int(need(t, "min", what), f"{what} min") if cycles else None,
            max_v=as_int(need(t, "max", what), f"{what} max") if cycles else None,
            avg_v=as_float(avg, f"{what} avg") if cycles and avg is not None else None)
        if overflow:
            if rows and ch.max_ns is not None:  # the -h range, when the command line says it
                above = max(above, min(rows * unit_ns, ch.max_ns))
            beyond[ch.name] = {"count": overflow, "above_ns": above}
            notes.append(f"{ch.name}: {overflow} sample(s) beyond the -h range placed at the max "
                         "(cyclictest's JSON has no overflow field: cycles minus histogram sum)")
        channels.append(ch)
    if not channels:
        raise ImportFormatError("no threads")
    start, end = _rfc2822(doc.get("start_time")), _rfc2822(doc.get("end_time"))
    elapsed = int((end - start).total_seconds() * 1e9) if start and end else None
    system = {"hostname": sysinfo.get("nodename"), "sysname": sysinfo.get("sysname"),
              "release": sysinfo.get("release"), "version": sysinfo.get("version"),
              "machine": sysinfo.get("machine"),
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
_TRAILER_RE = re.compile(r"^#\s*(Min Latencies|Avg Latencies|Max Latencies|Histogram Overflows"
                         r"|Total):\s*(.*)$")


def parse_hist(text: str, run_id: str, unit_ns: int = 1000) -> RunResult:
    """`unit_ns` 1 for the output of `cyclictest -N/--nsecs` (the text does not say so)."""
    rows, trailer, width, first_line = _read_hist(text)
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
    cut = _rows_cut(rows, trailer, nthreads, first_line)
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


def _read_hist(text: str) -> tuple[dict[int, list[int]], dict[str, list[int]], int | None,
                                   dict[int, int]]:
    """Rows (index -> counts), trailers, the number of columns, and the line of each row."""
    rows: dict[int, list[int]] = {}
    lines: dict[int, int] = {}
    trailer: dict[str, list[int]] = {}
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
    return rows, trailer, width, lines


def _rows_cut(rows: dict[int, list[int]], trailer: dict[str, list[int]], nthreads: int,
              lines: dict[int, int]) -> str | None:
    """Why the histogram rows are not all there (cyclictest prints every row 0..N-1, and
    `# Total:` is their sum per thread), or None when they are."""
    expected = set(range(max(rows) + 1))
    if set(rows) != expected:
        gap = min(expected - set(rows))
        after = max((k for k in rows if k < gap), default=None)
        where = f"after line {lines[after]}" if after is not None else "before the first row"
        return f"row {gap} is missing ({where})"
    total = trailer.get("Total")
    if total is not None:
        if len(total) not in (nthreads, nthreads + 1):
            raise ImportFormatError(f"'# Total' has {len(total)} values, expected {nthreads}")
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
