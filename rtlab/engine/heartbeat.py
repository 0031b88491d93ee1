# SPDX-License-Identifier: MIT
"""The heartbeat on a board engine's stdin lifeline.

An engine on a board stops when its stdin reaches EOF (`--stdin-lifeline`): rtlab or
its SSH connection went away. A link can also be alive and starved: a SCHED_FIFO load
above the NIC's interrupt thread on a PREEMPT_RT board lets no packet through, so no
EOF ever arrives and the load holds the board for good. With `--lifeline-timeout` the
engine also stops after that long without a byte on stdin; rtlab writes one byte every
`INTERVAL_S` to every such engine it holds (`keep_alive`), from one thread.

The pipes are non-blocking: a full pipe (ssh not reading) skips a beat instead of
blocking the thread, and a pipe closed by its owner (the lifeline's EOF) is dropped.
"""

from __future__ import annotations

import contextlib
import os
import threading
from typing import IO, Any

INTERVAL_S = 2.0
# the engine's silence limit: many beats, and the worst pauses of an emulated board on
# a loaded host, fit in it
TIMEOUT_S = 60


def lifeline_args() -> list[str]:
    """The engine's global options of a board engine held through a heartbeat."""
    return ["--stdin-lifeline", "--lifeline-timeout", f"{TIMEOUT_S}s"]


_lock = threading.Lock()
_pipes: list[IO[Any]] = []
_thread: threading.Thread | None = None
_wake = threading.Event()


def keep_alive(pipe: IO[Any]) -> None:
    """Beat on `pipe` (an engine's stdin, held open by rtlab) until it is closed."""
    global _thread
    with contextlib.suppress(OSError, ValueError):
        os.set_blocking(pipe.fileno(), False)
    with _lock:
        _pipes.append(pipe)
        if _thread is None or not _thread.is_alive():
            _thread = threading.Thread(target=_beat, name="rtlab-heartbeat", daemon=True)
            _thread.start()


def _beat() -> None:
    while not _wake.wait(INTERVAL_S):
        with _lock:
            for pipe in list(_pipes):
                try:
                    pipe.write(b"\n")
                    pipe.flush()
                except BlockingIOError:
                    continue  # full: ssh is not reading now; the next beat tries again
                except (OSError, ValueError):  # closed by its owner, or the reader gone
                    _pipes.remove(pipe)
