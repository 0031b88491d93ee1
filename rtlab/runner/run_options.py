# SPDX-License-Identifier: MIT
"""What a caller asks of a run and gets back: its options (`RunOptions`), the live
updates it may follow (`Progress`) and what happened (`RunOutcome`)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rtlab.engine.transport import Transport
from rtlab.exitcodes import ExitCode
from rtlab.results.model import Channel, RunResult
from rtlab.results.store import Store
from rtlab.runner.control import RunControl
from rtlab.runner.preflight import Privileges, check_privileges
from rtlab.runner.shield import ShieldBackend, default_backend
from rtlab.scenario.model import LoadSpec, ShieldSpec


@dataclass(frozen=True)
class Progress:
    """One live update (from each engine snapshot)."""

    elapsed_ns: int
    duration_ns: int | None
    channels: list[Channel]
    phase: str = "main"
    phase_index: int = 0
    phases: int = 1


@dataclass
class RunOptions:
    store: Store
    transport: Transport | None = None
    allow_non_rt: bool = False
    on_progress: Callable[[Progress], None] | None = None
    on_start: Callable[[str, Path], None] | None = None  # (run id, raw file of phase 1)
    on_event: Callable[[str], None] | None = None  # one line of what the runner does
    watchdog_s: float | None = None  # default: 3 x snapshot interval + 5 s
    stop_grace_s: float = 5.0
    preflight: Callable[[str, int], Privileges] = check_privileges
    command_line: list[str] = field(default_factory=lambda: list(sys.argv))
    handle_signals: bool = True
    comparison: str | None = None  # shared by the variants of a matrix
    restore_first: bool = False  # restore a stale journal instead of refusing
    no_shield: bool = False  # run without the scenario's shield (recorded)
    doctor: bool = True  # doctor findings into the provenance (local runs)
    shield_backend: Callable[[ShieldSpec, Transport], ShieldBackend] = default_backend
    load_factory: Callable[[LoadSpec], Any] | None = None  # default rtlab.loads.from_spec
    load_settle_s: float = 0.5
    journal_dir: Path | None = None
    control: RunControl | None = None  # shared by runs in parallel (several boards)
    peer_info: Callable[[], dict[str, Any]] | None = None  # where a two-ended probe's other end is
    # the caller holds the target's owner lock for longer than this run (`rtlab tune`):
    # the run takes no lock of its own
    owner_held: bool = False

    def event(self, text: str) -> None:
        """One line of what the runner does, to whoever follows it (`on_event`)."""
        if self.on_event is not None:
            self.on_event(text)


@dataclass
class RunOutcome:
    result: RunResult
    exit_code: ExitCode
    raw_path: Path
    loads_died: bool = False  # a load died early: the run lacked the load it asked for


