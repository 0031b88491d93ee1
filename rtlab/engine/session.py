# SPDX-License-Identifier: MIT
"""One engine run: spawn, tee the raw JSON Lines to disk, parse, watchdog, stop.

The session never hangs: when the engine says nothing for `watchdog_s` it is
sent SIGTERM, then SIGKILL after `kill_grace_s`; a stop request (Ctrl-C) is
forwarded once and the engine gets `stop_grace_s` to write its result before it
is killed. Whatever arrived until then is kept (its last snapshot is a valid
partial result).
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rtlab.engine.jsonl import StreamCollector
from rtlab.engine.transport import EngineProcess, Transport

POLL_S = 0.1


@dataclass
class SessionOutcome:
    collector: StreamCollector
    exit_code: int | None
    stderr: str
    stop_signal: int | None = None  # the signal we forwarded on request, if any
    watchdog_fired: bool = False
    killed: bool = False  # we had to SIGKILL it
    notes: list[str] = field(default_factory=list)

    def stderr_line(self) -> str:
        """The engine's last non-empty stderr line (its one-line reason)."""
        lines = [ln.strip() for ln in self.stderr.splitlines() if ln.strip()]
        return lines[-1] if lines else ""


class EngineSession:
    def __init__(
        self,
        transport: Transport,
        args: list[str],
        raw_path: Path,
        *,
        watchdog_s: float,
        stop_grace_s: float = 5.0,
        kill_grace_s: float = 1.0,
        on_record: Callable[[dict[str, Any]], None] | None = None,
        keep_as: str | None = None,
        start_grace_s: float = 0.0,
    ) -> None:
        self.transport = transport
        self.keep_as = keep_as  # the name a board keeps its own copy of the output under
        self.args = args
        self.raw_path = raw_path
        self.watchdog_s = watchdog_s
        # silence allowed before the first line, beyond watchdog_s: an engine that sets up
        # something slow before its header (a board's trace buffer of many MiB) is not hung
        self.start_grace_s = start_grace_s
        self.stop_grace_s = stop_grace_s
        self.kill_grace_s = kill_grace_s
        self.on_record = on_record
        self.collector = StreamCollector()
        self._stop_sig: int | None = None
        self._stop_count = 0
        self._lock = threading.Lock()

    def request_stop(self, sig: int = signal.SIGINT) -> None:
        """Ask the engine to stop (safe from a signal handler). A second request kills it."""
        with self._lock:
            if self._stop_sig is None:
                self._stop_sig = sig
            self._stop_count += 1

    def run(self) -> SessionOutcome:
        proc = self.transport.spawn(self.args, keep_as=self.keep_as)
        outcome = SessionOutcome(self.collector, None, "")
        try:
            self._pump(proc, outcome)
        except BaseException:
            proc.kill()
            proc.wait(5.0)
            raise
        code = proc.wait(self.kill_grace_s + 5.0)
        if code is None:
            proc.kill()
            outcome.killed = True
            code = proc.wait(5.0)
        outcome.exit_code = code
        outcome.stderr = proc.stderr_text()
        return outcome

    def _pump(self, proc: EngineProcess, outcome: SessionOutcome) -> None:
        self.raw_path.parent.mkdir(parents=True, exist_ok=True)
        last_output = time.monotonic()
        started = False  # a first line has come
        stop_sent_at: float | None = None
        term_at: float | None = None
        killed = False
        with open(self.raw_path, "a", encoding="utf-8", newline="") as raw:
            for line in proc.lines(POLL_S):
                now = time.monotonic()
                if line is not None:
                    raw.write(line)
                    raw.flush()
                    last_output = now
                    started = True
                    rec = self.collector.feed(line)
                    if rec is not None and self.on_record is not None:
                        self.on_record(rec)
                if killed:
                    continue
                with self._lock:
                    stop_sig, stop_count = self._stop_sig, self._stop_count
                if stop_sig is not None and stop_sent_at is None:
                    proc.send_signal(stop_sig)
                    outcome.stop_signal = stop_sig
                    stop_sent_at = now
                if stop_sent_at is not None and (
                    stop_count > 1 or now - stop_sent_at > self.stop_grace_s
                ):
                    outcome.notes.append(
                        "engine killed after a second interrupt" if stop_count > 1 else
                        f"engine did not stop within {self.stop_grace_s:g} s of "
                        f"{signal.Signals(stop_sig).name}: killed"  # type: ignore[arg-type]
                    )
                    proc.kill()
                    killed = outcome.killed = True
                    continue
                limit = self.watchdog_s + (0.0 if started else self.start_grace_s)
                if term_at is None and now - last_output > limit:
                    outcome.watchdog_fired = True
                    outcome.notes.append(
                        f"engine silent for more than {limit:g} s: "
                        "stopped by the watchdog"
                    )
                    proc.send_signal(signal.SIGTERM)
                    term_at = now
                elif term_at is not None and now - term_at > self.kill_grace_s:
                    proc.kill()
                    killed = outcome.killed = True
