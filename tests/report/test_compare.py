# SPDX-License-Identifier: MIT
from __future__ import annotations

from synth import synthetic_result

from rtlab.analysis.compare import build_configs, compare_configs


def _changes(a, b) -> dict:
    pc = compare_configs(build_configs([a, b]))[0]
    return {c.what: c for c in pc.changes}


def test_same_distribution_is_not_significant() -> None:
    a = synthetic_result("aaaa0001", seed=1, windows=100)
    b = synthetic_result("aaaa0002", seed=2, windows=100)
    ch = _changes(a, b)
    assert not any(c.significant for c in ch.values())
    assert "not significant" in ch["p99"].describe()


def test_worse_tail_is_significant_and_max_uses_windows() -> None:
    a = synthetic_result("aaaa0001", seed=1, windows=100)
    b = synthetic_result("aaaa0002", seed=2, windows=100, median_ns=14_000)
    ch = _changes(a, b)
    assert ch["p99"].significant and ch["p99"].regression
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
    configs = build_configs(runs, "kernel")
    assert [c.label for c in configs] == ["6.1", "6.6"]
    assert configs[0].channel.samples == 2 * runs[0].merged().samples


def test_overlapping_runs_are_not_significant() -> None:
    # two runs per configuration; B's runs straddle A's, so no claim about the configuration
    a = [synthetic_result(f"aaaa000{i}", seed=i, windows=30, release="A", median_ns=m)
         for i, m in ((1, 12_000), (2, 16_000))]
    b = [synthetic_result(f"bbbb000{i}", seed=10 + i, windows=30, release="B", median_ns=m)
         for i, m in ((1, 11_000), (2, 17_000))]
    pc = compare_configs(build_configs([*a, *b], "kernel"))[0]
    p99 = next(c for c in pc.changes if c.what == "p99")
    assert not p99.significant and "overlap" in p99.note


def test_longer_run_with_better_windows_is_not_a_max_regression() -> None:
    # B runs 5x longer with a lower body: its overall max is higher only because it saw
    # more samples; its window maxima are lower, so the answer is "better", never "worse"
    a = synthetic_result("aaaa0001", seed=1, windows=60, median_ns=14_000, sigma=0.3)
    b = synthetic_result("aaaa0002", seed=2, windows=300, median_ns=12_000, sigma=0.3,
                         spike_prob=2e-6, spike_ns=3_000_000)
    assert b.merged().max_ns > 10 * a.merged().max_ns
    mx = _changes(a, b)["max (median window max)"]
    assert mx.direction < 0 and not mx.regression
    assert mx.b_ns < mx.a_ns  # the median window maxima, not the overall maxima
    assert "better" in mx.describe() and "not comparable directly" in mx.note


def test_phases_are_not_merged_window_by_window() -> None:
    # two phases of 30 windows: 60 window maxima phase after phase, not 30 maxima of both
    r = synthetic_result("aaaa0001", windows=30, phases=("idle", "load"))
    (cfg,) = build_configs([r])
    assert len(cfg.window_maxima) == 60


def test_imported_tail_beyond_the_peer_range_is_an_interval() -> None:
    from pathlib import Path

    from rtlab.results.importers import import_file

    data = Path(__file__).resolve().parent / "data"
    base = synthetic_result("aaaa0001", windows=10, median_ns=12_000)
    # cyclictest -h 400: 4 of ~6000 samples beyond 400 µs; p99 and p99.9 are exact
    ct = import_file(data / "cyclictest.json", "cyclictest-json", "cccc0001")
    cfg_a, cfg_b = build_configs([base, ct])
    assert cfg_b.censored == 4 and cfg_b.censored_above_ns == 400_000
    exact = {c.what: c for c in compare_configs([cfg_a, cfg_b])[0].changes}
    assert exact["p99.9"].b_lo is None and "%" in exact["p99.9"].describe()
    # cyclictest -N -h 300: every sample beyond 300 ns, so every percentile is an interval
    ns = import_file(data / "cyclictest_nsecs.json", "cyclictest-json", "cccc0002")
    cfg_a, cfg_c = build_configs([base, ns])
    # known: every value is >= the min (7.6 µs), which is more than the 300-ns range says
    lo = cfg_c.channel.min_ns
    assert cfg_c.censored == cfg_c.channel.samples and cfg_c.censored_above_ns == lo
    for ch in compare_configs([cfg_a, cfg_c])[0].changes[:2]:  # p99, p99.9
        assert ch.b_lo == lo and "interval" in ch.note
        assert not ch.significant  # [7.6 µs, 5.2 ms] contains the baseline's value
        assert "%" not in ch.describe().split(";")[0] and "–" in ch.describe()


def test_note_names_the_configuration_with_one_run() -> None:
    a = [synthetic_result(f"aaaa000{i}", seed=i, windows=30, release="A") for i in (1, 2)]
    b = synthetic_result("bbbb0001", seed=9, windows=30, release="B", median_ns=20_000)
    pc = compare_configs(build_configs([*a, b], "kernel"))[0]
    p99 = next(c for c in pc.changes if c.what == "p99")
    assert p99.significant and "one run of B" in p99.note


def test_unsupported_percentile_stays_na_even_when_censored() -> None:
    from pathlib import Path

    from rtlab.report.format import bounded_us
    from rtlab.results.importers import import_file

    data = Path(__file__).resolve().parent / "data"
    (cfg,) = build_configs([import_file(data / "cyclictest_nsecs.json", "cyclictest-json",
                                        "cccc0003")])
    assert cfg.value(99.99) is None  # ~6000 samples cannot support p99.99
    assert bounded_us(cfg.value(99.99), cfg.lower_bound(99.99)) == "n/a"
    assert bounded_us(cfg.value(99.0), cfg.lower_bound(99.0)).startswith("≥")
