# SPDX-License-Identifier: MIT
"""`rtla timerlat hist` text output (no machine format exists for it).

Layout (rtla's documented output): `# RTLA timerlat histogram`, `# Time unit
is microseconds (us)` (or nanoseconds with -n), `# Duration: ...`, a header
`Index IRQ-000 Thr-000 [Usr-000] IRQ-001 ...`, one row per non-empty bucket
(the index is the bucket's lower edge: bucket x bucket size), then the rows
`over:`, `count:`, `min:`, `avg:`, `max:` (`-` when a column has no sample)
and an `ALL:` block, which is ignored (we merge the channels exactly
ourselves). `--no-index` and `--no-header` output cannot be imported.
Channels: `irq@cpuN` (timer IRQ latency), `thread@cpuN`, `user@cpuN`.
"""

from __future__ import annotations

import math
import re

from rtlab.results.importers.common import (
    ImportFormatError,
    channel_from_buckets,
    imported_result,
)
from rtlab.results.model import Channel, RunResult

_COL_RE = re.compile(r"^(IRQ|Thr|Usr)-(\d+)$")
_KIND = {"IRQ": "irq", "Thr": "thread", "Usr": "user"}
_DUR_RE = re.compile(r"^#\s*Duration:\s*(\d+)\s+(\d+):(\d+):(\d+)")


def _num(tok: str, what: str) -> int | None:
    if tok == "-":
        return None
    if not tok.isdigit():
        raise ImportFormatError(f"{what}: not a number: {tok!r}")
    return int(tok)


def parse(text: str, run_id: str) -> RunResult:
    unit_ns = None
    elapsed = None
    columns: list[tuple[str, int]] | None = None
    rows: dict[int, list[int]] = {}
    summary: dict[str, list[int | None]] = {}
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            if "Time unit is" in line:
                unit_ns = 1 if "nanoseconds" in line else 1000
            m = _DUR_RE.match(line)
            if m:
                d, h, mi, s = (int(x) for x in m.groups())
                elapsed = ((d * 24 + h) * 60 + mi) * 60 + s
            continue
        tokens = line.split()
        if tokens[0] == "Index":
            cols = []
            for tok in tokens[1:]:
                m = _COL_RE.match(tok)
                if not m:
                    raise ImportFormatError(f"line {lineno}: unknown column {tok!r}")
                cols.append((_KIND[m.group(1)], int(m.group(2))))
            columns = cols
            continue
        if tokens[0] == "ALL:":
            break
        if columns is None:
            if tokens[0].rstrip(":").isalpha() and tokens[0] not in ("over:",):
                continue  # text printed before the histogram (e.g. a banner)
            raise ImportFormatError(f"line {lineno}: data before the `Index` header line",
                                    hint="import the output of `rtla timerlat hist` without "
                                    "--no-header/--no-index")
        values = tokens[1:]
        if len(values) != len(columns):
            raise ImportFormatError(f"line {lineno}: {len(values)} values for {len(columns)} "
                                    "columns")
        key = tokens[0]
        if key.endswith(":"):
            if key[:-1] not in ("over", "count", "min", "avg", "max"):
                raise ImportFormatError(f"line {lineno}: unknown summary row {key!r}")
            summary[key[:-1]] = [_num(v, f"line {lineno}") for v in values]
            continue
        if not key.isdigit():
            raise ImportFormatError(f"line {lineno}: unexpected text {line[:40]!r}")
        counts = [_num(v, f"line {lineno}") for v in values]
        rows[int(key)] = [c or 0 for c in counts]
    if columns is None or "count" not in summary or "max" not in summary:
        raise ImportFormatError("no `Index` header or no `count:`/`max:` summary: not a complete "
                                "`rtla timerlat hist` output")
    if unit_ns is None:
        raise ImportFormatError("no '# Time unit is ...' line")
    # `-b N` writes rows at multiples of N (the index is the bucket's lower edge)
    bucket = math.gcd(*rows) or 1
    channels: list[Channel] = []
    notes: list[str] = []
    if bucket > 1:
        notes.append(f"rtla bucket size {bucket} {'ns' if unit_ns == 1 else 'µs'} (-b, from "
                     "the row indices): each count is placed at its bucket's lower edge")
    beyond: dict[str, dict[str, int]] = {}
    for i, (kind, cpu) in enumerate(columns):
        buckets = {k: v[i] for k, v in rows.items() if v[i]}
        count = summary["count"][i] or 0
        over = (summary.get("over") or [0] * len(columns))[i] or 0
        ch, extra, above = channel_from_buckets(
            f"{kind}@cpu{cpu}", cpu, buckets, unit_ns=unit_ns, samples=count, width=bucket,
            min_v=(summary.get("min") or [None] * len(columns))[i],
            max_v=summary["max"][i],
            avg_v=(summary.get("avg") or [None] * len(columns))[i])
        if extra:
            notes.append(f"{ch.name}: {extra} sample(s) beyond the histogram (over: {over}) "
                         "placed at the max")
            beyond[ch.name] = {"count": extra, "above_ns": above}
        channels.append(ch)
    notes.append("rtla's average is an integer; bucket counts are placed at each row's index "
                 "(the lower edge of the bucket)")
    return imported_result(
        run_id, probe="timer", tool="rtla timerlat", fmt="rtla-timerlat-hist",
        channels=channels, system={}, elapsed_ns=elapsed * 1_000_000_000 if elapsed else None,
        notes=notes, resolution_ns=unit_ns * bucket, beyond=beyond)
