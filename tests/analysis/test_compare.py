# SPDX-License-Identifier: MIT
from __future__ import annotations

import numpy as np
import pytest

from rtlab.analysis.channel_select import ChannelSelection, select_channels
from rtlab.analysis.compare import compare_configs
from rtlab.analysis.configs import build_configs, side_by_side
from rtlab.errors import UsageError
from rtlab.probes.registry import shape as probe_shape
from rtlab.results.model import RunResult
from tests.support.paths import DATA
from tests.support.synth import channel_from_samples, synthetic_result


def _changes(a, b) -> dict:
    pc = compare_configs(build_configs([a, b], shape_of=probe_shape))[0]
    return {c.what: c for c in pc.changes}


def test_same_distribution_is_not_significant() -> None:
    a = synthetic_result("aaaa0001", seed=1, windows=100)
    b = synthetic_result("aaaa0002", seed=2, windows=100)
    ch = _changes(a, b)
    assert not any(c.significant for c in ch.values())
    # not significant: "no change" or "cannot tell", never mistaken for one another
    assert ch["p99"].verdict in ("no change", "cannot tell")
    assert f"({ch['p99'].verdict}:" in ch["p99"].describe()


def test_worse_tail_is_significant_and_max_uses_windows() -> None:
    a = synthetic_result("aaaa0001", seed=1, windows=100, window_hist=True)
    b = synthetic_result("aaaa0002", seed=2, windows=100, median_ns=14_000, window_hist=True)
    ch = _changes(a, b)
    assert ch["p99"].significant and ch["p99"].regression
    assert ch["p99"].ci_lo > 1 and ch["p99"].method == "window-hist"
    assert ch["median"].regression and ch["mean"].regression  # the body moved too
    mx = ch["max (median window max)"]
    assert mx.p_value is not None and "window maxima" in mx.note and mx.regression


def test_max_of_runs_without_windows_is_not_compared() -> None:
    a = synthetic_result("aaaa0001", windows=20)
    b = synthetic_result("aaaa0002", windows=20, median_ns=30_000)
    for r in (a, b):
        for _, c in r.channels():
            c.windows = []
    ch = _changes(a, b)
    assert not ch["max"].significant and "no significance test" in ch["max"].note
    # of different lengths: not even shown as a change
    c = synthetic_result("aaaa0003", windows=60, median_ns=30_000)
    for _, x in c.channels():
        x.windows = []
    mx = _changes(a, c)["max"]
    assert mx.ratio is None and "not comparable directly" in mx.note
    assert "n/a" in mx.describe() and "%" not in mx.describe()


def test_group_by_kernel_merges_runs() -> None:
    runs = [synthetic_result(f"aaaa000{i}", seed=i, windows=10, release=rel)
            for i, rel in enumerate(["6.1", "6.1", "6.6"])]
    configs = build_configs(runs, "kernel", shape_of=probe_shape)
    assert [c.label for c in configs] == ["6.1", "6.6"]
    assert configs[0].channel.samples == 2 * runs[0].merged(probe_shape(runs[0].probe)).samples


def test_overlapping_runs_are_not_significant() -> None:
    # two runs per configuration; B's runs straddle A's, so no claim about the configuration
    a = [synthetic_result(f"aaaa000{i}", seed=i, windows=30, release="A", median_ns=m)
         for i, m in ((1, 12_000), (2, 16_000))]
    b = [synthetic_result(f"bbbb000{i}", seed=10 + i, windows=30, release="B", median_ns=m)
         for i, m in ((1, 11_000), (2, 17_000))]
    pc = compare_configs(build_configs([*a, *b], "kernel", shape_of=probe_shape))[0]
    p99 = next(c for c in pc.changes if c.what == "p99")
    assert not p99.significant and "overlap" in p99.note


def test_longer_run_with_better_windows_is_not_a_max_regression() -> None:
    # B runs 5x longer with a lower body: its overall max is higher only because it saw
    # more samples; its window maxima are lower, so the answer is "better", never "worse"
    a = synthetic_result("aaaa0001", seed=1, windows=60, median_ns=14_000, sigma=0.3)
    b = synthetic_result("aaaa0002", seed=2, windows=300, median_ns=12_000, sigma=0.3,
                         spike_prob=2e-6, spike_ns=3_000_000)
    assert b.merged(probe_shape(b.probe)).max_ns > 10 * a.merged(probe_shape(a.probe)).max_ns
    mx = _changes(a, b)["max (median window max)"]
    assert mx.direction < 0 and not mx.regression
    assert mx.b_ns < mx.a_ns  # the median window maxima, not the overall maxima
    assert "better" in mx.describe() and "not comparable directly" in mx.note


