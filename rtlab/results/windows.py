# SPDX-License-Identifier: MIT
"""Per-window maxima of one channel, kept as three integer arrays.

A 7-day run with 1 s windows has 604,800 windows per CPU; as Python tuples that
is ~190 bytes a window (1.9 GB for 24 CPUs), as arrays 4 to 24 bytes (a steady run:
its maxima, 4 bytes; its consecutive index and its one count of samples per window
are shared or zero-stride, read-only). `WindowMaxima`
still behaves like the old list of ``(index, max_ns, samples)`` tuples for
reading (len, iteration, indexing, truth value, equality with a list), so code
that walks a few windows stays simple, while the report and the statistics use
the arrays directly.

Two serial forms (docs/results.md):

* the exported JSON result keeps the readable ``[[index, max_ns, samples], ...]``;
* the store packs each column: delta-coded (index, samples), byte-shuffled
  (the 8 bytes of every value grouped by significance, so the zero high bytes
  compress away) and zlib-compressed, base64 in the JSON blob:
  ``{"enc": "shuffle-zlib-v1", "n": N, "index": B64, "max_ns": B64, "samples": B64}``.
"""

from __future__ import annotations

import base64
import weakref
import zlib
from collections.abc import Iterable, Iterator
from typing import Any, overload

import numpy as np

from rtlab.errors import RtlabError
from rtlab.results.histogram import index_array

PACKED_ENC = "shuffle-zlib-v1"
_COLUMNS = ("index", "max_ns", "samples")


_I32 = np.iinfo(np.int32)


def _column(values: Any) -> np.ndarray:
    """An integer column in the narrowest of int32/int64 that holds it (a 7-day run at
    24 CPUs: 174 MB instead of 348 MB); arithmetic on it must not assume int64."""
    v = np.asarray(values)
    if v.dtype.kind not in "iub":
        if v.size and not np.array_equal(v, np.trunc(v)):
            raise ValueError("window maxima must be integers")
        v = v.astype(np.int64)
    v = v.reshape(-1)
    if v.size == 0:
        return np.zeros(0, dtype=np.int64)
    if v.strides == (0,):  # one value seen n times (a loaded constant column): stays so
        one = _column(v[:1].copy())
        return np.broadcast_to(one, v.shape)
    if int(v.min()) >= _I32.min and int(v.max()) <= _I32.max:
        return v.astype(np.int32, copy=False)
    return v.astype(np.int64, copy=False)


def _pack_column(values: np.ndarray, delta: bool) -> str:
    v = np.ascontiguousarray(values, dtype="<i8")  # the serial form is always 64-bit
    if delta and len(v):
        v = np.diff(v, prepend=np.int64(0)).astype("<i8")
    planes = v.view(np.uint8).reshape(-1, 8).T.copy()  # byte k of every value together
    return base64.b64encode(zlib.compress(planes.tobytes(), 1)).decode("ascii")


def _unpack_column(text: Any, n: int, delta: bool, name: str) -> np.ndarray:
    try:
        raw = zlib.decompress(base64.b64decode(str(text), validate=True))
    except (ValueError, zlib.error) as exc:
        raise RtlabError(f"window maxima column {name!r} is damaged: {exc}") from None
    if len(raw) != 8 * n:
        raise RtlabError(f"window maxima column {name!r} holds {len(raw)} bytes, "
                         f"expected {8 * n}")
    planes = np.frombuffer(raw, dtype=np.uint8).reshape(8, n)
    if delta and n > 1 and bool((planes[:, 1:] == planes[:, 1:2]).all()):
        # every step the same (a consecutive index, one count of samples per window):
        # the column without its transposition and running sum
        first = int(planes[:, :1].T.copy().view("<i8")[0, 0])
        step = int(planes[:, 1:2].T.copy().view("<i8")[0, 0])
        if step == 0:
            return np.broadcast_to(np.array([first], dtype=np.int64), (n,))
        if step == 1 and _I32.min <= first and first + n - 1 <= _I32.max:
            return _range(first, n, np.dtype(np.int32))
    v = planes.T.copy().view("<i8").reshape(n)
    if delta:
        v = np.cumsum(v, dtype=np.int64)
    return v.astype(np.int64, copy=False)


_I16 = np.iinfo(np.int16)
# consecutive window indices 0..n-1 (or start..start+n-1): one read-only array shared by
# every channel of a run (and every run loaded at once), kept while any of them lives
_RUNS: weakref.WeakValueDictionary[tuple[int, int, str], np.ndarray] = \
    weakref.WeakValueDictionary()


