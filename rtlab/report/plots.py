# SPDX-License-Identifier: MIT
"""Static plots (matplotlib, imported lazily; no pyplot, no display needed).

* `hist_figure`     - one panel per channel (CPU): samples per histogram bucket on
                      a log y-axis over latency in µs, mode and max marked (the
                      OSADL/AMSC picture). The x-axis is logarithmic because the
                      buckets are log-linear (each octave split into 128 buckets),
                      so every bucket has the same width on the page.
* `ccdf_figure`     - complementary CDF, P(latency > x), log-log: the tails at a glance.
* `timeline_figure` - maxima per window over run time, with the running maximum:
                      does the maximum still grow? Long series are downsampled to
                      at most `MAX_POINTS` columns keeping the maximum of each.
* `evt_figure`      - window maxima against the fitted extreme-value models.

`figure_svg(fig)` returns inline SVG text; `save_figure(fig, path)` writes
.png or .svg.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rtlab.analysis.configs import beyond_range
from rtlab.analysis.window_maxima import merged_window_series, window_series
from rtlab.errors import UsageError
from rtlab.report.plot_style import (
    RC,
    color,
    headroom,
    new_figure,
    no_minor_ticks,
    plain_ticks,
    pow10_ticks,
    us_text,
)
from rtlab.results.model import Channel as _Channel
from rtlab.results.summary import mode
from rtlab.results.windows import WindowMaxima
from rtlab.textfmt import shown

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np
    from matplotlib.figure import Figure

    from rtlab.analysis.day import BoardDay
    from rtlab.analysis.evt import EvtEstimate
    from rtlab.results.histogram import LogLinHistogram
    from rtlab.results.model import Channel, Phase, RunResult

MAX_POINTS = 1500

def hist_steps(hist: LogLinHistogram) -> tuple[list[float], list[float]]:
    """Contiguous stair edges (µs) and values (samples per µs) of the non-empty buckets,
    with zeros filling gaps (zeros are invisible on a log axis).

    Samples per µs, not per bucket: the log-linear buckets double their width at every
    power of two, so raw counts per bucket would jump by 2x there. Per µs is also what
    a cyclictest histogram (1-µs buckets) shows, so the pictures compare directly."""
    edges: list[float] = []
    values: list[float] = []
    prev_end: int | None = None
    for b in hist.buckets():
        lo, end = max(b.lo, 1), b.hi + 1
        if prev_end is None:
            edges.append(lo / 1000)
        elif lo > prev_end:
            values.append(0.0)
            edges.append(lo / 1000)
        values.append(b.count * 1000.0 / (b.hi + 1 - b.lo))
        edges.append(end / 1000)
        prev_end = end
    return edges, values


OVERLAY_ABOVE = 8


def hist_overlay_figure(channels: Sequence[Channel], title: str = "",
                        labels: Sequence[str] | None = None) -> Figure:
    """All channels' histograms in one panel (OSADL style, for many CPUs, or configurations
    overlaid): each channel's max is a triangle of its colour on top; the worst max and the
    mode of all are labelled. Configurations (`labels` given) are usually of different
    length: their curves are fractions of their samples per µs, so the shapes compare."""
    from matplotlib import rc_context


    with rc_context(RC):
        fig = new_figure(11, 5.0)
        ax = fig.subplots()
        names = list(labels) if labels is not None else [_label(c) for c in channels]
        # counts: the axis reaches down to one sample; fractions: to the smallest value
        ymin, ymax = (1.0 if labels is None else math.inf), 0.0
        xmin, xmax = math.inf, 0.0
        for i, ch in enumerate(channels):
            edges, values = hist_steps(ch.hist)
            if values and labels is not None:
                values = [v / ch.hist.total for v in values]
            if values:
                ymin = min(ymin, *(v for v in values if v > 0))
                ymax = max(ymax, *values)
                xmin, xmax = min(xmin, edges[0]), max(xmax, edges[-1])
                ax.plot(edges, [*values, values[-1]], drawstyle="steps-post", color=color(i),
                        linewidth=0.7 if len(channels) > 4 else 1.1, label=names[i])
            if ch.max_ns is not None:
                ax.plot([ch.max_ns / 1000], [1], marker="v", color=color(i), markersize=6,
                        transform=ax.get_xaxis_transform(), clip_on=False)
        merged = _Channel.merged("all", list(channels))
        m = mode(merged.hist) if labels is None else None
        # the labels sit just above the data, the legend above them (see headroom below)
        label_y = max(ymax, 1e-300) * 1.8
        if m is not None:
            ax.axvline(m / 1000, color="#444", linestyle="--", linewidth=0.8)
            ax.annotate(f"mode (all) {us_text(m)}", (m / 1000, label_y), xytext=(3, 0),
                        textcoords="offset points", fontsize=8, color="#444", va="bottom")
        if merged.max_ns is not None:
            worst = max(channels, key=lambda c: c.max_ns or 0)
            ax.axvline(merged.max_ns / 1000, color="#d62728", linewidth=1.2)
            ax.annotate(f"max {us_text(merged.max_ns)} ({names[list(channels).index(worst)]})",
                        (merged.max_ns / 1000, label_y), xytext=(-3, 0),
                        textcoords="offset points", ha="right", va="bottom", fontsize=8,
                        color="#d62728", fontweight="bold")
        ax.set_yscale("log")
        rows = math.ceil(len(channels) / 6)
        if ymax > 0:  # room for the labels (one line) and the legend's rows
            headroom(ax, ymin / 1.5, ymax, min(0.14 + 0.045 * rows, 0.4))
        ax.set_xscale("log")
        if xmax > 0:
            ax.set_xlim(xmin / 1.15, xmax * 1.5)
            plain_ticks(ax.xaxis, xmin / 1.15, xmax * 1.5, 9.5)
        pow10_ticks(ax.yaxis)
        no_minor_ticks(ax)
        what = "CPU" if labels is None else "configuration"
        ax.set_xlabel(f"latency (µs, log scale); ▼ = maximum of each {what}")
        ax.set_ylabel("samples per µs" if labels is None else "fraction of samples per µs")
        ax.legend(loc="upper center", fontsize=7, ncol=6, bbox_to_anchor=(0.45, 1.0),
                  frameon=False)
        if title:
            ax.set_title(title, loc="left")
    return fig


def hist_figure(channels: Sequence[Channel], title: str = "") -> Figure:
    """Per-channel histograms (small multiples up to 8 channels, else one overlay panel),
    log y, mode and max marked."""
    from matplotlib import rc_context


    if len(channels) > OVERLAY_ABOVE:
        return hist_overlay_figure(channels, title)
    with rc_context(RC):
        n = max(1, len(channels))
        ncols = 1 if n == 1 else 2 if n <= 4 else 3 if n <= 9 else 4
        nrows = math.ceil(n / ncols)
        fig = new_figure(11, 0.6 + 2.3 * nrows)
        axes = fig.subplots(nrows, ncols, sharex=True, sharey=True, squeeze=False)
        xmin, xmax = math.inf, 0.0
        ymin, ymax = 1.0, 1.0
        for i, ch in enumerate(channels):
            ax = axes[i // ncols][i % ncols]
            edges, values = hist_steps(ch.hist)
            if values:
                ymin = min(ymin, *(v for v in values if v > 0))
                ymax = max(ymax, *values)
                ax.plot(edges, [*values, values[-1]], drawstyle="steps-post", color=color(i),
                        linewidth=1.0)
                xmin, xmax = min(xmin, edges[0]), max(xmax, edges[-1])
            m = mode(ch.hist)
            if m is not None:
                ax.axvline(m / 1000, color="#444", linestyle="--", linewidth=0.8)
                ax.annotate(f"mode {us_text(m)}", (m / 1000, 1),
                            xycoords=("data", "axes fraction"), xytext=(3, -12),
                            textcoords="offset points", fontsize=8, color="#444")
            if ch.max_ns is not None:
                ax.axvline(ch.max_ns / 1000, color="#d62728", linewidth=1.2)
                ax.annotate(f"max {us_text(ch.max_ns)}", (ch.max_ns / 1000, 1),
                            xycoords=("data", "axes fraction"), xytext=(-3, -24),
                            textcoords="offset points", ha="right", fontsize=8, color="#d62728",
                            fontweight="bold")
            label = f"CPU{ch.cpu}" if ch.cpu is not None and ch.name == f"cpu{ch.cpu}" else ch.name
            ax.set_title(f"{label}: {ch.samples:,} samples", loc="left")
        for j in range(len(channels), nrows * ncols):
            axes[j // ncols][j % ncols].set_visible(False)
        ax0 = axes[0][0]
        ax0.set_yscale("log")
        headroom(ax0, ymin / 1.5, ymax, 0.2)  # the mode and max labels sit above the data
        pow10_ticks(ax0.yaxis)
        if xmax > 0:
            ax0.set_xscale("log")
            ax0.set_xlim(xmin / 1.15, xmax * 1.5)
            plain_ticks(ax0.xaxis, xmin / 1.15, xmax * 1.5, 10.0 / ncols)
        for row in axes:
            for ax in row:
                no_minor_ticks(ax)
        for row in axes:
            row[0].set_ylabel("samples per µs")
        for ax in axes[-1]:
            ax.set_xlabel("latency (µs, log scale)")
        if title:
            fig.suptitle(title, x=0.01, ha="left", fontsize=11)
    return fig


def censored_of(result: RunResult | None, channels: Sequence[str]) -> tuple[int, int] | None:
    """ccdf_figure's `censored` entry for these channels of an imported run, or None."""

    if result is None:
        return None
    count, above = beyond_range(result, channels)
    return (count, above) if count and above is not None else None


