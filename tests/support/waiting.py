# SPDX-License-Identifier: MIT
"""Waiting for a condition in a test: polled, bounded, and failing with what was awaited."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from typing import Any


def wait_for(cond: Callable[[], Any], timeout: float, what: str, *, poll: float = 0.05,
             diag: Callable[[], str] = lambda: "",
             ignore: tuple[type[BaseException], ...] = ()) -> Any:
    """Call cond every `poll` seconds until it returns something true, and return that;
    after `timeout` seconds fail with `what` (and the last value, and `diag()`). Errors
    of the `ignore` types count as not yet (a server still starting)."""
    t_end = time.monotonic() + timeout
    last: Any = None
    while True:
        try:
            last = cond()
        except ignore:
            last = None
        if last:
            return last
        if time.monotonic() >= t_end:
            break
        time.sleep(poll)
    more = diag()
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what} (last: {last!r})"
                         + (f"\n{more}" if more else ""))


def stop(proc: subprocess.Popen[Any], sig: int, timeout: float) -> int:
    """Send `sig` to `proc` and return its exit code; a process still running after
    `timeout` seconds is killed, and the wait's TimeoutExpired goes on to the caller."""
    proc.send_signal(sig)
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
