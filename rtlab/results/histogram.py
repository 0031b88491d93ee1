# SPDX-License-Identifier: MIT
"""Python mirror of the engine's log-linear histogram (docs/engine-output.md).

Values are non-negative integer nanoseconds. With S = sub_bits and B = 2**S:
values below B get their own bucket (index = value); above that each power of
two is split into B equal buckets, so a bucket is never wider than 2**-S of its
lower edge. The index math is the contract's, bit for bit, so histograms read
from the engine and built here merge exactly.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np

LAYOUT = "loglin"
SUB_BITS = 7
_MAX_VALUE = (1 << 64) - 1


def bucket_count(sub_bits: int = SUB_BITS) -> int:
    """Number of buckets covering the whole uint64 range."""
    b = 1 << sub_bits
    return b + (64 - sub_bits) * b


def index_of(value: int, sub_bits: int = SUB_BITS) -> int:
    """Bucket index holding `value` (ns)."""
    if value < 0 or value > _MAX_VALUE:
        raise ValueError(f"histogram value out of range: {value}")
    b = 1 << sub_bits
    if value < b:
        return value
    e = value.bit_length() - 1
    shift = e - sub_bits
    return b + shift * b + ((value >> shift) - b)


def index_array(values: np.ndarray, sub_bits: int = SUB_BITS) -> np.ndarray:
    """`index_of` of every value of an integer array at once (values below 2**52, where
    float64's log2 is exact enough to be corrected by one step; negatives count as 0)."""
    v = np.maximum(np.asarray(values).astype(np.int64), 0)
    b = 1 << sub_bits
    e = np.floor(np.log2(np.maximum(v, 1))).astype(np.int64)
    e -= (np.left_shift(1, e) > v).astype(np.int64)
    e += (np.left_shift(1, e + 1) <= v).astype(np.int64)
    shift = np.maximum(e - sub_bits, 0)
    return np.where(v < b, v, b + shift * b + (np.right_shift(v, shift) - b))


def bucket_bounds(index: int, sub_bits: int = SUB_BITS) -> tuple[int, int]:
    """(lo, width) of bucket `index`: it holds the integers lo .. lo + width - 1."""
    if index < 0 or index >= bucket_count(sub_bits):
        raise ValueError(f"histogram bucket index out of range: {index}")
    b = 1 << sub_bits
    if index < b:
        return index, 1
    g, m = divmod(index - b, b)
    width = 1 << g
    return (b + m) * width, width


@dataclass(frozen=True, slots=True)
class Bucket:
    """One non-empty bucket: integers `lo` .. `hi` (inclusive) were counted `count` times."""

    index: int
    lo: int
    hi: int
    count: int

    @property
    def midpoint(self) -> int:
        return self.lo + (self.hi - self.lo) // 2


class LogLinHistogram:
    """Sparse log-linear histogram with exact merge."""

    __slots__ = ("_arrays", "_counts", "sub_bits")

    def __init__(self, sub_bits: int = SUB_BITS, counts: dict[int, int] | None = None) -> None:
        self.sub_bits = sub_bits
        self._counts: dict[int, int] = {}
        # (index, lo, hi, count) arrays of the non-empty buckets, read-only, made at the
        # first query and dropped by every change (`add`)
        self._arrays: tuple[np.ndarray, ...] | None = None
        limit = bucket_count(sub_bits)
        for index, count in (counts or {}).items():
            if not 0 <= index < limit:
                raise ValueError(f"histogram bucket index out of range: {index}")
            if count < 0:
                raise ValueError(f"negative histogram count in bucket {index}")
            if count:
                self._counts[index] = count

    # construction -----------------------------------------------------------------
    @classmethod
    def from_values(cls, values: Iterable[int], sub_bits: int = SUB_BITS) -> LogLinHistogram:
        hist = cls(sub_bits)
        for v in values:
            hist.add(v)
        return hist

    @classmethod
    def from_json(cls, obj: dict) -> LogLinHistogram:
        """Read the contract's `{"layout", "sub_bits", "buckets": [[index, count], ...]}`."""
        if not isinstance(obj, dict) or obj.get("layout") != LAYOUT:
            layout = obj.get("layout") if isinstance(obj, dict) else obj
            raise ValueError(f"unsupported histogram layout: {layout!r}")
        sub_bits = obj.get("sub_bits")
        if not isinstance(sub_bits, int) or not 1 <= sub_bits <= 16:
            raise ValueError(f"unsupported histogram sub_bits: {sub_bits!r}")
        # one pass that checks and counts (a monitor reads an engine's cumulative
        # histograms, ~1,000 buckets each, at every snapshot of every CPU)
        limit = bucket_count(sub_bits)
        counts: dict[int, int] = {}
        for pair in obj.get("buckets", []):
            if not (isinstance(pair, list | tuple) and len(pair) == 2):
                raise ValueError(f"malformed histogram bucket: {pair!r}")
            index, count = pair
            if not (isinstance(index, int) and isinstance(count, int)):
                raise ValueError(f"malformed histogram bucket: {pair!r}")
            if not 0 <= index < limit:
                raise ValueError(f"histogram bucket index out of range: {index}")
            if count < 0:
                raise ValueError(f"negative histogram count in bucket {index}")
            if count:
                counts[index] = counts.get(index, 0) + count
        hist = cls.__new__(cls)
        hist.sub_bits, hist._counts, hist._arrays = sub_bits, counts, None
        return hist

    def to_json(self) -> dict:
        return {
            "layout": LAYOUT,
            "sub_bits": self.sub_bits,
            "buckets": [[i, self._counts[i]] for i in sorted(self._counts)],
        }

    # mutation ---------------------------------------------------------------------
    def add(self, value: int, count: int = 1) -> None:
        i = index_of(value, self.sub_bits)
        self._counts[i] = self._counts.get(i, 0) + count
        self._arrays = None

    def merge(self, other: LogLinHistogram) -> LogLinHistogram:
        """A new histogram holding both (exact: counts add)."""
        if other.sub_bits != self.sub_bits:
            raise ValueError(
                f"cannot merge histograms with sub_bits {self.sub_bits} and {other.sub_bits}"
            )
        merged = LogLinHistogram(self.sub_bits, self._counts)
        for i, c in other._counts.items():
            merged._counts[i] = merged._counts.get(i, 0) + c
        return merged

    # queries ------------------------------------------------------------------------
    @property
    def total(self) -> int:
        return sum(self._counts.values())

    def buckets(self) -> Iterator[Bucket]:
        """Non-empty buckets in increasing value order."""
        arrays = self._cached_arrays()
        if arrays is None:  # a count beyond int64: Python integers throughout
            for i in sorted(self._counts):
                lo, width = bucket_bounds(i, self.sub_bits)
                yield Bucket(i, lo, lo + width - 1, self._counts[i])
            return
        index, lo_a, hi_a, _ = arrays
        counts = self._counts
        for i, lo, hi in zip(index.tolist(), lo_a.tolist(), hi_a.tolist(), strict=True):
            yield Bucket(i, lo, hi, counts[i])

    def bucket_arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(lo, hi, count) of the non-empty buckets in increasing value order, as read-only
        int64 arrays: `buckets()` without an object per bucket. OverflowError when a
        count or an edge does not fit in int64."""
        arrays = self._cached_arrays()
        if arrays is None:
            raise OverflowError("histogram count or edge beyond int64")
        return arrays[1], arrays[2], arrays[3]

    def _cached_arrays(self) -> tuple[np.ndarray, ...] | None:
        if self._arrays is None:
            try:
                self._arrays = self._make_arrays()
            except OverflowError:
                return None
        return self._arrays

    def _make_arrays(self) -> tuple[np.ndarray, ...]:
        n = len(self._counts)
        index = np.fromiter(sorted(self._counts), dtype=np.int64, count=n)
        counts = np.fromiter((self._counts[i] for i in index.tolist()), dtype=np.int64,
                             count=n)
        if n and int(index[-1]) > index_of((1 << 63) - 1, self.sub_bits):
            raise OverflowError("histogram edge beyond int64")
        b = 1 << self.sub_bits
        g, m = np.divmod(np.maximum(index - b, 0), b)
        small = index < b
        width = np.where(small, 1, np.left_shift(np.int64(1), g))
        lo = np.where(small, index, (b + m) * width)
        out = (index, lo, lo + width - 1, counts)
        for a in out:
            a.flags.writeable = False
        return out

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, LogLinHistogram):
            return NotImplemented
        return self.sub_bits == other.sub_bits and self._counts == other._counts

    def __repr__(self) -> str:
        return (f"LogLinHistogram(sub_bits={self.sub_bits}, buckets={len(self._counts)}, "
                f"total={self.total})")
