# SPDX-License-Identifier: MIT
"""Giving the C allocator's free memory back to the system, for a process that runs for
weeks.

Storing a segment parses its raw file (an hour of snapshots, each with the cumulative
histograms): tens of megabytes allocated and freed in the store writer's thread. After
each store pass (once per segment) the monitor gives back what it can:

* a full garbage collection: parsing and storing leave reference cycles that Python's
  generational collector reaches late (its oldest generation is collected rarely);
* `malloc_trim(0)`: glibc keeps freed memory in the thread's arena until asked to
  return the free pages to the system.

Measured (bench/monitor_store_memory.py, bench/RESULTS.md): over 60 store passes of a
10-minute segment the writer's RSS moves between two levels some 8 MiB apart and shows
no trend either way; with this release both levels are about 1.5-2.8 MiB lower.
"""

from __future__ import annotations

import ctypes
import functools
import gc
from collections.abc import Callable


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    """The process's own C library's malloc_trim (as rtlab/lifeline.py finds prctl: no
    library search, which would run ldconfig from this threaded process)."""
    try:
        return ctypes.CDLL(None).malloc_trim  # type: ignore[no-any-return]
    except (OSError, AttributeError):  # not glibc (musl has no malloc_trim)
        return None


def release_free_memory() -> bool:
    """Collect Python's garbage cycles, then return the allocator's free pages to the
    system; False where the C library cannot (not glibc)."""
    gc.collect()
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True
