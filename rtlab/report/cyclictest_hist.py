# SPDX-License-Identifier: MIT
"""A cyclictest-compatible text histogram (`cyclictest -h N` output).

Layout (as cyclictest prints it): one row per 1-µs bucket, ``%06d`` bucket
index, a space, then one ``%06lu`` count per channel separated by tabs; then
the trailer lines ``# Min Latencies:``, ``# Avg Latencies:``,
``# Max Latencies:`` (``%05lu`` per channel, µs truncated like cyclictest) and
``# Histogram Overflows:`` (samples at or beyond N µs). Lines starting with
``#`` at the top name the run and the channel of each column. The per-cycle
overflow list is not written (rtlab does not keep cycle numbers).

Re-binning. rtlab's histogram is log-linear in ns: below 131 µs its buckets are
narrower than 1 µs but their edges are powers-of-two multiples, not µs
multiples, so a bucket may straddle a µs boundary; above 131 µs buckets are
wider than 1 µs (1/128 to 1/256 of their value: 8 to 16 µs wide around 2 ms). Each
bucket's count is spread over the 1-µs rows it overlaps in proportion to the overlap
(uniform within the bucket, the first and last bucket clipped to the exact min and
max), rounded to integers by largest remainder so that the total of every channel is
exact. A narrow bucket therefore ends up in
at most two neighbouring rows; a wide one is spread flat over several rows,
which smooths the shape of the far tail (the exact max stays in the trailer).
"""

from __future__ import annotations

import math

from rtlab.report.export_base import Exporter
from rtlab.results.histogram import LogLinHistogram
from rtlab.results.model import RunResult

HIST_MAX = 1_000_000  # rows, as cyclictest


def rebin_us(hist: LogLinHistogram, rows: int, min_ns: int | None = None,
             max_ns: int | None = None) -> tuple[list[int], int]:
    """Counts per 1-µs row 0..rows-1 and the overflow count (see the module docstring).

    `min_ns`/`max_ns`, the exact extremes: one sample each is put in its own row (as
    cyclictest's histogram always has a count in the row of its min and max), and the
    rest of their buckets is spread over [min, max] only, never below the min or above
    the max (a wide last bucket would otherwise put counts beyond the row of the max)."""
    out = [0] * rows
    overflow = 0
    limit = rows * 1000

    def put(row: int, n: int) -> None:
        nonlocal overflow
        if row < rows:
            out[row] += n
        else:
            overflow += n

    for b in hist.buckets():
        lo, end = b.lo, b.hi + 1  # [lo, end) in ns
        count = b.count
        pins = []
        if max_ns is not None and lo <= max_ns < end:
            end = max_ns + 1
            pins.append(max_ns)
        if min_ns is not None and lo <= min_ns < end:
            lo = min_ns
            if min_ns != max_ns:
                pins.append(min_ns)
        for v in pins[:count]:
            put(v // 1000, 1)
            count -= 1
        if count == 0:
            continue
        width = end - lo
        if lo >= limit:
            overflow += count
            continue
        shares: list[tuple[int, float]] = []
        for row in range(lo // 1000, min((end - 1) // 1000, rows - 1) + 1):
            overlap = min(end, (row + 1) * 1000) - max(lo, row * 1000)
            shares.append((row, count * overlap / width))
        exact_in = sum(sh for _, sh in shares)
        n_in = round(exact_in) if end > limit else count
        floors = [(row, math.floor(sh), sh - math.floor(sh)) for row, sh in shares]
        left = n_in - sum(f for _, f, _ in floors)
        for i, (row, f, _frac) in enumerate(sorted(floors, key=lambda x: -x[2])):
            out[row] += f + (1 if i < left else 0)
        overflow += count - n_in
    return out, overflow


class CyclictestHistExporter(Exporter):
    name, extension, media_type = "cyclictest-hist", "txt", "text/plain"

    def __init__(self, rows: int | None = None) -> None:
        self.rows = rows  # None: enough 1-µs rows to hold the largest max (capped)

    def serialize(self, result: RunResult) -> bytes:
        cols = list(result.channels())
        rows = self.rows
        if rows is None:
            top = max((ch.max_ns or 0 for _, ch in cols), default=0)
            rows = min(max(top // 1000 + 1, 1), HIST_MAX)
        data = [rebin_us(ch.hist, rows, ch.min_ns, ch.max_ns) for _, ch in cols]
        out = [f"# rtlab run {result.run_id} ({result.probe}), cyclictest-compatible histogram: "
               "1 us per row, one column per channel",
               "# columns: " + " ".join(f"{p.name}/{c.name}" for p, c in cols)]
        for i in range(rows):
            out.append(f"{i:06d} " + "\t".join(f"{d[0][i]:06d}" for d in data))

        def trailer(values: list[int]) -> str:
            return " ".join(f"{v:05d}" for v in values)

        mins = [(ch.min_ns or 0) // 1000 for _, ch in cols]
        avgs = [(ch.sum_ns // ch.samples // 1000) if ch.samples else 0 for _, ch in cols]
        maxs = [(ch.max_ns or 0) // 1000 for _, ch in cols]
        out.append(f"# Min Latencies: {trailer(mins)}")
        out.append(f"# Avg Latencies: {trailer(avgs)}")
        out.append(f"# Max Latencies: {trailer(maxs)}")
        out.append(f"# Histogram Overflows: {trailer([d[1] for d in data])}")
        return ("\n".join(out) + "\n").encode()
