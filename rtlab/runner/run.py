# SPDX-License-Identifier: MIT
"""The run lifecycle: pre-flight -> spawn probe -> collect -> classify -> store.

(Doctor, shielding and loads slot in before the probe phase in later issues.)

Outcome -> status -> exit code:

| what happened                                  | status    | partial | exit |
|------------------------------------------------|-----------|---------|------|
| engine result `completed`, exit 0              | completed | no      | 0    |
| engine result `threshold`, exit 3              | threshold | no      | 3    |
| SIGINT/SIGTERM to rtlab (forwarded)            | partial   | yes     | 130  |
| engine crashed / killed / silent (watchdog)    | partial   | yes     | 1    |
| engine result `error`                          | failed    | -       | 1    |
| engine exit 4 (privilege/feature missing)      | not stored: SkippedError, exit 4 |
| engine exit 2 (usage), or nothing measured     | not stored: error                |
"""

from __future__ import annotations

import signal
import socket
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rtlab import __version__
from rtlab.engine.argv import probe_args
from rtlab.engine.session import EngineSession, SessionOutcome
from rtlab.engine.transport import LocalTransport, Transport
from rtlab.errors import RtlabError, SkippedError, UsageError
from rtlab.exitcodes import ExitCode
from rtlab.results.model import Channel, RunResult
from rtlab.results.store import Store
from rtlab.runner.preflight import Privileges, check_privileges
from rtlab.scenario.model import Scenario


@dataclass(frozen=True)
class Progress:
    """One live update (from each engine snapshot)."""

    elapsed_ns: int
    duration_ns: int | None
    channels: list[Channel]


@dataclass
class RunOptions:
    store: Store
    transport: Transport | None = None
    allow_non_rt: bool = False
    on_progress: Callable[[Progress], None] | None = None
    on_start: Callable[[str, Path], None] | None = None  # (run id, raw file)
    watchdog_s: float | None = None  # default: 3 x snapshot interval + 5 s
    stop_grace_s: float = 5.0
    preflight: Callable[[str, int], Privileges] = check_privileges
    command_line: list[str] = field(default_factory=lambda: list(sys.argv))
    handle_signals: bool = True


@dataclass
class RunOutcome:
    result: RunResult
    exit_code: ExitCode
    raw_path: Path


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


@contextmanager
def _forward_signals(session: EngineSession, enabled: bool) -> Iterator[None]:
    """SIGINT/SIGTERM to rtlab ask the engine to stop (and are remembered)."""
    if not enabled or threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, _frame: object) -> None:
        session.request_stop(signum)

    old = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def run_scenario(scenario: Scenario, opts: RunOptions) -> RunOutcome:
    if len(scenario.phases) != 1:
        raise UsageError("scenarios with several phases are not supported yet")
    phase = scenario.phases[0]
    probe = phase.probe
    allow_non_rt = opts.allow_non_rt or bool(probe.options.get("allow_non_rt"))

    # 1. pre-flight: stop before measuring if real-time is impossible here
    if probe.needs_rt:
        priv = opts.preflight(str(probe.options.get("policy", "fifo")),
                              int(probe.options.get("priority", 99)))
        if not priv.ok and not allow_non_rt:
            raise SkippedError(f"not starting: {priv.reason()}", hint=priv.fix())

    # 2. spawn and collect
    options = dict(probe.options)
    if allow_non_rt:
        options["allow_non_rt"] = True
    args = probe_args(probe.name, options)
    store = opts.store
    run_id = store.new_id()
    raw_path = store.raw_path(run_id)
    watchdog = opts.watchdog_s or 3 * probe.snapshot_interval_ns / 1e9 + 5.0
    transport = opts.transport or LocalTransport()
    duration_ns = phase.duration_ns

    def on_record(rec: dict[str, Any]) -> None:
        if opts.on_progress is not None and rec["type"] in ("snapshot", "result"):
            opts.on_progress(Progress(int(rec.get("elapsed_ns") or 0), duration_ns,
                                      session.collector.channels()))

    session = EngineSession(transport, args, raw_path, watchdog_s=watchdog,
                            stop_grace_s=opts.stop_grace_s, on_record=on_record)
    host: dict[str, Any] = {
        "rtlab_version": __version__,
        "hostname": socket.gethostname(),
        "start_wall": _now(),
        "end_wall": None,
        "command_line": opts.command_line,
        "transport": transport.name,
        "engine_args": args,
    }
    if opts.on_start is not None:
        opts.on_start(run_id, raw_path)
    with _forward_signals(session, opts.handle_signals):
        outcome = session.run()
    host["end_wall"] = _now()

    # 3. classify, build, store
    try:
        result, code = classify(outcome, run_id, host, scenario.ref(), phase.name)
    except RtlabError:
        if raw_path.exists() and raw_path.stat().st_size == 0:
            raw_path.unlink()  # nothing was measured: leave no empty file behind
        raise
    store.add(result)
    return RunOutcome(result, code, raw_path)


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
    elif code not in (None, 0, 3, 130) and engine_status != "error":
        line = outcome.stderr_line()
        notes.append(f"engine exited with code {code}" + (f": {line}" if line else ""))

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
    return result, exit_code