def ccdf_points(hist: LogLinHistogram, min_ns: int | None, max_ns: int | None
                ) -> tuple[list[float], list[float]]:
    """x (µs) and P(latency > x) at each non-empty bucket's upper edge (clamped to max)."""
    n = hist.total
    xs: list[float] = []
    ys: list[float] = []
    if n == 0:
        return xs, ys
    start = (min_ns if min_ns is not None else next(iter(hist.buckets())).lo)
    xs.append(max(start, 1) / 1000)
    ys.append(1.0)
    seen = 0
    for b in hist.buckets():
        seen += b.count
        hi = b.hi if max_ns is None else min(b.hi, max_ns)
        xs.append(max(hi, 1) / 1000)
        ys.append((n - seen) / n)
    return xs, ys


def ccdf_figure(series: Sequence[tuple[str, Channel]], title: str = "",
                width: float = 11, height: float = 4.6,
                censored: Sequence[tuple[int, int] | None] | None = None) -> Figure:
    """P(latency > x) on log-log axes, one line per (label, channel).

    `censored[i]` = (count, above_ns): that many samples of series i are only known to be
    at or above above_ns (an imported peer tool counted them beyond its histogram range;
    the importer placed them at the max). Beyond above_ns the curve is drawn dashed: it is
    only an upper bound there (the true curve lies between it and zero)."""
    from matplotlib import rc_context

    with rc_context(RC):
        fig = new_figure(width, height)
        ax = fig.subplots()
        floor = 1.0
        xmin, xmax = math.inf, 0.0
        for i, (label, ch) in enumerate(series):
            xs, ys = ccdf_points(ch.hist, ch.min_ns, ch.max_ns)
            if not xs:
                continue
            xmin, xmax = min(xmin, xs[0]), max(xmax, xs[-1])
            n = ch.hist.total
            floor = min(floor, 1 / n)
            # draw as steps; the last point (0) is invisible on log y, so end the line
            # at 1/N at the max to show where the data stop
            ys_plot = [y if y > 0 else 1 / n for y in ys]
            cut = censored[i] if censored is not None and i < len(censored) else None
            text = f"{label} (max {us_text(ch.max_ns or 0)})"
            if cut and cut[0] > 0:
                above = max(cut[1], 1) / 1000
                k = next((j for j, x in enumerate(xs) if x > above), len(xs))
                if 0 < k < len(xs):
                    text = (f"{label} (max {us_text(ch.max_ns or 0)}; {cut[0]} beyond "
                            f"{us_text(cut[1])}: dashed = upper bound)")
                    ax.step([*xs[:k], above], [*ys_plot[:k], ys_plot[k - 1]], where="post",
                            color=color(i), linewidth=1.2, label=text)
                    ax.step([above, *xs[k:]], [ys_plot[k - 1], *ys_plot[k:]], where="post",
                            color=color(i), linewidth=1.2, linestyle="--")
                    ax.plot([xs[-1]], [1 / n], marker="o", color=color(i), markersize=4,
                            fillstyle="none")
                    continue
            ax.step(xs, ys_plot, where="post", color=color(i), linewidth=1.2, label=text)
            ax.plot([xs[-1]], [1 / n], marker="o", color=color(i), markersize=4)
        for q, lab in ((1e-2, "p99"), (1e-3, "p99.9"), (1e-4, "p99.99"), (1e-6, "p99.9999")):
            if q >= floor:
                ax.axhline(q, color="#999", linewidth=0.6, linestyle=":")
                ax.annotate(lab, (0.995, q), xycoords=("axes fraction", "data"), ha="right",
                            va="bottom", fontsize=7, color="#777")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_ylim(bottom=floor / 2, top=1.5)
        if xmax > 0:
            plain_ticks(ax.xaxis, xmin, xmax, width * 0.85)
        pow10_ticks(ax.yaxis)
        no_minor_ticks(ax)
        ax.set_xlabel("latency x (µs, log scale)")
        ax.set_ylabel("fraction of samples > x")
        if len(series) <= 12:
            ax.legend(loc="lower left", fontsize=8)
        if title:
            ax.set_title(title, loc="left")
    return fig