def _range(start: int, n: int, dtype: np.dtype) -> np.ndarray:
    """The shared read-only range start .. start + n - 1."""
    key = (start, n, dtype.str)
    run = _RUNS.get(key)
    if run is None:
        run = np.arange(start, start + n, dtype=dtype)
        run.flags.writeable = False
        _RUNS[key] = run
    return run


def _shared_index(v: np.ndarray) -> np.ndarray:
    """The index column: a consecutive run is the shared read-only range."""
    n = len(v)
    if n < 2 or int(v[-1]) - int(v[0]) != n - 1:
        return v
    if _RUNS.get((int(v[0]), n, v.dtype.str)) is v:  # the shared range already
        return v
    if not bool(np.all(np.diff(v) == 1)):
        return v
    return _range(int(v[0]), n, v.dtype)


def _compact_samples(v: np.ndarray) -> np.ndarray:
    """The samples column: the same count in every window (a steady probe) is one value
    seen through a read-only zero-stride view; else int16 where the counts fit."""
    if not len(v):
        return v
    lo, hi = int(v.min()), int(v.max())
    if lo == hi:
        return np.broadcast_to(v[:1].copy(), v.shape)
    if lo >= _I16.min and hi <= _I16.max:
        return v.astype(np.int16)
    return v


class WindowMaxima:
    """(index, max_ns, samples) per window, sorted by index; three integer arrays
    (int32 where the values fit, else int64: convert before multiplying), read-only
    where compacted: a consecutive index is one range shared by every channel, a
    samples column that holds one count is a zero-stride view of it (else int16 where
    the counts fit). A week at 1 kHz of 128 CPUs: 310 MB instead of 929 MB."""

    __slots__ = ("__weakref__", "index", "max_ns", "samples")

    def __init__(self, index: Any = (), max_ns: Any = (), samples: Any = ()) -> None:
        self.index = _shared_index(_column(index))
        self.max_ns = _column(max_ns)
        self.samples = _compact_samples(_column(samples))
        if not len(self.index) == len(self.max_ns) == len(self.samples):
            raise ValueError("window maxima columns differ in length")

    # construction -------------------------------------------------------------------
    @classmethod
    def of(cls, value: WindowMaxima | Iterable[Any] | None) -> WindowMaxima:
        """A WindowMaxima from itself, a list of (index, max_ns, samples) or None."""
        if isinstance(value, WindowMaxima):
            return value
        if value is None:
            return cls()
        rows = value if isinstance(value, list | tuple) else list(value)
        if not rows:
            return cls()
        try:
            arr = np.asarray(rows, dtype=np.int64)
        except (TypeError, ValueError, OverflowError) as exc:
            raise RtlabError(f"window maxima are not integer triples: {exc}") from None
        if arr.ndim != 2 or arr.shape[1] != 3:
            raise RtlabError("window maxima must be [index, max_ns, samples] triples")
        return cls(arr[:, 0], arr[:, 1], arr[:, 2])

    @classmethod
    def from_mapping(cls, acc: dict[int, Any]) -> WindowMaxima:
        """From {index: (max_ns, samples)} (any order)."""
        if not acc:
            return cls()
        keys = np.fromiter(acc.keys(), dtype=np.int64, count=len(acc))
        order = np.argsort(keys, kind="stable")
        vals = np.asarray(list(acc.values()), dtype=np.int64).reshape(len(acc), 2)
        return cls(keys[order], vals[order, 0], vals[order, 1])

    # serial forms -----------------------------------------------------------------------
    def to_json(self) -> list[list[int]]:
        return np.stack([self.index, self.max_ns, self.samples], axis=1).tolist()

    def pack(self) -> dict[str, Any]:
        return {"enc": PACKED_ENC, "n": len(self),
                "index": _pack_column(self.index, True),
                "max_ns": _pack_column(self.max_ns, False),
                "samples": _pack_column(self.samples, True)}

    @classmethod
    def load(cls, value: Any) -> WindowMaxima:
        """From either serial form (a list of triples or the packed dict)."""
        if isinstance(value, dict):
            if value.get("enc") != PACKED_ENC:
                raise RtlabError(f"unknown window maxima encoding {value.get('enc')!r}")
            n = value.get("n")
            if not isinstance(n, int) or n < 0:
                raise RtlabError("window maxima: bad count")
            cols = [_unpack_column(value.get(c), n, c != "max_ns", c) for c in _COLUMNS]
            return cls(*cols)
        return cls.of(value)

    # sequence behaviour ---------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.index)

    def __bool__(self) -> bool:
        return len(self.index) > 0

    def __iter__(self) -> Iterator[tuple[int, int, int]]:
        return zip(self.index.tolist(), self.max_ns.tolist(), self.samples.tolist(),
                   strict=True)

    @overload
    def __getitem__(self, i: int) -> tuple[int, int, int]: ...
    @overload
    def __getitem__(self, i: slice) -> WindowMaxima: ...

    def __getitem__(self, i: int | slice) -> tuple[int, int, int] | WindowMaxima:
        if isinstance(i, slice):
            return WindowMaxima(self.index[i], self.max_ns[i], self.samples[i])
        return int(self.index[i]), int(self.max_ns[i]), int(self.samples[i])

    def __eq__(self, other: object) -> bool:
        if isinstance(other, list | tuple):
            other = WindowMaxima.of(list(other)) if other else WindowMaxima()
        if not isinstance(other, WindowMaxima):
            return NotImplemented
        return (np.array_equal(self.index, other.index)
                and np.array_equal(self.max_ns, other.max_ns)
                and np.array_equal(self.samples, other.samples))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"WindowMaxima(n={len(self)})"

    @property
    def nbytes(self) -> int:
        """Bytes the columns take (a zero-stride column: one value; the shared index
        counted in full)."""
        return sum(int(c.itemsize if c.strides == (0,) else c.nbytes)
                   for c in (self.index, self.max_ns, self.samples))


