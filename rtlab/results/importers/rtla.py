# SPDX-License-Identifier: MIT
"""`rtla timerlat hist` and `rtla osnoise hist` text output (no machine format exists).

Layout (rtla's `timerlat_hist.c` / `osnoise_hist.c`): `# RTLA timerlat histogram`
(or `osnoise`), `# Time unit is microseconds (us)` (or nanoseconds with
timerlat's -n), `# Duration: ...`, a header `Index IRQ-000 Thr-000 [Usr-000] IRQ-001
...` (timerlat; `Usr-` columns with -u) or `Index CPU-000 CPU-001 ...` (osnoise; only
CPUs that saw noise), one row per non-empty bucket (the index is the bucket's lower
edge: bucket x bucket size), then the rows `over:`, `count:`, `min:`, `avg:`, `max:`
(`-` when a column has no sample) and, in newer timerlat versions, an `ALL:` block
(`ALL: IRQ Thr [Usr]`, then count/min/avg/max over all CPUs). The `ALL:` block is
checked against the per-CPU columns (count = sum, min = smallest, max = largest) and
not stored (rtlab merges channels exactly). Per column, count must equal the rows'
sum plus `over:`; a file whose rows were cut or edited is refused, naming the line.
`--no-index`, `--no-header` and `--no-summary` output cannot be imported.

Channels: timerlat `irq@cpuN` (timer IRQ latency), `thread@cpuN`, `user@cpuN`;
osnoise `cpuN`: one sample per noise occurrence (its duration; rtla histograms the
`osnoise:sample_threshold` events, so min and max are bucket lower edges too).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from rtlab.results.importers.common import (
    ImportFormatError,
    channel_from_buckets,
    imported_result,
    in_range,
)
from rtlab.results.model import Channel, RunResult

_TIMERLAT_COL = re.compile(r"^(IRQ|Thr|Usr)-(\d+)$")
_OSNOISE_COL = re.compile(r"^(CPU)-(\d+)$")
_KIND = {"IRQ": "irq", "Thr": "thread", "Usr": "user", "CPU": "cpu"}
_DUR_RE = re.compile(r"^#\s*Duration:\s*(\d+)\s+(\d+):(\d+):(\d+)")
_SUMMARY = ("over", "count", "min", "avg", "max")


@dataclass
class _Table:
    unit_ns: int | None = None
    elapsed_s: int | None = None
    columns: list[tuple[str, int]] | None = None
    rows: dict[int, list[int]] = field(default_factory=dict)
    summary: dict[str, list[float | None]] = field(default_factory=dict)
    summary_line: dict[str, int] = field(default_factory=dict)
    all_kinds: list[str] = field(default_factory=list)
    all_rows: dict[str, list[float | None]] = field(default_factory=dict)
    all_line: int = 0
    notes: list[str] = field(default_factory=list)


def parse(text: str, run_id: str) -> RunResult:
    """`rtla timerlat hist`."""
    t = _read(text, _TIMERLAT_COL, "timerlat")
    channels, notes, beyond = _channels(t, lambda kind, cpu: f"{kind}@cpu{cpu}")
    _check_all(t)
    notes.append("rtla's average is an integer; bucket counts are placed at each row's index "
                 "(the lower edge of the bucket)")
    return _result(run_id, t, "rtla timerlat", "rtla-timerlat-hist", "timer", channels,
                   notes, beyond)


def parse_osnoise(text: str, run_id: str) -> RunResult:
    """`rtla osnoise hist`."""
    t = _read(text, _OSNOISE_COL, "osnoise")
    channels, notes, beyond = _channels(t, lambda _kind, cpu: f"cpu{cpu}")
    notes.append("one sample per noise occurrence above rtla's threshold (its duration); "
                 "CPUs without any noise are not listed by rtla")
    return _result(run_id, t, "rtla osnoise", "rtla-osnoise-hist", "noise", channels, notes,
                   beyond)


def _result(run_id: str, t: _Table, tool: str, fmt: str, probe: str,
            channels: list[Channel], notes: list[str],
            beyond: dict[str, dict[str, int]]) -> RunResult:
    assert t.unit_ns is not None
    return imported_result(
        run_id, probe=probe, tool=tool, fmt=fmt, channels=channels, system={},
        elapsed_ns=t.elapsed_s * 1_000_000_000 if t.elapsed_s else None,
        notes=notes + t.notes, resolution_ns=t.unit_ns * _bucket(t), beyond=beyond)


# reading ---------------------------------------------------------------------------------


def _num(tok: str, what: str) -> float | None:
    if tok == "-":
        return None
    if not re.fullmatch(r"\d+(\.\d+)?", tok):
        raise ImportFormatError(f"{what}: not a number: {tok!r}")
    value = float(tok) if "." in tok else in_range(int(tok), what)
    return value


def _read(text: str, col_re: re.Pattern[str], tool: str) -> _Table:
    t = _Table()
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            _comment(t, line)
        elif t.all_line:
            _after_all(t, line, lineno)
        elif line.split()[0] == "Index":
            t.columns = _columns(line, col_re, lineno)
        elif line.startswith("ALL:"):
            t.all_line = lineno
            t.all_kinds = [_KIND.get(k, k) for k in ("IRQ", "Thr", "Usr")
                           if k in line.split()[1:]]
        else:
            _row(t, line, lineno, tool)
    if t.columns == [] and t.unit_ns is not None:
        raise ImportFormatError(f"rtla {tool} recorded no sample on any CPU (count 0): "
                                "nothing to import; its output does not name the CPUs it "
                                "watched")
    if t.columns is None or "count" not in t.summary or "max" not in t.summary:
        raise ImportFormatError(f"no `Index` header or no `count:`/`max:` summary: not a "
                                f"complete `rtla {tool} hist` output",
                                hint="import the whole output, without --no-header, "
                                "--no-index or --no-summary")
    if t.unit_ns is None:
        raise ImportFormatError("no '# Time unit is ...' line")
    return t


def _comment(t: _Table, line: str) -> None:
    if "Time unit is" in line:
        t.unit_ns = 1 if "nanoseconds" in line else 1000
    if m := _DUR_RE.match(line):
        d, h, mi, s = (int(x) for x in m.groups())
        t.elapsed_s = ((d * 24 + h) * 60 + mi) * 60 + s


def _columns(line: str, col_re: re.Pattern[str], lineno: int) -> list[tuple[str, int]]:
    """The `Index` header's columns; each column once, and (timerlat) the same kinds of
    column for every CPU (rtla prints IRQ and Thr, and Usr with -u, for each CPU)."""
    columns = [_column(tok, col_re, lineno) for tok in line.split()[1:]]
    kinds: dict[int, list[str]] = {}
    for kind, cpu in columns:
        if kind in kinds.get(cpu, []):
            raise ImportFormatError(f"line {lineno}: column {kind} of CPU {cpu} appears twice "
                                    "(two histograms for one CPU)")
        kinds.setdefault(cpu, []).append(kind)
    shapes = {cpu: sorted(k) for cpu, k in kinds.items()}
    first = next(iter(shapes), None)
    for cpu, shape in shapes.items():
        if first is not None and shape != shapes[first]:
            raise ImportFormatError(f"line {lineno}: CPU {first} has the columns "
                                    f"{', '.join(shapes[first])} but CPU {cpu} "
                                    f"{', '.join(shape)}: rtla prints the same for every CPU")
    return columns


def _column(tok: str, col_re: re.Pattern[str], lineno: int) -> tuple[str, int]:
    m = col_re.match(tok)
    if not m:
        raise ImportFormatError(f"line {lineno}: unknown column {tok!r}")
    return _KIND[m.group(1)], int(m.group(2))


def _row(t: _Table, line: str, lineno: int, tool: str) -> None:
    tokens = line.split()
    if t.columns is None:
        if tokens[0].rstrip(":").isalpha() and tokens[0] not in ("over:",):
            return  # text printed before the histogram (e.g. a banner)
        raise ImportFormatError(f"line {lineno}: data before the `Index` header line",
                                hint=f"import the output of `rtla {tool} hist` without "
                                "--no-header/--no-index")
    key, values = tokens[0], tokens[1:]
    if key.endswith(":") and key[:-1] in _SUMMARY and not t.columns and values == ["0"]:
        return  # rtla's all-zero summary when no CPU had a sample
    if len(values) != len(t.columns):
        raise ImportFormatError(f"line {lineno}: {len(values)} values for {len(t.columns)} "
                                "columns")
    if key.endswith(":"):
        if key[:-1] not in _SUMMARY:
            raise ImportFormatError(f"line {lineno}: unknown summary row {key!r}")
        t.summary[key[:-1]] = [_num(v, f"line {lineno}") for v in values]
        t.summary_line[key[:-1]] = lineno
        return
    if not key.isdigit():
        raise ImportFormatError(f"line {lineno}: unexpected text {line[:40]!r}")
    if int(key) in t.rows:
        raise ImportFormatError(f"line {lineno}: row {key} appears twice")
    counts = [_num(v, f"line {lineno}") for v in values]
    if any(isinstance(c, float) for c in counts):
        raise ImportFormatError(f"line {lineno}: a count is not an integer")
    t.rows[int(key)] = [int(c or 0) for c in counts]


def _after_all(t: _Table, line: str, lineno: int) -> None:
    """The rows of the `ALL:` block; rtla's note on lost trace events; anything else after
    the summary (e.g. auto-analysis text) is not part of the histogram."""
    tokens = line.split()
    key = tokens[0]
    if key.endswith(":") and key[:-1] in _SUMMARY[1:] and key[:-1] not in t.all_rows:
        if len(tokens) - 1 != len(t.all_kinds):
            raise ImportFormatError(f"line {lineno}: {len(tokens) - 1} values in the ALL "
                                    f"block for {len(t.all_kinds)} columns")
        t.all_rows[key[:-1]] = [_num(v, f"line {lineno}") for v in tokens[1:]]
    elif "events missed" in line:
        t.notes.append(f"rtla: {line}")


# channels and checks ---------------------------------------------------------------------


def _bucket(t: _Table) -> int:
    """`-b N` writes rows at multiples of N (the index is the bucket's lower edge)."""
    return math.gcd(*t.rows) or 1


def _channels(t: _Table, name_of: Callable[[str, int], str]
              ) -> tuple[list[Channel], list[str], dict[str, dict[str, int]]]:
    assert t.columns is not None and t.unit_ns is not None
    bucket = _bucket(t)
    channels: list[Channel] = []
    notes: list[str] = []
    if bucket > 1:
        notes.append(f"rtla bucket size {bucket} {'ns' if t.unit_ns == 1 else 'µs'} (-b, from "
                     "the row indices): each count is placed at its bucket's lower edge")
    beyond: dict[str, dict[str, int]] = {}
    n = len(t.columns)
    for i, (kind, cpu) in enumerate(t.columns):
        def at(row: str, i: int = i) -> float | None:
            return (t.summary.get(row) or [None] * n)[i]
        name = name_of(kind, cpu)
        buckets = {k: v[i] for k, v in t.rows.items() if v[i]}
        count = int(at("count") or 0)
        _check_over(t, i, name, sum(buckets.values()), count)
        lo, hi, avg = at("min"), at("max"), at("avg")
        ch, extra, above = channel_from_buckets(
            name, cpu, buckets, unit_ns=t.unit_ns, samples=count, width=bucket,
            min_v=int(lo) if lo is not None and count else None,
            max_v=int(hi) if hi is not None and count else None,
            avg_v=avg if count else None)
        if extra:
            notes.append(f"{ch.name}: {extra} sample(s) beyond the histogram (over: "
                         f"{int(at('over') or 0)}) placed at the max")
            beyond[ch.name] = {"count": extra, "above_ns": above}
        channels.append(ch)
    return channels, notes, beyond


def _check_over(t: _Table, i: int, name: str, in_rows: int, count: int) -> None:
    over = t.summary.get("over")
    if over is None:
        return
    if in_rows + int(over[i] or 0) != count:
        raise ImportFormatError(
            f"line {t.summary_line['count']}: {name}: count {count:,} but the rows hold "
            f"{in_rows:,} and over: {int(over[i] or 0):,} (rows cut or edited)")


def _check_all(t: _Table) -> None:
    """The `ALL:` block must be what the per-CPU columns add up to."""
    if not t.all_line:
        return
    assert t.columns is not None
    for j, kind in enumerate(t.all_kinds):
        idx = [i for i, (k, _) in enumerate(t.columns) if k == kind]
        if not idx:
            raise ImportFormatError(f"line {t.all_line}: the ALL block has a {kind} column "
                                    "but no CPU has one")
        for row, combine in (("count", sum), ("min", min), ("max", max)):
            given = (t.all_rows.get(row) or [None] * len(t.all_kinds))[j]
            values = [(t.summary.get(row) or [None] * len(t.columns))[i] for i in idx]
            known = [v for v in values if v is not None]
            want = combine(known) if known else None
            if row == "count" and want is None:
                want = 0
            if given is not None and want is not None and given != want:
                raise ImportFormatError(f"line {t.all_line}: ALL {row} of {kind} is "
                                        f"{given:g} but the CPUs' columns give {want:g}")
