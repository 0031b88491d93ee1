# SPDX-License-Identifier: MIT
"""Signals of a run: SIGINT/SIGTERM reach one `RunControl`, which stops the engines it
holds; one control may be shared by several boards' runs in parallel."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from rtlab.engine.session import EngineSession


class RunControl:
    """Signals of the whole run: SIGINT/SIGTERM stop the running engines and the run."""

    def __init__(self) -> None:
        self.signal: int | None = None
        self.sessions: list[EngineSession] = []
        self._lock = threading.Lock()

    def request(self, signum: int) -> None:
        with self._lock:
            if self.signal is None:
                self.signal = signum
            sessions = list(self.sessions)
        for s in sessions:
            s.request_stop(signum)

    def add(self, session: EngineSession) -> None:
        with self._lock:
            self.sessions.append(session)
            sig = self.signal
        if sig is not None:
            session.request_stop(sig)

    def remove(self, sessions: list[EngineSession]) -> None:
        """Forget these sessions (ended); another run's sessions stay."""
        with self._lock:
            self.sessions = [s for s in self.sessions if s not in sessions]


@contextmanager
def handle_signals(control: RunControl, enabled: bool = True) -> Iterator[None]:
    """SIGINT/SIGTERM go to `control` (which stops its engines) while inside, in the
    main thread only (one run, or several boards' runs sharing one control)."""
    if not enabled or threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, _frame: object) -> None:
        control.request(signum)

    old = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


