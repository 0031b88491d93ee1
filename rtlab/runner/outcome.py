# SPDX-License-Identifier: MIT
"""The outcome rules of a run: what happened -> status -> exit code, and the one
ranking of exit codes that every caller (one run, several variants, several boards)
uses to say the worst.

| what happened                                  | status    | partial | exit |
|------------------------------------------------|-----------|---------|------|
| engine result `completed`, exit 0              | completed | no      | 0    |
| engine result `threshold`, exit 3              | threshold | no      | 3    |
| SIGINT/SIGTERM to rtlab (forwarded)            | partial   | yes     | 130  |
| engine crashed / killed / silent (watchdog)    | partial   | yes     | 1    |
| engine result `error`                          | failed    | -       | 1    |
| completed, but nothing measured (0 samples)    | failed    | no      | 1    |
| numbers contradict each other (results.validate) | invalid | yes     | 1 (130 if interrupted) |
| engine exit 4 (privilege/feature missing)      | not stored: SkippedError, exit 4 |
| engine exit 2 (usage), or nothing measured     | not stored: error                |

Over phases: the run's status is the worst phase status (invalid > failed > partial >
threshold > completed); a phase that does not complete ends the run (later
phases are not started, the result is partial). A load that died early is a
note in the result and makes the exit code 1 (the conditions asked for were
not met), unless a worse code applies.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass
from typing import Any

from rtlab.engine.jsonl import log_notes
from rtlab.engine.session import SessionOutcome
from rtlab.errors import RtlabError, SkippedError, UsageError
from rtlab.exitcodes import ExitCode
from rtlab.probes.extras import probe_notes
from rtlab.probes.registry import shape as probe_shape
from rtlab.results.model import Phase as ResultPhase
from rtlab.results.model import RunResult
from rtlab.results.validate import nothing_measured, problems

STATUS_RANK = {"completed": 0, "threshold": 1, "partial": 2, "failed": 3, "invalid": 4}
# ok < threshold < error < skipped, usage and any other code < interrupted: an
# interrupted run says so whatever else happened (its partial result is stored)
_EXIT_RANK = {ExitCode.OK: 0, ExitCode.THRESHOLD: 1, ExitCode.ERROR: 2,
              ExitCode.INTERRUPTED: 4}


def worst_exit(*codes: ExitCode) -> ExitCode:
    """The exit code that says the most: ok < threshold < error < skipped or usage <
    interrupted."""
    return max(codes, key=lambda c: _EXIT_RANK.get(c, 3))


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


def classify(
    outcome: SessionOutcome, run_id: str, host: dict[str, Any], scenario: dict[str, Any],
    phase: str = "main",
) -> tuple[RunResult, ExitCode]:
    """Turn what happened into a status and an exit code (table in the module doc)."""
    col = outcome.collector
    code = outcome.exit_code
    engine_status = col.result.get("status") if col.result else None
    notes = list(outcome.notes)
    interrupted = outcome.stop_signal is not None

    if code == ExitCode.SKIPPED and col.state is None:
        raise SkippedError(outcome.stderr_line() or "the engine skipped the run (exit 4)")
    if code == ExitCode.USAGE and col.state is None:
        raise UsageError(f"the engine refused its arguments: {outcome.stderr_line() or 'exit 2'}")
    if col.state is None:
        if interrupted:
            raise RtlabError("interrupted before anything was measured",
                             code=ExitCode.INTERRUPTED)
        why = outcome.stderr_line() or (
            f"killed by {_signal_name(code)}" if code is not None and code < 0 else f"exit {code}")
        raise RtlabError(f"the engine failed before measuring anything: {why}",
                         hint=notes[0] if notes else None)

    if code is not None and code < 0 and not outcome.killed:
        notes.append(f"engine killed by {_signal_name(code)}")
    elif code == 255 and host.get("transport") == "ssh":  # ssh's own failure
        target = (host.get("target") or {}).get("target", "the board")
        notes.append(f"the SSH connection to {target} was lost"
                     + (f" ({outcome.stderr_line()})" if outcome.stderr_line() else "")
                     + f"; the board kept the whole run: `rtlab results fetch --target "
                     f"{target}`")
    elif code not in (None, 0, 3, 130) and engine_status != "error":
        line = outcome.stderr_line()
        notes.append(f"engine exited with code {code}" + (f": {line}" if line else ""))
    notes += log_notes(col.stream.logs)

    if engine_status == "completed" and not interrupted:
        status, partial, exit_code = "completed", False, ExitCode.OK
    elif engine_status == "threshold":
        status, partial, exit_code = "threshold", False, ExitCode.THRESHOLD
    elif engine_status == "error":
        err = col.result.get("error") if col.result else None
        notes.append(f"engine error: {err or outcome.stderr_line() or 'unknown'}")
        status, partial, exit_code = "failed", True, ExitCode.ERROR
    else:
        status, partial = "partial", True
        if interrupted or engine_status == "interrupted":
            exit_code = ExitCode.INTERRUPTED
            sig = outcome.stop_signal or signal.SIGINT
            notes.append(f"interrupted by {signal.Signals(sig).name}")
        else:
            exit_code = ExitCode.ERROR
    result = col.to_result(run_id, status=status, partial=partial, host=host,
                           scenario=scenario, phase=phase, extra_notes=notes)
    result.stream.engine_exit_code = code
    return result, judge(result, exit_code).apply(result)


@dataclass(frozen=True)
class Verdict:
    """What the checks of a result's own numbers say of it: the status it must take
    (None: keep its own), whether it is partial, the notes it gains, its exit code."""

    status: str | None
    partial: bool | None
    notes: tuple[str, ...]
    exit_code: ExitCode

    def apply(self, result: RunResult) -> ExitCode:
        """`result` as the verdict says; its exit code."""
        if self.status is not None:
            result.status = self.status
        if self.partial is not None:
            result.partial = self.partial
        result.notes += list(self.notes)
        return self.exit_code


def judge(result: RunResult, exit_code: ExitCode) -> Verdict:
    """A result whose numbers contradict each other is `invalid`, one that measured
    nothing `failed`: neither is ever `completed`, both make the exit code non-zero.
    Asks only; `Verdict.apply` changes the result."""
    found = problems(result)
    if found:
        notes = [f"the engine's numbers failed validation: {p}" for p in found[:5]]
        if len(found) > 5:
            notes.append(f"... and {len(found) - 5} more validation failures")
        return Verdict("invalid", True, tuple(notes), worst_exit(exit_code, ExitCode.ERROR))
    why = nothing_measured(result, probe_shape(result.probe))
    if why is not None:
        status = "failed" if result.status in ("completed", "threshold") else None
        return Verdict(status, None, (why,), worst_exit(exit_code, ExitCode.ERROR))
    # e.g. no Amdahl fit outside its physical bounds
    return Verdict(None, None, tuple(probe_notes(result)), exit_code)


def combine_probes(results: list[tuple[RunResult, ExitCode]]) -> tuple[RunResult, ExitCode]:
    """The results of one phase's probes as one: the first's, with the others' channels
    and notes added, the worst status and exit code."""
    base, code = results[0]
    for res, c in results[1:]:
        base.phases[0].channels += res.phases[0].channels
        base.notes += res.notes
        code = worst_exit(code, c)
        if STATUS_RANK[res.status] > STATUS_RANK[base.status]:
            base.status, base.partial = res.status, res.partial
    return base, code


def merge_phases(done: list[tuple[RunResult, ExitCode]], n_phases: int, interrupted: bool,
                 sig: int | None) -> tuple[RunResult, ExitCode]:
    """The phases' results as one run: phases in order, worst status, notes per phase
    (prefixed with the phase's name when the scenario has `n_phases` > 1)."""
    first = done[0][0]
    phases: list[ResultPhase] = []
    notes: list[str] = []
    status, code = "completed", ExitCode.OK
    rt_valid: bool | None = True
    for res, c in done:
        phases += res.phases
        prefix = f"phase {res.phases[0].name}: " if n_phases > 1 else ""
        notes += [prefix + n for n in res.notes]
        if STATUS_RANK[res.status] > STATUS_RANK[status]:
            status = res.status
        code = worst_exit(code, c)
        if res.rt_valid is False:
            rt_valid = False
        elif res.rt_valid is None and rt_valid is True:
            rt_valid = None
    stream = first.stream
    for res, _ in done[1:]:
        stream.records += res.stream.records
        stream.snapshots += res.stream.snapshots
        stream.corrupt_lines += res.stream.corrupt_lines
        stream.ignored_records += res.stream.ignored_records
        stream.truncated_tail = stream.truncated_tail or res.stream.truncated_tail
        stream.logs += res.stream.logs
        if res.stream.threshold_hit:
            stream.threshold_hit = res.stream.threshold_hit
        stream.engine_status = res.stream.engine_status
        stream.engine_exit_code = res.stream.engine_exit_code
    if interrupted:
        code = ExitCode.INTERRUPTED
        if status == "completed":
            status = "partial"
        name = signal.Signals(sig or signal.SIGINT).name
        if not any(name in n for n in notes):
            notes.append(f"interrupted by {name}")
    partial = status in ("partial", "failed", "invalid") or any(r.partial for r, _ in done)
    result = RunResult(run_id=first.run_id, status=status, probe=first.probe, phases=phases,
                       partial=partial, notes=notes, rt_valid=rt_valid,
                       scenario=first.scenario, stream=stream, provenance=first.provenance)
    return result, code


