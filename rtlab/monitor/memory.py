# SPDX-License-Identifier: MIT
"""Giving the C allocator's free memory back to the system, for a process that runs for
weeks.

Storing a segment parses its raw file (an hour of snapshots, each with the cumulative
histograms): tens of megabytes allocated and freed in the store writer's thread. glibc
keeps such freed memory in that thread's arena, and what lies between blocks still in
use is not returned by itself; over many segments the monitor's resident memory creeps
up although Python holds no more objects (bench/RESULTS.md, "Monitor: resident memory").
Two things keep it down, after each store pass (once per segment):

* a full garbage collection: parsing and storing leave reference cycles that Python's
  generational collector reaches late (its oldest generation is collected rarely), and
  the memory they hold meanwhile is what later allocations fragment;
* `malloc_trim(0)`, which returns every free page of every arena to the system.

Measured on 60 stored 1-minute segments in one process: +1.8 MB without either, +132
kB with the collection, +36 kB with both (bench/RESULTS.md).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import gc
from collections.abc import Callable


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        return ctypes.CDLL(name).malloc_trim  # type: ignore[no-any-return]
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