def test_phases_are_not_merged_window_by_window() -> None:
    # two phases of 30 windows: 60 window maxima phase after phase, not 30 maxima of both
    r = synthetic_result("aaaa0001", windows=30, phases=("idle", "load"))
    (cfg,) = build_configs([r], shape_of=probe_shape)
    assert len(cfg.window_maxima) == 60


def test_imported_tail_beyond_the_peer_range_is_an_interval() -> None:

    from rtlab.results.importers import import_file

    data = DATA
    base = synthetic_result("aaaa0001", windows=10, median_ns=12_000)
    # cyclictest -h 400: 4 of ~6000 samples beyond 400 µs; p99 and p99.9 are exact
    ct = import_file(data / "cyclictest.json", "cyclictest-json", "cccc0001")
    cfg_a, cfg_b = build_configs([base, ct], shape_of=probe_shape)
    assert cfg_b.censored == 4 and cfg_b.censored_above_ns == 400_000
    exact = {c.what: c for c in compare_configs([cfg_a, cfg_b])[0].changes}
    assert exact["p99.9"].b_lo is None and "%" in exact["p99.9"].describe()
    # cyclictest -N -h 300: every sample beyond 300 ns, so every percentile is an interval
    ns = import_file(data / "cyclictest_nsecs.json", "cyclictest-json", "cccc0002")
    cfg_a, cfg_c = build_configs([base, ns], shape_of=probe_shape)
    # known: every value is >= the min (7.6 µs), which is more than the 300-ns range says
    lo = cfg_c.channel.min_ns
    assert cfg_c.censored == cfg_c.channel.samples and cfg_c.censored_above_ns == lo
    for ch in compare_configs([cfg_a, cfg_c])[0].changes[2:4]:  # p99, p99.9
        assert ch.b_lo == lo and "interval" in ch.note
        assert not ch.significant  # [7.6 µs, 5.2 ms] contains the baseline's value
        assert "%" not in ch.describe().split(";")[0] and "–" in ch.describe()


def test_note_names_the_configuration_with_one_run() -> None:
    a = [synthetic_result(f"aaaa000{i}", seed=i, windows=30, release="A", window_hist=True)
         for i in (1, 2)]
    b = synthetic_result("bbbb0001", seed=9, windows=30, release="B", median_ns=20_000,
                         window_hist=True)
    pc = compare_configs(build_configs([*a, b], "kernel", shape_of=probe_shape))[0]
    p99 = next(c for c in pc.changes if c.what == "p99")
    assert p99.significant and "one run of B" in p99.note


def test_unsupported_percentile_stays_na_even_when_censored() -> None:

    from rtlab.results.importers import import_file
    from rtlab.textfmt import bounded_us

    data = DATA
    (cfg,) = build_configs([import_file(data / "cyclictest_nsecs.json", "cyclictest-json",
                                        "cccc0003")], shape_of=probe_shape)
    assert cfg.value(99.99) is None  # ~6000 samples cannot support p99.99
    assert bounded_us(cfg.value(99.99), cfg.lower_bound(99.99)) == "n/a"
    assert bounded_us(cfg.value(99.0), cfg.lower_bound(99.0)).startswith("≥")


# --- channel selection (--cpus / --channel) ------------------------------------------------


def _busy_cpu0(run_id: str, seed: int, median_ns: float) -> RunResult:
    """An MBDA-like step: CPU 0 is the housekeeping CPU (its latency `median_ns`), CPU 1
    the shielded one, the same in every step (12 µs)."""
    quiet = synthetic_result(run_id, seed=seed, windows=60, window_hist=True)
    busy = synthetic_result(run_id, seed=seed + 100, windows=60, median_ns=median_ns,
                            window_hist=True)
    quiet.phases[0].channels[0] = busy.phases[0].channels[0]
    return quiet


