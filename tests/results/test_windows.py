# SPDX-License-Identifier: MIT
"""Window maxima as arrays: both serial forms, damage, and the store round trip."""

from __future__ import annotations

import json
import zlib

import numpy as np
import pytest

from rtlab.errors import RtlabError
from rtlab.probes.registry import shape as probe_shape
from rtlab.results.histogram import LogLinHistogram
from rtlab.results.model import Channel, Phase, RunResult, load_result
from rtlab.results.store import Store
from rtlab.results.windows import PACKED_ENC, WindowMaxima


def sample(n: int = 5000, seed: int = 1) -> WindowMaxima:
    rng = np.random.default_rng(seed)
    idx = np.arange(3, 3 + n, dtype=np.int64)
    idx[n // 2:] += 7  # a gap (windows lost)
    return WindowMaxima(idx, rng.integers(1_000, 5_000_000_000, n),
                        rng.integers(990, 1010, n))


def test_behaves_like_the_list_of_triples() -> None:
    w = WindowMaxima.of([(0, 20, 5), (1, 18, 4)])
    assert len(w) == 2 and w and not WindowMaxima()
    assert list(w) == [(0, 20, 5), (1, 18, 4)]
    assert w[1] == (1, 18, 4) and w[-1] == (1, 18, 4)
    assert w == [(0, 20, 5), (1, 18, 4)] and w == [[0, 20, 5], [1, 18, 4]]
    assert w != [(0, 20, 5)] and WindowMaxima() == []
    assert list(w[1:]) == [(1, 18, 4)]
    assert all(isinstance(x, int) for x in w[0])


def test_from_mapping_sorts_by_index() -> None:
    w = WindowMaxima.from_mapping({5: [7, 1], 2: (9, 3), 4: [1, 1]})
    assert list(w) == [(2, 9, 3), (4, 1, 1), (5, 7, 1)]


def test_channel_stores_any_assigned_list_as_arrays() -> None:
    ch = Channel("cpu0", windows=[(0, 5, 1)])
    assert isinstance(ch.windows, WindowMaxima)
    ch.windows = []
    assert isinstance(ch.windows, WindowMaxima) and not ch.windows


@pytest.mark.parametrize("n", [0, 1, 5000])
def test_packed_and_json_forms_round_trip(n: int) -> None:
    w = sample(n) if n else WindowMaxima()
    packed = w.pack()
    assert packed["enc"] == PACKED_ENC and packed["n"] == n
    back = WindowMaxima.load(json.loads(json.dumps(packed)))
    assert back == w
    assert WindowMaxima.load(w.to_json()) == w


def test_packed_form_is_compact() -> None:
    w = sample(100_000)
    text = json.dumps(w.pack())
    # 24 raw bytes a window; random 33-bit maxima need ~5 of them, the rest compresses
    assert len(text) < 10 * len(w)
    assert len(json.dumps(w.to_json())) > 2 * len(text)


@pytest.mark.parametrize("damage", [
    {"enc": "gzip-v9"},
    {"n": -1},
    {"n": 4999},
    {"max_ns": "@@not base64@@"},
    {"samples": "eJw="},  # a truncated zlib stream
])
def test_damaged_packed_form_is_a_clear_error(damage: dict) -> None:
    packed = {**sample(5000).pack(), **damage}
    with pytest.raises(RtlabError):
        WindowMaxima.load(packed)


def test_list_form_must_hold_triples() -> None:
    with pytest.raises(RtlabError, match="triples"):
        WindowMaxima.of([[1, 2]])
    with pytest.raises(RtlabError):
        WindowMaxima.of([["a", 2, 3]])


def _result(run_id: str, w: WindowMaxima) -> RunResult:
    """A consistent result around `w`: every sample at 1 ns but one at the largest window
    maximum (the store refuses results whose numbers contradict each other)."""
    total, top = int(w.samples.sum()), int(w.max_ns.max())
    hist = LogLinHistogram()
    hist.add(1, total - 1)
    hist.add(top)
    ch = Channel("cpu1", cpu=1, samples=total, min_ns=1, max_ns=top, sum_ns=total - 1 + top,
                 hist=hist, windows=w, window_ns=1_000_000_000)
    return RunResult(run_id=run_id, status="completed", probe="timer",
                     phases=[Phase("main", [ch], len(w) * 1_000_000_000)])


def test_store_keeps_windows_packed_and_reads_them_back(tmp_path) -> None:
    w = sample(20_000)
    store = Store.open(str(tmp_path / "s.db"))
    try:
        store.add(_result("abcd0001", w), probe_shape)
        back = store.get("abcd0001").phases[0].channels[0].windows
        assert isinstance(back, WindowMaxima) and back == w
    finally:
        store.close()


def test_results_stored_before_packing_still_load() -> None:
    w = sample(50)
    d = _result("abcd0002", w).to_dict()  # the readable list form, as older stores hold
    assert isinstance(d["phases"][0]["channels"][0]["windows"], list)
    blob = zlib.decompress(zlib.compress(json.dumps(d).encode()))
    assert load_result(json.loads(blob)).phases[0].channels[0].windows == w


def test_exported_json_keeps_the_readable_triples() -> None:
    d = _result("abcd0003", sample(3)).to_dict()
    wins = d["phases"][0]["channels"][0]["windows"]
    assert len(wins) == 3 and all(isinstance(v, int) for row in wins for v in row)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.float64])
