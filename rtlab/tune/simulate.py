# SPDX-License-Identifier: MIT
"""A simulated bench for the tune's logic and its calibration (bench/tune_fwer.py,
tests/tune): each block is a run of simulated latencies (rtlab.analysis.calibrate)
whose tail each knob scales by a factor known by construction (1.0: inert), with a
slow drift across blocks that the interleaving must cancel."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from rtlab.analysis.calibrate import run_from_samples, simulate, simulated_shape
from rtlab.results.model import RunResult
from rtlab.tune.search import Interrupted


class SimBench:
    """Blocks of `seconds` of simulated latency of `kind`; `effects[knob]` multiplies
    every latency above the median (1.0: the knob does nothing); `pair_effects` the
    same for two knobs together (an interaction); `drift` a relative change per block
    common to every configuration."""

    shape_of = staticmethod(simulated_shape)

    def __init__(self, effects: Mapping[str, float], *, seconds: int = 20,
                 kind: str = "independent", seed: int = 0, drift: float = 0.0,
                 pair_effects: Mapping[frozenset[str], float] | None = None,
                 stop_after: int | None = None) -> None:
        self.effects = dict(effects)
        self.pair_effects = dict(pair_effects or {})
        self.seconds = seconds
        self.kind = kind
        self.seed = seed
        self.drift = drift
        self.blocks = 0
        self.stop_after = stop_after  # raise Interrupted before this block (tests)
        self._config: dict[str, tuple[str, ...]] = {}

    def _result(self, run_id: str, config: Sequence[str], index: int) -> RunResult:
        rng = np.random.default_rng([self.seed, index])
        x = simulate(self.kind, self.seconds, rng).astype(np.float64)
        factor = 1.0 + self.drift * index
        for k in config:
            factor_k = self.effects.get(k, 1.0)
            med = float(np.median(x))
            x = np.where(x > med, x * factor_k, x)
        for pair, f in self.pair_effects.items():
            if pair <= set(config):
                med = float(np.median(x))
                x = np.where(x > med, x * f, x)
        x = x * factor
        return run_from_samples(run_id, x.astype(np.int64), "sim")

    def measure(self, config: Sequence[str], label: str) -> tuple[str, RunResult]:
        if self.stop_after is not None and self.blocks >= self.stop_after:
            raise Interrupted()
        index = self.blocks
        self.blocks += 1
        run_id = f"sim-{self.seed}-{index}"
        self._config[run_id] = tuple(config)
        return run_id, self._result(run_id, config, index)

    def load(self, run_id: str) -> RunResult:
        index = int(run_id.rsplit("-", 1)[1])
        return self._result(run_id, self._config[run_id], index)