def downsample_max(x: np.ndarray, y: np.ndarray, points: int = MAX_POINTS
                   ) -> tuple[np.ndarray, np.ndarray]:
    """At most `points` (x, y) pairs: the series is cut into equal runs and each keeps its
    largest y (at the x where it occurred), so no spike disappears from the plot."""
    import numpy as np

    n = len(y)
    if n <= points:
        return x, y
    size = math.ceil(n / points)
    pad = (-n) % size
    low = np.iinfo(y.dtype).min if y.dtype.kind in "iu" else -np.inf
    yy = np.concatenate([y, np.full(pad, low, dtype=y.dtype)])
    blocks = yy.reshape(-1, size)
    arg = blocks.argmax(axis=1) + np.arange(blocks.shape[0]) * size
    return x[arg], y[arg]


def _time_unit(total_s: float) -> tuple[str, float]:
    if total_s >= 3 * 86400:
        return "days", 86400.0
    if total_s >= 3 * 3600:
        return "h", 3600.0
    if total_s >= 180:
        return "min", 60.0
    return "s", 1.0


def timeline_figure(channels: Sequence[Channel], title: str = "", *,
                    end_ns: int | None = None,
                    marks: Sequence[tuple[float, str]] = ()) -> Figure:
    """Window maxima over run time: the worst channel per window, the running maximum and
    (up to 8 channels) each channel faintly. `end_ns`: where the run (phase) ended, so a
    last, partial window is not drawn beyond it; `marks`: (seconds, label) of phase starts."""
    import numpy as np
    from matplotlib import rc_context


    with rc_context(RC):
        fig = new_figure(11, 3.8)
        ax = fig.subplots()
        idx, vals, window_ns = merged_window_series(channels)
        if not window_ns or not len(idx):
            ax.text(0.5, 0.5, "no window maxima recorded", ha="center", va="center",
                    transform=ax.transAxes)
            ax.set_axis_off()
            return fig
        w_s = window_ns / 1e9
        arrays = [(ch, window_series(ch)) for ch in channels
                  if ch.window_ns == window_ns and ch.windows]
        t = idx * w_s  # start of each window, s
        end_s = float(t[-1]) + w_s
        if end_ns is not None and float(t[-1]) < end_ns / 1e9 < end_s:
            end_s = end_ns / 1e9  # the run ended inside its last window
        unit, scale = _time_unit(end_s)

        def extend(x: np.ndarray, y: np.ndarray, stop: float) -> tuple[np.ndarray, np.ndarray]:
            # steps-post draws a value from its x to the next x: close the last window
            return np.append(x, stop), np.append(y, y[-1])

        lo = float(vals.min()) / 1000
        if 1 < len(arrays) <= 8:
            for i, (ch, (ci, cv)) in enumerate(arrays):
                if not len(ci):
                    continue
                lo = min(lo, float(cv.min()) / 1000)
                stop = min(float(ci[-1]) * w_s + w_s, end_s)
                x, y = extend(*downsample_max(ci * w_s, cv), stop)
                ax.step(x / scale, y / 1000, where="post", color=color(i), linewidth=0.6,
                        alpha=0.6, label=_label(ch))
        x, y = extend(*downsample_max(t, vals), end_s)
        ax.step(x / scale, y / 1000, where="post", color="#333", linewidth=0.8,
                label="worst channel per window" if len(arrays) > 1 else "window maximum")
        running = np.maximum.accumulate(vals)
        rx, ry = extend(*downsample_max(t, running), end_s)
        ax.step(rx / scale, ry / 1000, where="post", color="#d62728", linewidth=1.4,
                label="running maximum")
        for at_s, label in marks:
            ax.axvline(at_s / scale, color="#777", linestyle="--", linewidth=0.8)
            ax.annotate(label, (at_s / scale, 0), xycoords=("data", "axes fraction"),
                        xytext=(3, 3), textcoords="offset points", fontsize=8, color="#555")
        ax.set_yscale("log")
        hi = float(vals.max()) / 1000
        headroom(ax, lo / 1.3, hi, 0.18)  # the legend sits above the data, never on it
        plain_ticks(ax.yaxis, lo / 1.3, hi * 2, 2.8, vertical=True)
        no_minor_ticks(ax)
        ax.set_xlim(float(t[0]) / scale, end_s / scale)
        ax.set_xlabel(f"run time ({unit}); one point per {w_s:g} s window"
                      + (" (downsampled, maxima kept)" if len(vals) > MAX_POINTS else ""))
        ax.set_ylabel("window maximum (µs, log)")
        ax.legend(loc="upper left", fontsize=8, ncol=6, frameon=False)
        if title:
            ax.set_title(title, loc="left")
    return fig


