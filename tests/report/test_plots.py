# SPDX-License-Identifier: MIT
"""Static plots: axes a reader can read."""

from __future__ import annotations

import numpy as np
from synth import channel_from_samples

from rtlab.report.plots import hist_figure


def test_latency_axis_under_two_decades_has_1_2_5_labels() -> None:
    # one label per decade left a 15..600 µs axis with the single label "100"
    rng = np.random.default_rng(3)
    samples = np.exp(rng.normal(np.log(30_000), 0.5, 20_000)).clip(15_000, 600_000)
    ch = channel_from_samples("cpu0", 0, samples, 1000, 1_000_000_000)
    fig = hist_figure([ch])
    ax = fig.axes[0]
    fig.canvas.draw()
    lo, hi = ax.get_xlim()
    shown = {t.get_text() for t, v in zip(ax.get_xticklabels(), ax.get_xticks(), strict=True)
             if lo <= v <= hi and t.get_text()}
    assert {"20", "50", "100", "200"} <= shown
