# SPDX-License-Identifier: MIT
"""The look of rtlab's figures: matplotlib settings, colors, fixed margins and the tick
labels of logarithmic latency and count axes (matplotlib imported lazily)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from rtlab.textfmt import human

if TYPE_CHECKING:  # pragma: no cover
    from matplotlib.figure import Figure

COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
           "#bcbd22", "#17becf", "#d62728")
RC = {"svg.fonttype": "none", "font.size": 9, "axes.titlesize": 10,
       "axes.grid": True, "grid.alpha": 0.3, "grid.linewidth": 0.5}

def new_figure(width: float, height: float) -> Figure:
    """A figure with fixed margins (constrained layout costs seconds with many panels)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=100)
    top = 1 - 0.45 / height
    fig.subplots_adjust(left=0.08, right=0.985, bottom=0.55 / height + 0.02, top=top,
                        hspace=0.9 / max(height, 1) * 2.2, wspace=0.12)
    return fig


def no_minor_ticks(ax: Any) -> None:
    """Log axes get dozens of minor ticks per panel; they dominate drawing time."""
    from matplotlib.ticker import NullLocator

    ax.xaxis.set_minor_locator(NullLocator())
    ax.yaxis.set_minor_locator(NullLocator())


def color(i: int) -> str:
    return COLORS[i % len(COLORS)]


def plain_ticks(axis: Any, lo: float | None = None, hi: float | None = None,
           inches: float = 5.0, vertical: bool = False) -> None:
    """Plain numbers (0.5, 10, 2000) instead of 10^x on a logarithmic µs axis. Ticks at
    1-2-5 steps when there is room (a latency axis often spans less than two decades; one
    label per decade leaves it unreadable), 1-3 or one per decade on wide ranges so that
    labels like 5000 10000 20000 do not run into each other. Major ticks only: minor
    ones cost drawing time."""
    from matplotlib.ticker import FuncFormatter, LogLocator

    subs: tuple[float, ...] = (1.0, 2.0, 5.0)
    if lo and hi and hi > lo > 0:
        per_decade = inches / max(math.log10(hi / lo), 0.3)
        need = 0.5 if vertical else 1.0  # labels stacked need less room than side by side
        subs = (1.0, 2.0, 5.0) if per_decade >= 2.2 * need else (1.0, 3.0) \
            if per_decade >= 1.2 * need else (1.0,)
    axis.set_major_locator(LogLocator(base=10, subs=subs, numticks=12))
    axis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))


def headroom(ax: Any, lo: float, hi: float, fraction: float) -> None:
    """Log y-limits [lo, top] with the top `fraction` of the axes left empty above `hi`,
    for labels and legends that must not hide data."""
    lo = max(lo, 1e-300)
    hi = max(hi, lo * 1.0001)
    top = hi * (hi / lo) ** (fraction / (1 - fraction))
    ax.set_ylim(lo, top)


_SUP = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def pow10_ticks(axis: Any) -> None:
    """10⁴-style labels on a logarithmic count axis, without mathtext (slow)."""
    from matplotlib.ticker import FuncFormatter

    def fmt(v: float, _pos: int) -> str:
        if v <= 0:
            return ""
        e = math.log10(v)
        if abs(e - round(e)) > 1e-6:
            return ""
        e = round(e)
        return f"{v:g}" if -1 <= e <= 2 else "10" + str(e).translate(_SUP)

    axis.set_major_formatter(FuncFormatter(fmt))


def us_text(ns: float) -> str:

    return human(ns)