def evt_figure(est: EvtEstimate, maxima_ns: np.ndarray, title: str = "") -> Figure:
    """Empirical exceedance probability of the window maxima and the fitted models."""
    import numpy as np
    from matplotlib import rc_context

    with rc_context(RC):
        fig = new_figure(11, 3.6)
        ax = fig.subplots()
        x = np.sort(maxima_ns.astype(np.float64) / 1000)
        n = len(x)
        if n == 0 or est.gev is None or est.gumbel is None:
            ax.text(0.5, 0.5, "no extreme-value fit", ha="center", va="center",
                    transform=ax.transAxes)
            ax.set_axis_off()
            return fig
        surv = 1 - (np.arange(1, n + 1) - 0.5) / n
        keep = np.unique(np.concatenate([np.linspace(0, n - 1, min(n, 1500)).astype(int),
                                         np.arange(max(0, n - 300), n)]))
        ax.plot(x[keep], surv[keep], ".", markersize=3, color="#333",
                label=f"observed window maxima (n = {n:,})")
        grid = np.geomspace(max(x[0], 1e-3), x[-1] * 4, 300)
        for fit, name, c in ((est.gev, f"GEV (k = {est.gev.k:.2f})", "#1f77b4"),
                             (est.gumbel, "Gumbel", "#ff7f0e")):
            ys = np.array([1 - fit.cdf(float(g)) for g in grid])
            ax.plot(grid, np.clip(ys, 1e-300, None), color=c, linewidth=1.2, label=name)
        t = est.tail
        if t is not None:  # the tail model: a GPD on the largest maxima, above its threshold
            tg = grid[grid >= t.u]
            ys = np.array([t.exceed_within(float(g), 1) for g in tg])
            ax.plot(tg, np.clip(ys, 1e-300, None), color="#2ca02c", linewidth=1.2,
                    linestyle="--", label=f"tail model (largest {t.m:,}, k = {t.k:.2f})")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_ylim(bottom=0.3 / n, top=1.5)
        plain_ticks(ax.xaxis, float(grid[0]), float(grid[-1]), 9.0)
        pow10_ticks(ax.yaxis)
        no_minor_ticks(ax)
        ax.set_xlabel("window maximum (µs, log)")
        ax.set_ylabel("P(window maximum > x)")
        ax.legend(loc="lower left", fontsize=8)
        if title:
            ax.set_title(title, loc="left")
    return fig


