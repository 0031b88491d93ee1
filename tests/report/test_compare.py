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
    assert ch["max"].p_value is not None and "window maxima" in ch["max"].note


def test_max_of_runs_without_windows_is_not_compared() -> None:
    a = synthetic_result("aaaa0001", windows=20)
    b = synthetic_result("aaaa0002", windows=20, median_ns=30_000)
    for r in (a, b):
        for _, c in r.channels():
            c.windows = []
    ch = _changes(a, b)
    assert not ch["max"].significant and "not comparable" in ch["max"].note


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
