# SPDX-License-Identifier: MIT
"""The maxima per window of a channel, of several channels merged and of a whole run, as
integer arrays: what the extreme-value estimate (rtlab.analysis.evt), the comparisons and
the timeline plots work on. numpy is imported by the functions that need it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np

    from rtlab.results.model import Channel, RunResult
    from rtlab.results.shape import ResultShape


def window_series(ch: Channel) -> tuple[np.ndarray, np.ndarray]:
    """(window indices, window maxima in ns) of a channel: integer arrays (views; int32
    or int64, see WindowMaxima).

    The last window is left out when it holds fewer than half the typical number of
    samples (the run ended inside it), so its maximum is not comparable."""
    import numpy as np

    w = ch.windows
    n = len(w)
    idx, maxima = w.index, w.max_ns
    if n > 1:
        step = max(1, n // 1000)
        typical = float(np.median(w.samples[::step]))
        if int(w.samples[-1]) * 2 < typical:
            idx, maxima = idx[:-1], maxima[:-1]
    return idx, maxima


def merged_window_maxima(channels: Sequence[Channel]) -> tuple[np.ndarray, int | None]:
    """Per window index, the largest maximum over all channels (ns), in index order."""
    _idx, val, window_ns = merged_window_series(channels)
    return val, window_ns


def run_window_maxima(result: RunResult, shape: ResultShape) -> tuple[np.ndarray, int | None]:
    """The worst-channel window maxima (of the headline channels of its probe's `shape`)
    of every phase of a run, phase after phase (phases run one after the other: their
    windows are never merged with each other)."""
    import numpy as np

    window_ns = next((c.window_ns for _, c in result.channels() if c.window_ns), None)
    parts = []
    for phase in result.phases:
        m, w = merged_window_maxima(phase.headline(shape))
        if w == window_ns and len(m):
            parts.append(m)
    return (np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)), window_ns


def merged_window_series(channels: Sequence[Channel]
                         ) -> tuple[np.ndarray, np.ndarray, int | None]:
    """(indices, maxima over all channels per index, window_ns); channels whose window
    length differs from the first one's are left out."""
    import numpy as np

    window_ns = next((c.window_ns for c in channels if c.window_ns), None)
    series = [window_series(ch) for ch in channels if ch.window_ns == window_ns and ch.windows]
    series = [(i, v) for i, v in series if len(i)]
    if not series:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, window_ns
    # one channel at a time into one output array: a list of arrays handed to numpy at
    # once becomes a (channels x windows) copy first (310 MB for a week of 128 CPUs)
    first = series[0][0]
    if all(len(i) == len(first) and i[0] == first[0] and i[-1] == first[-1] for i, _ in series):
        out = series[0][1].astype(np.result_type(*(v.dtype for _, v in series)))
        for _, v in series[1:]:
            np.maximum(out, v, out=out)
        return first, out, window_ns
    lo = min(int(i.min()) for i, _ in series)
    out = np.full(max(int(i.max()) for i, _ in series) - lo + 1, -1, dtype=np.int64)
    for i, v in series:
        at = i.astype(np.int64) - lo
        if len(at) > 1 and not bool(np.all(np.diff(at) > 0)):  # repeated indices
            np.maximum.at(out, at, v)
        else:
            out[at] = np.maximum(out[at], v)
    keep = np.nonzero(out >= 0)[0]
    return keep + lo, out[keep], window_ns
