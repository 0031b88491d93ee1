# SPDX-License-Identifier: MIT
"""Child processes that cannot outlive the rtlab process that started them.

`die_with_parent()` is a `preexec_fn` for subprocess.Popen: the child gets a
signal from the kernel (PR_SET_PDEATHSIG) when the *thread* that started it
exits, so a `kill -9` of rtlab takes its engine runs, load generators and
reflectors with it. The setting survives exec (also through `ip netns exec`).
"""

from __future__ import annotations

import ctypes
import os
import signal
from collections.abc import Callable

PR_SET_PDEATHSIG = 1
_LIBC = ctypes.CDLL(None, use_errno=True)  # loaded here, not between fork and exec


def die_with_parent(sig: int = signal.SIGKILL) -> Callable[[], None]:
    """A preexec_fn: the child receives `sig` when its parent dies (and exits at once if
    the parent is already gone by the time the setting takes effect)."""
    parent = os.getpid()

    def setup() -> None:  # runs in the child between fork and exec
        _LIBC.prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0)
        if os.getppid() != parent:
            os._exit(127)

    return setup