def test_downsample_keeps_every_block_max_for_narrow_columns(dtype) -> None:
    # regression: padding with the int64 minimum overflowed int32 window columns
    from rtlab.report.plots import downsample_max

    y = np.arange(10_007, dtype=dtype) % 97
    x = np.arange(len(y), dtype=np.float64)
    xs, ys = downsample_max(x, y, points=100)
    assert len(ys) <= 100 and ys.max() == 96 and ys.dtype == y.dtype
    assert np.all(y[xs.astype(int)] == ys)


def test_windows_of_a_long_run_are_narrow_and_render() -> None:
    from rtlab.analysis.window_maxima import merged_window_series

    n = 86_400
    w = WindowMaxima(np.arange(n), np.full(n, 50_000), np.full(n, 1000))
    assert w.max_ns.dtype == np.int32 and w.nbytes == 8 * n + 4
    big = WindowMaxima([0, 1], [5_000_000_000, 1], [1, 1])  # a 5 s stall needs int64
    assert big.max_ns.dtype == np.int64 and big[0][1] == 5_000_000_000
    chans = [Channel(f"cpu{i}", cpu=i, windows=w, window_ns=1_000_000_000) for i in range(2)]
    idx, val, window_ns = merged_window_series(chans)
    assert len(idx) == n and int(val.max()) == 50_000 and window_ns == 1_000_000_000


@pytest.mark.parametrize("kind", ["steady", "gaps", "jitter", "far", "single"])
def test_packed_windows_load_compact_and_equal(kind: str) -> None:
    """A week of 128 CPUs is 387 packed columns to load (issue 28): a consecutive index
    loads as the shared read-only range, a column of one count as a zero-stride view;
    anything else as before; always equal to what was packed."""
    rng = np.random.default_rng(len(kind))
    n = 5_000
    index, samples = np.arange(n) + 17, np.full(n, 1000)
    if kind == "gaps":
        index = np.sort(rng.choice(4 * n, n, replace=False))
    if kind == "jitter":
        samples = rng.integers(995, 1005, n)
    if kind == "far":  # beyond int32: int64 columns (the slow path, shared all the same)
        index = np.arange(n) + 2**33
    if kind == "single":
        index, samples = index[:1], samples[:1]
    w = WindowMaxima(index, rng.integers(1, 10**6, len(index)), samples)
    back = WindowMaxima.load(w.pack())
    assert back == w and back.to_json() == w.to_json()
    assert (back.samples.strides == (0,)) == (kind != "jitter")
    shared = kind in ("steady", "jitter", "far")
    assert (not back.index.flags.writeable) == shared
    if shared:
        other = WindowMaxima.load(w.pack())
        assert other.index is back.index  # one range for every channel
    if kind != "jitter":
        with pytest.raises(ValueError):  # compact columns are read-only, never changed
            back.samples[0] = 1
