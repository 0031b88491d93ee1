# SPDX-License-Identifier: MIT
"""Synthetic results for the report tests: real samples drawn with numpy."""

from __future__ import annotations

import numpy as np

from rtlab.results.histogram import LogLinHistogram, index_array
from rtlab.results.model import Channel, Phase, RunResult


def channel_from_samples(name: str, cpu: int | None, samples: np.ndarray, per_window: int,
                         window_ns: int, window_hist: bool = False) -> Channel:
    samples = samples.astype(np.int64)
    idx, counts = np.unique(index_array(samples), return_counts=True)
    hist = LogLinHistogram(7, {int(i): int(c) for i, c in zip(idx, counts, strict=True)})
    n = len(samples)
    nw = n // per_window
    wmax = samples[: nw * per_window].reshape(nw, per_window).max(axis=1)
    windows = [(i, int(m), per_window) for i, m in enumerate(wmax)]
    amax = int(np.argmax(samples))
    wh = None
    if window_hist:  # the engine's per-window sum and coarse histogram (sub_bits 2)
        from rtlab.results.windows import WindowHist

        wh = WindowHist.from_samples(2, samples[: nw * per_window].reshape(nw, per_window))
    return Channel(name=name, cpu=cpu, samples=n, min_ns=int(samples.min()),
                   max_ns=int(samples.max()), sum_ns=int(samples.sum()),
                   max_at_ns=amax * (window_ns // per_window), hist=hist, windows=windows,
                   window_ns=window_ns, window_hist=wh)


def synthetic_result(run_id: str = "aaaa0001", *, cpus: int = 2, windows: int = 120,
                     per_window: int = 1000, median_ns: float = 12_000, sigma: float = 0.25,
                     spike_prob: float = 0.0, spike_ns: float = 2_000_000, seed: int = 1,
                     release: str = "6.1.0-rt", phases: tuple[str, ...] = ("main",),
                     scenario: str = "quick", hostname: str = "board1",
                     window_hist: bool = False) -> RunResult:
    rng = np.random.default_rng(seed)
    window_ns = 1_000_000_000
    out_phases = []
    for ph in phases:
        chans = []
        for cpu in range(cpus):
            s = rng.lognormal(np.log(median_ns), sigma, windows * per_window)
            if spike_prob:
                hit = rng.random(len(s)) < spike_prob
                s[hit] = rng.uniform(0.5, 1.0, hit.sum()) * spike_ns
            chans.append(channel_from_samples(f"cpu{cpu}", cpu, s, per_window, window_ns,
                                              window_hist))
        out_phases.append(Phase(ph, chans, windows * window_ns))
    system = {"hostname": hostname, "release": release, "preempt": "rt",
              "cmdline": "quiet isolcpus=1", "cpu_model": "Synthetic CPU",
              "cpus_online": list(range(cpus)), "cpus_isolated": [1], "nohz_full": []}
    return RunResult(
        run_id=run_id, status="completed", probe="timer", phases=out_phases, rt_valid=True,
        scenario={"name": scenario, "hash": "ab" * 32},
        provenance={"engine": {"engine_version": "0.1.0", "argv": ["rtlab-probe", "timer"],
                               "system": system, "config": {"interval_ns": 1_000_000},
                               "effective": {"rt_valid": True}},
                    "host": {"hostname": hostname,
                             "start_wall": "2026-01-01T00:00:00.000+00:00"}},
    )
