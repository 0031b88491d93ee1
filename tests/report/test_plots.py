# SPDX-License-Identifier: MIT
"""Static plots: axes a reader can read."""

from __future__ import annotations

import itertools

import numpy as np

from rtlab.report.plots import hist_figure, hist_steps
from tests.support.synth import channel_from_samples


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


def _visible_labels(fig, axis):
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    ax = axis.axes
    lo, hi = ax.get_xlim() if axis is ax.xaxis else ax.get_ylim()
    return [t.get_window_extent(renderer) for t, v in
            zip(axis.get_ticklabels(), axis.get_ticklocs(), strict=True)
            if lo <= v <= hi and t.get_text()]


def test_wide_latency_axis_labels_do_not_run_into_each_other() -> None:
    # 10 µs .. 20 ms on a half-width panel printed "1000020000" before
    rng = np.random.default_rng(4)
    s = np.exp(rng.normal(np.log(30_000), 0.4, 50_000))
    s[:5] = [2e6, 5e6, 9e6, 15e6, 20e6]
    chans = [channel_from_samples(f"cpu{i}", i, s, 1000, 1_000_000_000) for i in range(2)]
    fig = hist_figure(chans)
    boxes = _visible_labels(fig, fig.axes[0].xaxis)
    assert len(boxes) >= 3
    assert all(a.x1 < b.x0 for a, b in itertools.pairwise(boxes))


def _log_position(ax, value: float) -> float:
    lo, hi = ax.get_ylim()
    return (np.log(value) - np.log(lo)) / (np.log(hi) - np.log(lo))


def test_timeline_legend_and_hist_labels_have_room_above_the_data() -> None:
    from rtlab.report.plots import timeline_figure

    rng = np.random.default_rng(5)
    s = np.exp(rng.normal(np.log(20_000), 0.3, 60_000))
    s[13_500] = 16e6  # the running maximum jumps to the top early, where the legend is
    ch = channel_from_samples("cpu0", 0, s, 1000, 1_000_000_000)
    fig = timeline_figure([ch, ch])
    ax = fig.axes[0]
    assert _log_position(ax, ch.max_ns / 1000) < 0.85  # the legend band stays empty
    fig = hist_figure([ch])
    ax = fig.axes[0]
    _, values = hist_steps(ch.hist)
    assert _log_position(ax, max(values)) < 0.85  # the mode and max labels sit above


def test_timeline_ends_with_the_phase_and_draws_every_channel_to_the_end() -> None:
    from rtlab.report.plots import timeline_figure

    rng = np.random.default_rng(6)
    # 1.5 s phase, 1 s windows: two windows, the second one half full
    chans = [channel_from_samples(f"cpu{i}", i, rng.normal(20_000, 2_000, 1500).clip(1),
                                  750, 1_000_000_000) for i in range(2)]
    for c in chans:
        c.windows = [(0, int(c.windows[0][1]), 1000), (1, int(c.windows[1][1]), 500)]
    fig = timeline_figure(chans, end_ns=1_500_000_000)
    ax = fig.axes[0]
    assert ax.get_xlim()[1] == 1.5
    per_cpu = [ln for ln in ax.get_lines() if ln.get_label() in ("CPU0", "CPU1")]
    assert len(per_cpu) == 2 and all(ln.get_xdata()[-1] == 1.5 for ln in per_cpu)


def test_plot_of_several_phases_labels_phases_and_puts_them_end_to_end() -> None:
    from rtlab.report.plots import figure_for
    from tests.support.synth import synthetic_result

    r = synthetic_result(windows=20, phases=("idle", "load"))
    fig = figure_for("hist", r.phases, "t")
    titles = [ax.get_title(loc="left") for ax in fig.axes]
    assert any(t.startswith("idle CPU0") for t in titles)
    assert any(t.startswith("load CPU1") for t in titles)
    fig = figure_for("timeline", r.phases, "t")
    ax = fig.axes[0]
    assert ax.get_xlim() == (0.0, 40.0)  # 20 s idle, then 20 s load
    assert "load" in [t.get_text() for t in ax.texts]  # the start of the load phase


def test_many_cpu_overlay_legend_covers_neither_labels_nor_data() -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from tests.support.synth import synthetic_result

    r = synthetic_result(cpus=24, windows=10, spike_prob=1e-4)
    fig = hist_figure(r.phases[0].channels)
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    ax = fig.axes[0]
    legend = ax.get_legend().get_window_extent(renderer)
    labels = [t.get_window_extent(renderer) for t in ax.texts]
    assert len(labels) == 2  # mode and max
    assert not any(legend.overlaps(b) for b in labels)
    top = max(max(ln.get_ydata()) for ln in ax.get_lines() if ln.get_label().startswith("CPU"))
    assert ax.transData.transform((1, top))[1] < legend.y0