def figure_svg(fig: Figure) -> str:
    """Inline SVG (no XML prolog) of a figure."""
    from matplotlib import rc_context

    buf = io.StringIO()
    with rc_context(RC):
        fig.savefig(buf, format="svg")
    text = buf.getvalue()
    start = text.find("<svg")
    return text[start:] if start >= 0 else text


def save_figure(fig: Figure, path: str | Path, option: str = "--output") -> Path:
    path = Path(path)
    fmt = path.suffix.lower().lstrip(".")
    if fmt not in ("png", "svg"):
        raise UsageError(f"{option} {shown(str(path))}: a plot file must end in .png or .svg")
    from matplotlib import rc_context

    from rtlab.fileio import check_output, open_output

    target = check_output(path, option)
    with open_output(path, option) as f, rc_context(RC):
        fig.savefig(f, format=fmt, dpi=110)
    return target or path


def plot_kinds() -> tuple[str, ...]:
    return ("hist", "ccdf", "timeline")


def figure_for(kind: str, phases: Sequence[Phase], title: str,
               result: RunResult | None = None) -> Any:
    """The `rtlab plot` figure of one or several phases. Phases ran one after the other:
    with several, channels are labelled with their phase, and the timeline puts the phases
    back to back (each phase's windows count from its own start) with their starts marked."""
    from dataclasses import replace

    several = len(phases) > 1

    def named(ph: Phase, ch: Channel) -> Channel:
        return replace(ch, name=f"{ph.name} {_label(ch)}") if several else ch

    if kind in ("hist", "ccdf"):
        chans = [named(ph, c) for ph in phases for c in ph.channels]
        if kind == "hist":
            return hist_figure(chans, title)
        cuts = [censored_of(result, [c.name]) for ph in phases for c in ph.channels]
        return ccdf_figure([(c.name if several else _label(c), c) for c in chans], title,
                           censored=cuts)
    if kind != "timeline":
        raise UsageError(f"unknown plot kind {kind!r}", hint="hist, ccdf or timeline")
    if not several:
        ph = phases[0]
        return timeline_figure(ph.channels, title, end_ns=ph.elapsed_ns)
    return _timeline_of_phases(phases, title)


