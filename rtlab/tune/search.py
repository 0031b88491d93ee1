# SPDX-License-Identifier: MIT
"""The tune's designed experiment (docs/tune.md, "How the tune decides"):

1. **Screen** every candidate knob against the baseline: interleaved blocks
   (rtlab.tune.design.sides), judged after each look, measured longer while a
   statistic is inconclusive and the budget allows (the first looks of every
   experiment still to come are reserved first).
2. **Combine** the knobs that help, best first: each is tested on top of the
   configuration built so far and kept only if it still helps there; a knob that did
   not help alone is re-tested on top of a kept partner (isolcpus with nohz_full).
   Where the verdict on top differs from the verdict alone, that is an interaction.
3. **Confirm** the final configuration against the baseline in fresh blocks.

Everything the tune did is its *state*, a JSON document saved after every block
(rtlab.tune.state): an interrupted tune resumes where it stopped, from the runs
already stored, and decides exactly as it would have without the interruption.
The measuring itself is behind `Bench` (rtlab.tune.bench: the runner on a target; a
simulation for tests and benchmarks).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from rtlab.errors import RtlabError
from rtlab.results.model import RunResult
from rtlab.results.shape import ShapeOf
from rtlab.tune import knobs as catalogue
from rtlab.tune.design import (
    CONFIRM_ALPHA,
    MAX_LOOKS,
    StatResult,
    judge,
    knob_verdict,
    screening_alpha,
    sides,
)


class Interrupted(Exception):
    """The user stopped the tune (Ctrl-C, SIGTERM): its state is saved."""


class Bench(Protocol):
    """Where blocks are measured."""

    shape_of: ShapeOf

    def measure(self, config: Sequence[str], label: str) -> tuple[str, RunResult]:
        """One block of the workload in this configuration (knob names): (run id, result).
        Raises Interrupted when stopped; RtlabError when the block failed."""

    def load(self, run_id: str) -> RunResult:
        """A block measured before (resuming)."""


@dataclass
class Progress:
    stage: str  # screen | combine | confirm | done
    experiment: str
    block: int  # blocks done in this experiment
    blocks: int  # blocks planned for its current look
    spent_s: float
    eta_s: float | None
    text: str


class Tuner:
    """Runs (or resumes) the experiment described by `state` (rtlab.tune.state.new)."""

    def __init__(self, state: dict[str, Any], bench: Bench, *,
                 save: Callable[[dict[str, Any]], None] = lambda s: None,
                 on_progress: Callable[[Progress], None] | None = None,
                 on_event: Callable[[str], None] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.s = state
        self.bench = bench
        self.save = save
        self.on_progress = on_progress
        self.on_event = on_event
        self.clock = clock
        self._runs: dict[str, RunResult] = {}

    # ---- budget ---------------------------------------------------------------------------
    @property
    def block_cost(self) -> float:
        """Seconds per block, measured (wall time with start-up), else the plan's guess."""
        done = [b for e in self.s["experiments"] for b in e["blocks"]]
        if done:
            return sum(b["seconds"] for b in done) / len(done)
        return float(self.s["plan"]["block_cost_s"])

    def _spent(self) -> float:
        return float(sum(b["seconds"] for e in self.s["experiments"] for b in e["blocks"]))

    def _reserved(self, after: dict[str, Any]) -> float:
        """Time the first looks still owed need: the screening experiments after this one
        and the confirmation."""
        pairs = self.s["plan"]["pairs"]
        names = [e["name"] for e in self.s["experiments"]]
        todo = [k for k in self.s["candidates"] if f"screen:{k}" not in names]
        blocks = 2 * pairs * len(todo)
        if after["purpose"] != "confirm":
            blocks += 2 * self.s["plan"]["confirm_pairs"]
        return blocks * self.block_cost

    def eta(self) -> float:
        """Seconds still needed for the plan at its first looks (more if inconclusive)."""
        pairs = self.s["plan"]["pairs"]
        left = 0
        names = {e["name"]: e for e in self.s["experiments"]}
        for k in self.s["candidates"]:
            e = names.get(f"screen:{k}")
            if e is None:
                left += 2 * pairs
            elif not e["done"]:
                left += max(0, 2 * pairs * 2 ** len(e["looks"]) - len(e["blocks"]))
        if "confirm" not in names or not names["confirm"]["done"]:
            done = len(names["confirm"]["blocks"]) if "confirm" in names else 0
            left += max(0, 2 * self.s["plan"]["confirm_pairs"] - done)
        return left * self.block_cost

    def _event(self, text: str) -> None:
        if self.on_event is not None:
            self.on_event(text)

    def _progress(self, e: dict[str, Any], target_blocks: int, text: str) -> None:
        if self.on_progress is not None:
            self.on_progress(Progress(self.s["stage"], e["name"], len(e["blocks"]),
                                      target_blocks, self._spent(), self.eta(), text))

    # ---- experiments ----------------------------------------------------------------------
    def _experiment(self, name: str, purpose: str, a: Sequence[str], b: Sequence[str],
                    alpha: float, pairs: int, knob: str | None = None) -> dict[str, Any]:
        for e in self.s["experiments"]:
            if e["name"] == name:
                return e
        e = {"name": name, "purpose": purpose, "knob": knob,
             "a": catalogue.order(a), "b": catalogue.order(b),
             "a_label": catalogue.label(a), "b_label": catalogue.label(b),
             "alpha": alpha, "pairs": pairs, "blocks": [], "looks": [], "done": False,
             "stopped": None, "verdict": None, "stats": None}
        self.s["experiments"].append(e)
        self.save(self.s)
        return e

    def _run(self, run_id: str) -> RunResult:
        if run_id not in self._runs:
            self._runs[run_id] = self.bench.load(run_id)
        return self._runs[run_id]

    def _look(self, e: dict[str, Any]) -> dict[str, StatResult]:
        a = [self._run(b["run_id"]) for b in e["blocks"] if b["side"] == "A"]
        b = [self._run(b["run_id"]) for b in e["blocks"] if b["side"] == "B"]
        return judge(a, b, self.s["stats"], e["alpha"], self.bench.shape_of)

    def run_experiment(self, e: dict[str, Any], max_looks: int = MAX_LOOKS) -> dict[str, Any]:
        """Measure and judge `e` until every statistic is decided, its looks are spent,
        or the budget is; resumable at any block."""
        while not e["done"]:
            look = len(e["looks"])
            target = 2 * e["pairs"] * 2 ** look
            while len(e["blocks"]) < target:
                if self._spent() + self.block_cost > self.s["budget_s"]:
                    return self._stop(e, "budget")
                (side,) = sides(len(e["blocks"]), 1)
                config = e["a"] if side == "A" else e["b"]
                lbl = e["a_label"] if side == "A" else e["b_label"]
                self._progress(e, target, f"{e['name']}: block {len(e['blocks']) + 1}/"
                               f"{target} ({lbl})")
                t0 = self.clock()
                try:
                    run_id, result = self.bench.measure(config, lbl)
                except RtlabError as exc:
                    if side == "A" and not e["a"]:
                        raise  # the baseline itself cannot be measured: nothing can be
                    return self._fail(e, exc)
                self._runs[run_id] = result
                block = {"side": side, "run_id": run_id, "seconds": round(self.clock() - t0, 3)}
                joules = getattr(self.bench, "last_energy", None)
                if joules is not None:
                    block["energy_j"] = round(joules, 3)
                e["blocks"].append(block)
                self.save(self.s)
            stats = self._look(e)
            e["looks"].append({"blocks": len(e["blocks"]),
                               "stats": {k: v.to_dict() for k, v in stats.items()}})
            e["stats"] = e["looks"][-1]["stats"]
            e["verdict"] = knob_verdict([v.verdict for v in stats.values()])
            undecided = [k for k, v in stats.items() if v.verdict == "inconclusive"]
            if not undecided:
                e["done"] = True
            elif len(e["looks"]) >= max_looks:
                self._stop(e, "looks")
            else:
                more = 2 * e["pairs"] * 2 ** len(e["looks"]) - len(e["blocks"])
                if self._spent() + (more * self.block_cost) + self._reserved(e) \
                        > self.s["budget_s"]:
                    self._stop(e, "budget")
                else:
                    self._event(f"{e['name']}: {', '.join(undecided)} inconclusive after "
                                f"{len(e['blocks'])} blocks: measuring longer")
            self.save(self.s)
        return e

    def _fail(self, e: dict[str, Any], exc: RtlabError) -> dict[str, Any]:
        """A configuration of `e` could not be measured (a knob that would not apply or
        is not in effect, a boot that did not come back): the knob failed, named with why;
        the tune goes on with the others."""
        e["done"] = True
        e["stopped"] = "error"
        e["error"] = str(exc)
        e["verdict"] = "skipped" if getattr(exc, "skipped", False) else "failed"
        self._event(f"{e['name']}: {e['verdict']}: {exc}")
        self.save(self.s)
        return e

    def _stop(self, e: dict[str, Any], why: str) -> dict[str, Any]:
        """Stop measuring `e` (budget or looks spent); a look at what it has when it had
        none yet (a smaller look is as valid: the looks' alpha is shared already)."""
        e["done"] = True
        e["stopped"] = why
        have = {b["side"] for b in e["blocks"]}
        if not e["looks"] and have == {"A", "B"} and len(e["looks"]) < MAX_LOOKS:
            stats = self._look(e)
            e["looks"].append({"blocks": len(e["blocks"]),
                               "stats": {k: v.to_dict() for k, v in stats.items()}})
            e["stats"] = e["looks"][-1]["stats"]
            e["verdict"] = knob_verdict([v.verdict for v in stats.values()])
        if e["verdict"] is None:
            e["verdict"] = "inconclusive"
        self.save(self.s)
        return e

    # ---- the tune -------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        s = self.s
        k = max(1, len(s["candidates"]))
        alpha = screening_alpha(k, len(s["stats"]))
        s["stage"] = "screen"
        for name in s["candidates"]:
            e = self._experiment(f"screen:{name}", "screen", [], [name], alpha,
                                 s["plan"]["pairs"], knob=name)
            if not e["done"]:
                self._event(f"screening {name} against the baseline")
            self.run_experiment(e)
        s["stage"] = "combine"
        self.save(s)
        current = self._combine(alpha)
        s["final"] = catalogue.order(current)
        s["stage"] = "confirm"
        self.save(s)
        if current:
            # inconclusive: once more, as long again (the two looks share the alpha)
            e = self._experiment("confirm", "confirm", [], current, CONFIRM_ALPHA / 2,
                                 s["plan"]["confirm_pairs"])
            self.run_experiment(e, max_looks=2)
        s["stage"] = "done"
        self.save(s)
        return s

    def _screen(self, name: str) -> dict[str, Any] | None:
        for e in self.s["experiments"]:
            if e["name"] == f"screen:{name}":
                return e
        return None

    def _effect(self, e: dict[str, Any]) -> float:
        """How much a knob helped (its primary statistic's ratio; lower is better)."""
        st = (e.get("stats") or {}).get(self.s["stats"][0]) or {}
        return float(st.get("ratio") or 1.0)

    def _combine(self, alpha: float) -> list[str]:
        s = self.s
        winners = [n for n in s["candidates"]
                   if (e := self._screen(n)) is not None and e["verdict"] == "helps"]
        winners.sort(key=lambda n: self._effect(self._screen(n)))  # type: ignore[arg-type]
        current: list[str] = []
        tried: set[str] = set()
        queue = list(winners)
        while queue:
            name = queue.pop(0)
            tried.add(name)
            if not current:
                current.append(name)
            else:
                e = self._experiment(f"combine:{name}", "combine", current, [*current, name],
                                     alpha, s["plan"]["pairs"], knob=name)
                self.run_experiment(e)
                if e["verdict"] == "helps":
                    current.append(name)
            if name not in current:
                continue
            # a partner that did not help alone may help on top of this one
            for other in catalogue.BY_NAME[name].partners:
                scr = self._screen(other)
                if other in tried or other in queue or scr is None or \
                        scr["verdict"] in ("helps", "hurts"):
                    continue
                tried.add(other)
                e = self._experiment(f"retest:{other}", "retest", current,
                                     [*current, other], alpha, s["plan"]["pairs"], knob=other)
                self.run_experiment(e)
                if e["verdict"] == "helps":
                    current.append(other)
        return current