def test_cpus_selection_applies_to_rows_tails_and_window_maxima() -> None:
    a, b = _busy_cpu0("aaaa0001", 1, 12_000), _busy_cpu0("aaaa0002", 2, 40_000)
    merged = _changes(a, b)  # CPU0 and CPU1 in one row: B looks worse
    assert merged["p99"].regression and merged["max (median window max)"].regression
    one = ChannelSelection(cpus=frozenset({1}))
    sa, sb = select_channels([a, b], one)
    cfg_a, cfg_b = build_configs([sa, sb], shape_of=probe_shape)
    assert cfg_a.channel.samples == a.phases[0].channels[1].samples
    assert cfg_b.channel.max_ns == b.phases[0].channels[1].max_ns
    assert list(cfg_b.window_maxima) == [m for _, m, _ in b.phases[0].channels[1].windows]
    changes = {c.what: c for c in compare_configs([cfg_a, cfg_b])[0].changes}
    assert not any(c.significant for c in changes.values())  # CPU 1 did not change
    # the verdict's headline
    assert sb.merged(probe_shape(sb.probe)).max_ns == b.phases[0].channels[1].max_ns
    # the runs themselves are untouched; the copies say what was selected
    assert [c.name for c in b.phases[0].channels] == ["cpu0", "cpu1"] and not b.notes
    assert sb.notes == ["channels selected with --cpus 1: cpu1 (not shown: cpu0)"]


def test_channel_patterns_and_cpus_both_narrow() -> None:
    r = synthetic_result("aaaa0001", cpus=4, windows=10)
    for ch in r.phases[0].channels[:2]:
        ch.name = f"irq@{ch.name}"
    for ch in r.phases[0].channels[2:]:
        ch.name = f"thread@{ch.name}"  # irq@cpu0, irq@cpu1, thread@cpu2, thread@cpu3
        ch.cpu = None  # the CPU is read from the name then

    def names(sel: ChannelSelection) -> list[str]:
        (out,) = select_channels([r], sel)
        return [c.name for _, c in out.channels()]

    assert names(ChannelSelection(patterns=("thread@cpu*",))) == ["thread@cpu2", "thread@cpu3"]
    assert names(ChannelSelection(patterns=("irq@cpu0", "thread@cpu3"))) == [
        "irq@cpu0", "thread@cpu3"]
    assert names(ChannelSelection(frozenset({1, 3}))) == ["irq@cpu1", "thread@cpu3"]
    assert names(ChannelSelection(frozenset({1, 3}), ("thread@*",))) == ["thread@cpu3"]


def test_selection_matching_nothing_names_the_run_and_its_channels() -> None:
    r = synthetic_result("aaaa0001", cpus=6, windows=10)
    r.phases[0].channels.append(channel_from_samples("rtt", None, np.full(10, 5000), 5,
                                                     1_000_000_000))
    with pytest.raises(UsageError) as info:
        select_channels([synthetic_result("aaaa0002", cpus=8, windows=10), r],
                        ChannelSelection(frozenset({7}), ("cpu*",)))
    assert info.value.one_line() == ("run aaaa0001: no channel matches --cpus 7 --channel "
                                     "cpu*; its channels: cpu0-5, rtt")


def test_phases_without_a_selected_channel_are_left_out() -> None:
    r = synthetic_result("aaaa0001", windows=10, phases=("idle", "load"))
    r.phases[1].channels = [r.phases[1].channels[0]]  # the load phase measured CPU 0 only
    r.phases[0].spikes = [{"cpu": 0, "latency_ns": 90_000}, {"cpu": 1, "latency_ns": 80_000}]
    (sel,) = select_channels([r], ChannelSelection(frozenset({1})))
    assert [p.name for p in sel.phases] == ["idle"]
    assert sel.notes[-1].endswith("; phase without them: load")
    assert sel.phases[0].spikes == [{"cpu": 1, "latency_ns": 80_000}]  # CPU 1's only


def test_side_by_side_by_host_shows_the_selected_cpus_only() -> None:
    runs = [synthetic_result(f"aaaa000{i}", seed=i, windows=10, cpus=4, hostname=h)
            for i, h in ((1, "a53"), (2, "a9"))]
    configs = build_configs(select_channels(runs, ChannelSelection(frozenset({1, 2}))), "host",
                            shape_of=probe_shape)
    assert [c.label for c in configs] == ["a53", "a9"]
    assert [name for name, _ in side_by_side(configs)] == ["cpu1", "cpu2"]


