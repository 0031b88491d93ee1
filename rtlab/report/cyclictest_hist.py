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
wider than 1 µs (1/128 to 1/256 of their value: 8 to 16 µs wide around 2 ms). Each bucket's count
is spread over the 1-µs rows it overlaps in proportion to the overlap
(uniform within the bucket), rounded to integers by largest remainder so
that the total of every channel is exact. A narrow bucket therefore ends up in
at most two neighbouring rows; a wide one is spread flat over several rows,
which smooths the shape of the far tail (the exact max stays in the trailer).
"""

from __future__ import annotations

import math

from rtlab.report.exporters import Exporter
from rtlab.results.histogram import LogLinHistogram
from rtlab.results.model import RunResult

HIST_MAX = 1_000_000  # rows, as cyclictest


def rebin_us(hist: LogLinHistogram, rows: int) -> tuple[list[int], int]:
    """Counts per 1-µs row 0..rows-1 and the overflow count (see the module docstring)."""
    out = [0] * rows
    overflow = 0
    limit = rows * 1000
    for b in hist.buckets():
        lo, end = b.lo, b.hi + 1  # [lo, end) in ns
        width = end - lo
        if lo >= limit:
            overflow += b.count
            continue
        shares: list[tuple[int, float]] = []
        for row in range(lo // 1000, min((end - 1) // 1000, rows - 1) + 1):
            overlap = min(end, (row + 1) * 1000) - max(lo, row * 1000)
            shares.append((row, b.count * overlap / width))
        exact_in = sum(s for _, s in shares)
        n_in = round(exact_in) if end > limit else b.count
        floors = [(row, math.floor(s), s - math.floor(s)) for row, s in shares]
        left = n_in - sum(f for _, f, _ in floors)
        for i, (row, f, _frac) in enumerate(sorted(floors, key=lambda x: -x[2])):
            out[row] += f + (1 if i < left else 0)
        overflow += b.count - n_in
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
        data = [rebin_us(ch.hist, rows) for _, ch in cols]
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
