# SPDX-License-Identifier: MIT
"""Measuring a tune's blocks through the runner's one run path (`run_job`).

Each block is one stored run of the tune's scenario, scaled to the block length, in
one configuration: its runtime knobs set as fields of the scenario's [shield] (the
runner applies and restores them, journaled), its boot knobs in effect (booted once
through the reboot interface when they differ from what runs now). The runs share
the tune's id as their comparison id and carry the configuration as their variant,
so `rtlab compare --by variant` shows any experiment again from the store. The tune
holds the target's owner lock for its whole length (`owner_held`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from rtlab.errors import RtlabError, SkippedError, UsageError
from rtlab.exitcodes import ExitCode
from rtlab.probes.registry import shape as probe_shape
from rtlab.results.model import RunResult
from rtlab.results.store import Store
from rtlab.results.validate import failed_validation
from rtlab.runner.control import RunControl
from rtlab.runner.job import RunJob, Watch, run_job
from rtlab.runner.prepare import RunRequest
from rtlab.scenario.model import Scenario, ShieldSpec
from rtlab.system.target_lock import TargetBusyError
from rtlab.tune import energy
from rtlab.tune import knobs as catalogue
from rtlab.tune.search import Interrupted

ATTEMPTS = 3  # a block whose result fails validation is measured again, this often

# Set by the tune's own SIGINT/SIGTERM handler (rtlab.cli.cmd_tune), which is in effect
# wherever a block's run does not handle signals itself (its set-up, the shield's
# apply and release, the store): a stop there may be turned into a failed block by the
# code it lands in, and a failed block is measured again; with this set, it never is.
STOP = threading.Event()


class RunnerBench:
    """Blocks measured on `target` (None: this machine)."""

    shape_of = staticmethod(probe_shape)

    def __init__(self, *, target: str | None, scenario: str, block_s: float,
                 store: str | None, tune_id: str, user: Sequence[int], system: Sequence[int],
                 base_shield: ShieldSpec | None, engine_dir: str | None = None,
                 boot: Callable[[dict[str, str | None]], None] | None = None,
                 on_event: Callable[[str], None] | None = None,
                 command_line: Sequence[str] = ()) -> None:
        self.target = target
        self.scenario = scenario
        self.block_s = block_s
        self.store = store
        self.tune_id = tune_id
        self.user, self.system = list(user), list(system)
        self.base_shield = base_shield
        self.engine_dir = engine_dir
        self.boot = boot  # boots the boot knobs' parameters (the reboot interface)
        self.on_event = on_event
        self.command_line = tuple(command_line)
        self.notes: dict[str, list[str]] = {}  # run id -> the run's notes
        self.last_energy: float | None = None  # J the last block used (powercap), if known
        self._powercap: bool | None = None  # None: not looked yet

    def _adjust(self, config: Sequence[str], label: str) -> Callable[[Scenario], Scenario]:
        def adjust(sc: Scenario) -> Scenario:
            shield = catalogue.runtime_shield(sc.shield, config, self.user, self.system)
            return replace(sc, shield=shield, variant=label)
        return adjust

    def measure(self, config: Sequence[str], label: str) -> tuple[str, RunResult]:
        if self.boot is not None:
            self.boot(catalogue.boot_params(config, self.user, self.system))
        why = ""
        self.last_energy = None
        for _attempt in range(ATTEMPTS):
            if STOP.is_set():
                raise Interrupted()
            before = self._energy()
            control = RunControl()
            job = RunJob(
                request=RunRequest(scenario=self.scenario, duration=f"{self.block_s:g}s"),
                targets=(self.target,) if self.target else (), store=self.store,
                engine_dir=self.engine_dir, adjust=self._adjust(config, label),
                owner_held=True, comparison=self.tune_id, control=control,
                command_line=self.command_line or None)
            try:
                result = run_job(job, Watch(on_event=None))
            except (UsageError, SkippedError, TargetBusyError):
                raise  # the same again would fail the same way
            except RtlabError as exc:  # e.g. an engine killed by the watchdog under load
                if exc.code == ExitCode.INTERRUPTED or control.signal is not None \
                        or STOP.is_set():
                    raise Interrupted() from None  # the user stopped it: never retried
                why = str(exc)
                if self.on_event is not None:
                    self.on_event(f"block of {label} failed ({why}): measuring it again")
                continue
            if result.interrupted or control.signal is not None or STOP.is_set():
                raise Interrupted()
            if not result.outcomes:
                raise RtlabError(f"the block of {label} stored no run")
            outcome = result.outcomes[0]
            run = outcome.result
            bad = failed_validation(run, f"the block of {label}", "when stored")
            if bad is None and outcome.exit_code in (ExitCode.OK, ExitCode.THRESHOLD):
                check_knobs(run, config)
                self.notes[run.run_id] = list(run.notes or [])
                if before:
                    self.last_energy = energy.joules(before, self._energy())
                return run.run_id, run
            why = bad or f"exit {int(outcome.exit_code)}"
            if self.on_event is not None:
                self.on_event(f"block of {label} not used ({why}): measuring it again")
        raise RtlabError(f"the blocks of {label} failed {ATTEMPTS} times ({why})")

    def _energy(self) -> energy.Counters:
        """The target's powercap counters (read only while the target has them)."""
        if self._powercap is False:
            return {}
        from rtlab.engine.board import open_target

        with open_target(self.target, self.engine_dir) as transport:
            got = energy.read(transport)
        self._powercap = bool(got)
        return got

    def load(self, run_id: str) -> RunResult:
        store = Store.open(self.store, create=False)
        try:
            return store.get(run_id)
        finally:
            store.close()


class KnobNotInEffect(RtlabError):
    """A block's runtime knob was skipped by the target (`skipped`: it lacks it) or read
    back not in effect: its blocks say nothing about the knob."""

    def __init__(self, message: str, *, skipped: bool) -> None:
        super().__init__(message)
        self.skipped = skipped


def shield_effect(run: RunResult) -> dict[str, Any]:
    """What the run's shield says it applied (requested vs in effect)."""
    shield = (run.provenance.get("host") or {}).get("shield") or {}
    return dict(shield.get("in_effect") or {})


def check_knobs(run: RunResult, config: Sequence[str]) -> None:
    """The configuration's runtime knobs that set [shield] knob fields were in effect
    in this run (the shield's read-back); KnobNotInEffect naming the first that was not."""
    knobs = (shield_effect(run).get("in_effect") or {}).get("knobs") or {}
    for name in config:
        for fld in catalogue.BY_NAME[name].shield:
            entry = knobs.get(fld)
            if not isinstance(entry, dict):
                continue
            if entry.get("skipped"):
                raise KnobNotInEffect(f"{name}: the target lacks it ({entry['skipped']})",
                                      skipped=True)
            if entry.get("ok") is False:
                raise KnobNotInEffect(f"{name}: {fld} not in effect (asked "
                                      f"{entry.get('requested')!r}, read back "
                                      f"{entry.get('in_effect')!r})", skipped=False)