def _timeline_of_phases(phases: Sequence[Phase], title: str) -> Figure:
    from dataclasses import replace

    import numpy as np


    window_ns = next((c.window_ns for ph in phases for c in ph.channels if c.window_ns), None)
    by_name: dict[str, list[Channel]] = {}
    marks: list[tuple[float, str]] = []
    offset = 0  # in windows
    for ph in phases:
        marks.append((offset * (window_ns or 0) / 1e9, ph.name))
        for ch in ph.channels:
            if window_ns and ch.window_ns == window_ns and ch.windows:
                w = ch.windows
                shifted = replace(ch, windows=WindowMaxima(
                    w.index.astype(np.int64) + offset, w.max_ns, w.samples))
                by_name.setdefault(_label(ch), []).append(shifted)
        span = max((int(c.windows.index[-1]) + 1 for c in ph.channels
                    if c.window_ns == window_ns and c.windows), default=0)
        if window_ns and ph.elapsed_ns:
            span = max(span, math.ceil(ph.elapsed_ns / window_ns))
        offset += span
    chans = [_concat(parts) for parts in by_name.values()]
    end_ns = offset * window_ns if window_ns else None
    return timeline_figure(chans, title, end_ns=end_ns, marks=marks[1:] if chans else ())


def _concat(parts: Sequence[Channel]) -> Channel:
    """One channel's window maxima of several phases, already shifted, end to end."""
    from dataclasses import replace

    import numpy as np


    w = WindowMaxima(np.concatenate([p.windows.index.astype(np.int64) for p in parts]),
                     np.concatenate([p.windows.max_ns.astype(np.int64) for p in parts]),
                     np.concatenate([p.windows.samples.astype(np.int64) for p in parts]))
    return replace(parts[0], windows=w)