def test_a_problem_in_a_channel_left_out_still_invalidates_the_run() -> None:
    r = synthetic_result("aaaa0001", windows=10)
    r.phases[0].channels[0].samples += 5  # CPU 0's count disagrees with its histogram
    (sel,) = select_channels([r], ChannelSelection(frozenset({1})))
    assert sel.status == "invalid" and "failed validation" in sel.notes[-1]
    assert r.status == "completed"


# --- dependence-aware intervals ------------------------------------------------------------


def test_window_hist_round_trips_and_is_parsed_from_the_engine() -> None:
    import json

    from rtlab.engine.jsonl import StreamCollector
    from rtlab.results.model import Channel

    r = synthetic_result("aaaa0001", windows=5, window_hist=True)
    ch = r.phases[0].channels[0]
    assert ch.window_hist is not None and list(ch.window_hist.samples()) == [1000] * 5
    for packed in (False, True):
        assert Channel.from_dict(json.loads(json.dumps(ch.to_dict(packed)))).window_hist \
            == ch.window_hist
    old = synthetic_result("aaaa0002", windows=5).phases[0].channels[0]
    assert "window_hist" not in old.to_dict() and Channel.from_dict(old.to_dict()).window_hist \
        is None
    # the engine's record: windows and their per-window histograms side by side
    raw = {"name": "cpu0", "cpu": 0, "tid": 1, "samples": 3, "missed": 0, "negative": 0,
           "min_ns": 5, "max_ns": 30, "sum_ns": 45, "max_at_ns": 10,
           "hist": {"layout": "loglin", "sub_bits": 7, "buckets": [[5, 1], [10, 1], [30, 1]]},
           "windows": [[0, 10, 2], [1, 30, 1]],
           "window_hist": {"sub_bits": 2, "windows": [[0, 15, [[5, 1], [9, 1]]],
                                                       [1, 30, [[13, 1]]]]},
           "windows_lost": 0, "ring_lost": 0}
    sc = StreamCollector()
    sc.feed(json.dumps({"type": "header", "schema": 1, "engine_version": "0.1.0",
                        "probe": "timer", "config": {"window_ns": 1_000_000_000}}) + "\n")
    sc.feed(json.dumps({"type": "result", "schema": 1, "status": "completed",
                        "elapsed_ns": 2_000_000_000, "channels": [raw]}) + "\n")
    (got,) = sc.channels()
    assert list(got.window_hist.sum_ns) == [15, 30] and list(got.window_hist.samples()) == [2, 1]


def test_runs_without_window_histograms_are_compared_conservatively() -> None:
    a = synthetic_result("aaaa0001", seed=1, windows=100)
    b = synthetic_result("aaaa0002", seed=2, windows=100, median_ns=20_000)
    ch = _changes(a, b)
    p99 = ch["p99"]
    assert p99.method == "window-max" and "one observation" in p99.note
    assert ch["mean"].ci_lo is None and "no per-window sums" in ch["mean"].note
    # a big change is still found, a small one is "inconclusive" with how much more data
    assert ch["median"].regression
    c = synthetic_result("aaaa0003", seed=3, windows=100, median_ns=12_500)
    small = _changes(a, c)["p99.9"]
    assert not small.significant and small.needs and "longer" in small.describe()


def test_aa_of_correlated_runs_is_not_significant() -> None:
    """The issue's reproduction: two 60-s runs of the same AR(1) process (phi 0.999)."""
    from rtlab.analysis.calibrate import run_from_samples, simulate

    rng = np.random.default_rng(5)
    runs = [run_from_samples(f"aaaa000{i}", simulate("ar1-0.999", 60, rng), "x")
            for i in (1, 2)]
    ch = _changes(*runs)
    assert not any(c.significant for c in ch.values())
    assert all(c.verdict in ("no change", "cannot tell") for c in ch.values())


def test_too_few_window_maxima_says_so_and_how_many() -> None:
    from rtlab.analysis.compare import compare_configs
    from rtlab.analysis.configs import build_configs
    from tests.support.synth import synthetic_result

    runs = [synthetic_result(f"aaaa000{i}", seed=i, windows=8, per_window=200)
            for i in (1, 2)]
    (pc,) = compare_configs(build_configs(runs, "run", shape_of=probe_shape))
    (mx,) = [c for c in pc.changes if c.what == "max"]
    assert mx.note is not None and mx.note.startswith(
        "too few window maxima (8 and 8; the test needs 10 each: measure longer)"), mx.note