WINDOW_HIST_ENC = "csr-shuffle-zlib-v1"


class WindowHist:
    """Per window, the sum of its values and a coarse log-linear histogram (engine
    `window_hist`, docs/engine-output.md): sub_bits 2 by default, so 4 buckets per power
    of two. Sparse rows (CSR): the buckets of window i are ``bucket[ptr[i]:ptr[i+1]]``
    with their counts. Used by the comparisons to measure how strongly samples depend on
    each other (docs/report.md#comparisons); absent (None on the channel) for runs of
    older engines and for imports.

    Serial forms: readable ``{"sub_bits": S, "windows": [[index, sum_ns, [[bucket,
    count], ...]], ...]}`` (the engine's), and packed for the store (`enc`)."""

    __slots__ = ("bucket", "count", "index", "ptr", "sub_bits", "sum_ns")

    def __init__(self, sub_bits: int, index: Any, sum_ns: Any, ptr: Any, bucket: Any,
                 count: Any) -> None:
        self.sub_bits = int(sub_bits)
        self.index = np.asarray(index, dtype=np.int64).reshape(-1)
        self.sum_ns = np.asarray(sum_ns, dtype=np.int64).reshape(-1)
        self.ptr = np.asarray(ptr, dtype=np.int64).reshape(-1)
        self.bucket = np.asarray(bucket, dtype=np.int64).reshape(-1)
        self.count = np.asarray(count, dtype=np.int64).reshape(-1)
        n = len(self.index)
        if (len(self.sum_ns) != n or len(self.ptr) != n + 1 or self.ptr[0] != 0
                or len(self.bucket) != len(self.count) or self.ptr[-1] != len(self.bucket)
                or np.any(np.diff(self.ptr) < 0)):
            raise RtlabError("per-window histograms are malformed")
        if not 0 <= self.sub_bits <= 8:
            raise RtlabError(f"per-window histograms: bad sub_bits {self.sub_bits}")

    def __len__(self) -> int:
        return len(self.index)

    def __repr__(self) -> str:
        return f"WindowHist(n={len(self)}, sub_bits={self.sub_bits})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, WindowHist):
            return NotImplemented
        return self.sub_bits == other.sub_bits and all(
            np.array_equal(getattr(self, k), getattr(other, k))
            for k in ("index", "sum_ns", "ptr", "bucket", "count"))

    __hash__ = None  # type: ignore[assignment]

    @classmethod
    def from_rows(cls, sub_bits: int, rows: dict[int, tuple[int, list[Any]]]
                  ) -> WindowHist:
        """From {index: (sum_ns, [[bucket, count], ...])} (any order)."""
        keys = sorted(rows)
        sums, ptr, buckets, counts = [], [0], [], []
        for k in keys:
            s, pairs = rows[k]
            sums.append(int(s))
            for b, c in pairs:
                buckets.append(int(b))
                counts.append(int(c))
            ptr.append(len(buckets))
        return cls(sub_bits, keys, sums, ptr, buckets, counts)

    @classmethod
    def from_dense(cls, sub_bits: int, index: Any, sum_ns: Any, dense: np.ndarray
                   ) -> WindowHist:
        """From a (windows x buckets) count matrix (simulations, tests)."""
        dense = np.asarray(dense)
        rows, cols = np.nonzero(dense)
        ptr = np.zeros(dense.shape[0] + 1, dtype=np.int64)
        np.cumsum(np.bincount(rows, minlength=dense.shape[0]), out=ptr[1:])
        return cls(sub_bits, index, sum_ns, ptr, cols, dense[rows, cols])

    @classmethod
    def from_samples(cls, sub_bits: int, body: np.ndarray, index: Any = None) -> WindowHist:
        """From a (windows x samples-per-window) matrix of values in ns, the way the
        engine records them (simulations, tests): values of 2^40 ns and more in the
        last bucket (docs/engine-output.md)."""

        body = np.asarray(body, dtype=np.int64)
        w = body.shape[0]
        last = int(index_array(np.array([(1 << 40) - 1]), sub_bits)[0])
        ci = (np.minimum(index_array(body, sub_bits), last) if body.size
              else np.zeros(body.shape, np.int64))
        k = int(ci.max()) + 1 if ci.size else 1
        flat = np.bincount((np.arange(w)[:, None] * k + ci).reshape(-1), minlength=w * k)
        return cls.from_dense(sub_bits, np.arange(w) if index is None else index,
                              body.sum(axis=1), flat.reshape(w, k))

    def samples(self) -> np.ndarray:
        """The samples each window's histogram holds."""
        return np.add.reduceat(self.count, self.ptr[:-1]) * (np.diff(self.ptr) > 0) \
            if len(self.count) else np.zeros(len(self), dtype=np.int64)

    def dense(self) -> np.ndarray:
        """(windows x buckets) counts, buckets up to the highest one used."""
        nb = int(self.bucket.max()) + 1 if len(self.bucket) else 1
        out = np.zeros((len(self), nb), dtype=np.int64)
        rows = np.repeat(np.arange(len(self)), np.diff(self.ptr))
        np.add.at(out, (rows, self.bucket), self.count)
        return out

    def to_json(self) -> dict[str, Any]:
        return {"sub_bits": self.sub_bits, "windows": [
            [int(self.index[i]), int(self.sum_ns[i]),
             [[int(b), int(c)] for b, c in zip(self.bucket[self.ptr[i]:self.ptr[i + 1]],
                                               self.count[self.ptr[i]:self.ptr[i + 1]],
                                               strict=True)]]
            for i in range(len(self))]}

    def pack(self) -> dict[str, Any]:
        return {"enc": WINDOW_HIST_ENC, "sub_bits": self.sub_bits, "n": len(self),
                "nnz": len(self.bucket),
                "index": _pack_column(self.index, True),
                "sum_ns": _pack_column(self.sum_ns, False),
                "ptr": _pack_column(self.ptr, True),
                "bucket": _pack_column(self.bucket, False),
                "count": _pack_column(self.count, False)}

    @classmethod
    def load(cls, value: Any) -> WindowHist | None:
        """From either serial form; None for None."""
        if value is None:
            return None
        if not isinstance(value, dict):
            raise RtlabError("per-window histograms: expected an object")
        if value.get("enc") == WINDOW_HIST_ENC:
            n, nnz = value.get("n"), value.get("nnz")
            if not isinstance(n, int) or not isinstance(nnz, int) or n < 0 or nnz < 0:
                raise RtlabError("per-window histograms: bad count")
            return cls(int(value.get("sub_bits", 2)),
                       _unpack_column(value.get("index"), n, True, "index"),
                       _unpack_column(value.get("sum_ns"), n, False, "sum_ns"),
                       _unpack_column(value.get("ptr"), n + 1, True, "ptr"),
                       _unpack_column(value.get("bucket"), nnz, False, "bucket"),
                       _unpack_column(value.get("count"), nnz, False, "count"))
        if "enc" in value:
            raise RtlabError(f"unknown per-window histogram encoding {value.get('enc')!r}")
        try:
            rows = {int(w[0]): (int(w[1]), list(w[2])) for w in value.get("windows") or []}
            return cls.from_rows(int(value.get("sub_bits", 2)), rows)
        except (TypeError, ValueError, IndexError) as exc:
            raise RtlabError(f"per-window histograms are malformed: {exc}") from None
