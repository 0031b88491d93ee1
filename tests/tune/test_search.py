# SPDX-License-Identifier: MIT
"""The tune's designed experiment on simulated blocks whose truth is known by
construction (rtlab.tune.simulate): a knob that lowers the tail helps, one that raises
it hurts, an inert one never helps; knobs that only help together are found on top of
each other; an interrupted tune resumes to exactly the state of an uninterrupted one;
the budget bounds the measuring."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from rtlab.tune import ledger as tledger
from rtlab.tune import state as tstate
from rtlab.tune.design import knob_verdict, screening_alpha, sides
from rtlab.tune.search import Interrupted, Tuner
from rtlab.tune.simulate import SimBench


def _state(candidates: list[str], *, budget: float = 1e9, pairs: int = 3,
           stats: tuple[str, ...] = ("p99", "max")) -> dict[str, Any]:
    return tstate.new(tune_id="tune-test", target=None, scenario="sim", stats=stats,
                      budget_s=budget, block_s=20, block_cost_s=20, pairs=pairs,
                      confirm_pairs=2 * pairs, candidates=candidates, skipped={},
                      proposed={}, not_tested=[], user=[1], system=[0], slo=None,
                      store=None, reboot=None, command_line=[])


def _exp(state: dict[str, Any], name: str) -> dict[str, Any]:
    return next(e for e in state["experiments"] if e["name"] == name)


def test_sides_are_abba() -> None:
    assert "".join(sides(0, 8)) == "ABBAABBA"
    assert sides(5, 3) == ["B", "B", "A"]


def test_alpha_is_shared_by_knobs_statistics_and_looks() -> None:
    assert screening_alpha(10, 2, 3) == pytest.approx(0.05 / 60)
    assert screening_alpha(1, 1, 1) == pytest.approx(0.05)


def test_knob_verdict_words() -> None:
    assert knob_verdict(["helps", "no effect"]) == "helps"
    assert knob_verdict(["helps", "hurts"]) == "trade-off"
    assert knob_verdict(["hurts", "inconclusive"]) == "hurts"
    assert knob_verdict(["no effect", "no effect"]) == "no effect"
    assert knob_verdict(["no effect", "inconclusive"]) == "inconclusive"


def test_known_effects_come_out_as_built() -> None:
    """Helps by 30 %, hurts by 30 %, inert: helps / hurts / never helps; the winner is
    recommended and confirmed; with a drift of 1 % per block that the ABBA order must
    cancel."""
    bench = SimBench({"cpuset-shield": 0.7, "watchdogs-off": 1.3}, seconds=20, seed=3,
                     drift=0.01)
    s = Tuner(_state(["cpuset-shield", "watchdogs-off", "timer-migration-off"]), bench).run()
    assert _exp(s, "screen:cpuset-shield")["verdict"] == "helps"
    assert _exp(s, "screen:watchdogs-off")["verdict"] == "hurts"
    assert _exp(s, "screen:timer-migration-off")["verdict"] in ("no effect", "inconclusive")
    assert s["final"] == ["cpuset-shield"]
    conf = _exp(s, "confirm")
    assert conf["verdict"] == "helps"
    ratio = conf["stats"]["p99"]["ratio"]
    lo, hi = conf["stats"]["p99"]["ratio_ci"]
    assert lo <= ratio <= hi and hi < 1.0
    led = tledger.build(s)
    assert led["recommended"]["knobs"] == ["cpuset-shield"]
    assert led["recommended"]["cpus_given_up"] == [1]
    text = "\n".join(tledger.text(led))
    assert "HELPS" in text and "HURTS" in text and "confirmed" in text


def test_inert_knobs_never_help() -> None:
    """Four inert knobs in several seeded tunes: no "helps" (the family-wise rate is
    measured at scale by bench/tune_fwer.py)."""
    for seed in range(4):
        bench = SimBench({}, seconds=10, seed=100 + seed, kind="ar1-0.9")
        s = Tuner(_state(["kthreads", "timer-migration-off", "stat-interval", "thp-never"],
                         pairs=2), bench).run()
        verdicts = [e["verdict"] for e in s["experiments"]]
        assert "helps" not in verdicts, verdicts
        assert s["final"] == []
        assert not any(e["name"] == "confirm" for e in s["experiments"])


def test_knobs_that_need_each_other_are_found_together() -> None:
    """nohz_full alone does nothing here and helps only with isolcpus (its partner):
    it is re-tested on top of isolcpus, kept, and the interaction is named."""
    bench = SimBench({"isolcpus": 0.75}, pair_effects={frozenset({"isolcpus", "nohz_full"}):
                                                        0.7}, seconds=20, seed=7)
    s = Tuner(_state(["isolcpus", "nohz_full"]), bench).run()
    assert _exp(s, "screen:isolcpus")["verdict"] == "helps"
    assert _exp(s, "screen:nohz_full")["verdict"] in ("no effect", "inconclusive")
    assert _exp(s, "retest:nohz_full")["verdict"] == "helps"
    assert s["final"] == ["isolcpus", "nohz_full"]
    led = tledger.build(s)
    assert any("nohz_full" in i and "needs them" in i for i in led["interactions"])


def test_a_redundant_winner_is_not_kept() -> None:
    """Two knobs that each remove the same cause: the second adds nothing on top."""
    both = frozenset({"cpuset-shield", "kthreads"})
    bench = SimBench({"cpuset-shield": 0.7, "kthreads": 0.75},
                     pair_effects={both: 1 / 0.75}, seconds=20, seed=11)
    s = Tuner(_state(["cpuset-shield", "kthreads"]), bench).run()
    assert _exp(s, "screen:kthreads")["verdict"] == "helps"
    assert _exp(s, "combine:kthreads")["verdict"] in ("no effect", "inconclusive")
    assert s["final"] == ["cpuset-shield"]
    assert any("redundant" in i for i in tledger.build(s)["interactions"])


def test_interrupted_tune_resumes_to_the_same_state() -> None:
    """Stopped before block 9 (state saved after every block), resumed from the saved
    state with a fresh tuner: the result equals the uninterrupted tune's."""
    effects = {"cpuset-shield": 0.7}
    whole = Tuner(_state(["cpuset-shield", "stat-interval"]), SimBench(effects, seed=5)).run()
    saved: list[dict[str, Any]] = []
    bench = SimBench(effects, seed=5, stop_after=9)
    with pytest.raises(Interrupted):
        Tuner(_state(["cpuset-shield", "stat-interval"]), bench,
              save=lambda st: saved.append(copy.deepcopy(st))).run()
    state = saved[-1]
    assert sum(len(e["blocks"]) for e in state["experiments"]) == 9
    bench.stop_after = None
    resumed = Tuner(state, bench).run()
    strip = ("created",)
    for key in strip:
        resumed.pop(key, None)
        whole.pop(key, None)
    for e in (*resumed["experiments"], *whole["experiments"]):
        for b in e["blocks"]:
            b["seconds"] = 0
    assert resumed == whole


def test_the_budget_bounds_the_tune() -> None:
    """A budget of 10 blocks: no more is measured, the rest is inconclusive (budget)."""
    bench = SimBench({"cpuset-shield": 0.7}, seed=2)
    s = Tuner(_state(["cpuset-shield", "stat-interval", "thp-never"], budget=200.0),
              bench, clock=lambda: bench.blocks * 20.0).run()  # 20 s per block
    blocks = sum(len(e["blocks"]) for e in s["experiments"])
    assert blocks <= 10
    assert any(e["stopped"] == "budget" for e in s["experiments"])
