# SPDX-License-Identifier: MIT
"""LoadSet: start loads, verify they run, watch them, stop them on every exit path."""

from __future__ import annotations

import contextlib
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from rtlab.loads.lifecycle import Load, LoadError, NullRecorder, SpawnRecorder


class LoadSet:
    """A context manager over loads.

    `with LoadSet(loads, recorder) as ls:` checks the tools of every load
    (SkippedError if one is missing), starts each load's processes in their
    own process groups (recording each group through `recorder`), waits
    `settle_s` and verifies every load is running (LoadError otherwise, after
    stopping what did start). During the run a watcher thread notices loads
    that die early (`died()`, `status()`, `on_death`). Leaving the block in any
    way (normally, by an exception, by KeyboardInterrupt) stops every load:
    SIGTERM to each group, SIGKILL after `grace_s`, leaders reaped, groups
    empty, namespaces removed.

    `workdir`: where each load keeps its stdout/stderr and outputs (one
    subdirectory per load); a temporary directory removed at the end if None.
    """

    def __init__(self, loads: Sequence[Load], recorder: SpawnRecorder | None = None, *,
                 workdir: Path | None = None, settle_s: float = 0.5, grace_s: float = 2.0,
                 verify_timeout_s: float = 5.0, watch_interval_s: float | None = 0.25,
                 on_death: Callable[[Load], None] | None = None):
        self.loads = list(loads)
        self.recorder: SpawnRecorder = recorder if recorder is not None else NullRecorder()
        self._own_workdir = workdir is None
        self.workdir = workdir
        self.settle_s = settle_s
        self.grace_s = grace_s
        self.verify_timeout_s = verify_timeout_s
        self.watch_interval_s = watch_interval_s
        self.on_death = on_death
        self.stop_result: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._stop_watch = threading.Event()
        self._watcher: threading.Thread | None = None
        self._reported: set[int] = set()
        self._started = False
        self._stopped = False

    # --- lifecycle -------------------------------------------------------------
    def __enter__(self) -> LoadSet:
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def start(self) -> None:
        for load in self.loads:
            load.check_tools()
        if self.workdir is None:
            self.workdir = Path(tempfile.mkdtemp(prefix="rtlab-loads-"))
        self._started = True
        try:
            for i, load in enumerate(self.loads):
                load.start(self.recorder, self.workdir / f"{i}-{load.name}",
                           ready_timeout_s=self.verify_timeout_s)
            time.sleep(self.settle_s)
            deadline = time.monotonic() + self.verify_timeout_s
            for load in self.loads:
                load.verify(deadline)
        except BaseException:
            self.stop()
            raise
        if self.watch_interval_s:
            self._watcher = threading.Thread(target=self._watch, name="rtlab-load-watch",
                                             daemon=True)
            self._watcher.start()

    def _watch(self) -> None:
        assert self.watch_interval_s
        while not self._stop_watch.wait(self.watch_interval_s):
            self.died()

    def died(self) -> list[Load]:
        """Loads that died before the stop (checked now)."""
        with self._lock:
            dead = [load for load in self.loads if not load.stopping and load.check()]
            dead += [load for load in self.loads if load.stopping and load.died_early
                     and load not in dead]
            fresh = [load for load in dead if id(load) not in self._reported]
            self._reported.update(id(load) for load in fresh)
        if self.on_death is not None:
            for load in fresh:
                self.on_death(load)
        return dead

    def ok(self) -> bool:
        return not self.died()

    def status(self) -> dict[str, Any]:
        """{"ok": bool, "died": [names], "loads": [describe() of each load]}."""
        dead = self.died()
        return {"ok": not dead, "died": [load.name for load in dead],
                "loads": self.describe()}

    def describe(self) -> list[dict[str, Any]]:
        return [load.describe() for load in self.loads]

    def stop(self) -> None:
        """Stop and reap everything; idempotent, safe on a partly started set."""
        if self._stopped or not self._started:
            return
        self._stop_watch.set()
        if self._watcher is not None and self._watcher is not threading.current_thread():
            self._watcher.join(timeout=2.0)
        interrupted: BaseException | None = None
        try:
            self._terminate()
        except KeyboardInterrupt as e:  # a second Ctrl-C: no more grace
            interrupted = e
            self._kill_all()
        finally:
            for load in self.loads:
                try:
                    load.teardown()
                except Exception as e:  # keep going: the others must be torn down too
                    self.stop_result.setdefault("teardown_errors", []).append(
                        f"{load.name}: {e}")
                load.collect()
                for p in load.procs:
                    p.saved_tail = p.stderr_tail()
            if self._own_workdir and self.workdir is not None:
                shutil.rmtree(self.workdir, ignore_errors=True)
            self._stopped = True
        if interrupted is not None:
            raise interrupted

    def _terminate(self) -> None:
        with self._lock:
            for load in self.loads:
                load.check()  # a load that died before now died early, not by our hand
                if load.procs:
                    with contextlib.suppress(Exception):  # a last look never blocks the stop
                        load.before_signal()
                load.signal(signal.SIGTERM)
        grace = max([self.grace_s, *(load.stop_grace_s for load in self.loads)])
        if self._wait_gone(time.monotonic() + grace):
            self.stop_result["killed"] = []
            return
        self.stop_result["killed"] = [load.name for load in self.loads if not load.gone()]
        self._kill_all()

    def _kill_all(self) -> None:
        for load in self.loads:
            load.signal(signal.SIGKILL)
        if not self._wait_gone(time.monotonic() + self.grace_s):
            left = [pid for load in self.loads for pid in load.leftovers()]
            raise LoadError(f"load processes still alive after SIGKILL: {left}")

    def _wait_gone(self, deadline: float) -> bool:
        while True:
            if all(load.gone() for load in self.loads):
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.02)