def _label(ch: Channel) -> str:
    return f"CPU{ch.cpu}" if ch.cpu is not None and ch.name == f"cpu{ch.cpu}" else ch.name


def day_figure(bd: BoardDay) -> Figure:
    """A board's day, OSADL-style: the maximum of every slot over 24 hours per CPU (gaps
    left empty), and the day's latency histogram per CPU."""
    import numpy as np

    from rtlab.scenario.units import format_duration

    fig = new_figure(10.0, 7.0)
    top, bottom = fig.add_subplot(2, 1, 1), fig.add_subplot(2, 1, 2)
    # hours of the day; days of the period when it has several
    unit = 3600 if bd.days == 1 else 86_400
    x = (np.arange(bd.slots) * bd.slot_s + bd.slot_s / 2) / unit
    for i, cd in enumerate(bd.cpus):
        y = np.where(cd.slot_max >= 0, cd.slot_max / 1000, np.nan)
        top.plot(x, y, drawstyle="steps-mid", lw=1.0, color=color(i), label=cd.channel)
        edges, values = hist_steps(cd.hist)
        if values:
            bottom.stairs(values, edges, color=color(i), label=cd.channel)
    top.set_yscale("log")
    if bd.days == 1:
        top.set_xlim(0, 24)
        top.set_xticks(range(0, 25, 3))
        top.set_xlabel("time of day (UTC), h")
    else:
        top.set_xlim(0, bd.days)
        step = max(1, bd.days // 10)
        top.set_xticks(range(0, bd.days + 1, step))
        top.set_xlabel(f"days from {bd.day.isoformat()} 00:00 UTC")
    slot = format_duration(bd.slot_s * 1_000_000_000)
    top.set_ylabel(f"max per {slot} slot, µs")
    top.set_title(f"{bd.host} on {bd.period()}: maximum latency per "
                  f"{slot} slot (gaps: not measured)")
    bottom.set_xscale("log")
    bottom.set_yscale("log")
    bottom.set_xlabel("latency, µs")
    bottom.set_ylabel("samples per µs")
    bottom.set_title("latency histogram of the " + ("day" if bd.days == 1 else "period"))
    for ax in (top, bottom):
        no_minor_ticks(ax)
        if bd.cpus:
            ax.legend(loc="upper right", fontsize=7, ncol=min(len(bd.cpus), 8))
    return fig
