# SPDX-License-Identifier: MIT
"""The Prometheus exporter, scraped over real HTTP and read with the official parser."""

from __future__ import annotations

import errno
import gzip
import random
import socket
import threading
import time
import urllib.error
import urllib.request
from dataclasses import replace

import pytest
from prometheus_client.core import HistogramMetricFamily
from prometheus_client.openmetrics.parser import (
    text_string_to_metric_families as om_families,
)
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.utils import floatToGoString

from rtlab.errors import RtlabError, UsageError
from rtlab.exitcodes import ExitCode
from rtlab.monitor.exporter import (
    BOUNDS_NS,
    CHANNEL_LABELS,
    RebinCache,
    _slot_table,
    channel_labels,
    families,
    rebin,
)
from rtlab.monitor.http import DEFAULT_HOST, DEFAULT_PORT, MetricsServer, parse_listen
from rtlab.monitor.live import RECENT_S, ChannelLive, LiveState, LiveView
from rtlab.results.histogram import SUB_BITS, LogLinHistogram, bucket_bounds, bucket_count

Key = tuple[str, frozenset[tuple[str, str]]]


# helpers ------------------------------------------------------------------------------
def feed(live: LiveState, board: str, channel: str, cpu: int | None, values: list[int], *,
         missed: int = 0, now: float | None = None, probe: str = "timer") -> None:
    """One snapshot of `values` (ns) into the live state, as a watcher would add it."""
    t = time.time() if now is None else now
    hist = LogLinHistogram.from_values(values)
    live.update(board, channel, cpu, probe, samples=len(values), missed=missed,
                sum_ns=sum(values), buckets={b.index: b.count for b in hist.buckets()},
                windows=[(t, max(values))] if values else [],
                min_ns=min(values) if values else None,
                max_ns=max(values) if values else None, now=t)


def get(url: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


# what Prometheus 2.x asks for at every scrape
PROMETHEUS_HEADERS = {
    "Accept": "application/openmetrics-text;version=1.0.0,application/openmetrics-text;"
              "version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1",
    "Accept-Encoding": "gzip"}
# a client that accepts nothing but OpenMetrics
OPENMETRICS_ONLY = {"Accept": "application/openmetrics-text;version=1.0.0",
                    "Accept-Encoding": "gzip"}


def scrape(server: MetricsServer, how: str = "text") -> dict[Key, float]:
    """Every sample of one scrape, parsed by the official parser: asked for plainly
    ("text"), as Prometheus 2.x asks ("prometheus": it gets the text format, gzipped,
    which it accepts beside OpenMetrics), or by an OpenMetrics-only client
    ("openmetrics": OpenMetrics, gzipped)."""
    ask = {"text": None, "prometheus": PROMETHEUS_HEADERS,
           "openmetrics": OPENMETRICS_ONLY}[how]
    status, headers, body = get(server.url, ask)
    assert status == 200
    if how == "openmetrics":
        assert headers["Content-Encoding"] == "gzip"
        assert headers["Content-Type"].startswith("application/openmetrics-text")
        parsed = om_families(gzip.decompress(body).decode())
    elif how == "prometheus":
        assert headers["Content-Encoding"] == "gzip"
        assert headers["Content-Type"].startswith("text/plain; version=0.0.4")
        parsed = text_string_to_metric_families(gzip.decompress(body).decode())
    else:
        assert "Content-Encoding" not in headers
        parsed = text_string_to_metric_families(body.decode())
    out: dict[Key, float] = {}
    for fam in parsed:
        for s in fam.samples:
            key = (s.name, frozenset(s.labels.items()))
            assert key not in out, f"duplicate sample {key}"
            out[key] = s.value
    return out


def lab(board: str, cpu: str, probe: str = "timer", **more: str) -> frozenset:
    return frozenset({"board": board, "cpu": cpu, "probe": probe, **more}.items())


def buckets_of(samples: dict[Key, float], labels: frozenset) -> list[tuple[float, float]]:
    """(le, cumulative count) of one histogram, in increasing le."""
    base = dict(labels)
    out = []
    for (name, ls), v in samples.items():
        d = dict(ls)
        le = d.pop("le", None)
        if name == "rtlab_latency_seconds_bucket" and d == base:
            out.append((float(le), v))
    return sorted(out)


@pytest.fixture
def live() -> LiveState:
    state = LiveState()
    rng = random.Random(7)
    state.set_board("rpi4", up=True, probe_ok=True, last_seen=time.time(), segments=3,
                    gaps=2, gap_seconds=12.5, store_pending=1)
    state.set_board("imx8", up=False, probe_ok=False, reason="ssh: connection refused")
    feed(state, "rpi4", "cpu1", 1, [rng.randint(2_000, 80_000) for _ in range(5000)],
         missed=4)
    feed(state, "rpi4", "cpu2", 2, [999, 1000, 100, 10 * 10**9, 4_000])
    state.channel("imx8", "cpu0", 0)  # known, never measured
    feed(state, "imx8", "irq", None, [30_000, 31_000], probe="event")
    return state


@pytest.fixture
def server(live: LiveState):
    srv = MetricsServer(live, "127.0.0.1", 0)
    srv.start()
    yield srv
    srv.stop()


# the histogram ------------------------------------------------------------------------
def test_histogram_is_cumulative_and_counts_add_up(server, live):
    s = scrape(server)
    for ch in live.view().channels:
        cpu = ch.channel if ch.cpu is None else str(ch.cpu)
        labels = lab(ch.board, cpu, ch.probe)
        b = buckets_of(s, labels)
        assert [le for le, _ in b] == [x / 1e9 for x in BOUNDS_NS] + [float("inf")]
        counts = [c for _, c in b]
        assert counts == sorted(counts), "buckets are cumulative"
        assert counts[-1] == s[("rtlab_latency_seconds_count", labels)] == ch.samples
        assert s[("rtlab_samples_total", labels)] == ch.samples
        assert s[("rtlab_latency_seconds_sum", labels)] == pytest.approx(ch.sum_ns / 1e9)
        assert s[("rtlab_missed_periods_total", labels)] == ch.missed


def test_rebinning_at_the_bounds(server):
    """999 ns is <= 1 µs for sure; 1000 ns shares its fine bucket (1000-1003 ns) with
    values above 1 µs, so it is counted at 2 µs (never under-stating the tail); 10 s
    shares its fine bucket with values above 10 s: only +Inf holds it."""
    b = dict(buckets_of(scrape(server), lab("rpi4", "2")))
    assert b[1e-06] == 2  # 100 ns and 999 ns
    assert b[2e-06] == 3  # + 1000 ns
    assert b[5e-06] == 4  # + 4 µs
    assert b[10.0] == 4
    assert b[float("inf")] == 5  # + 10 s


def test_every_fine_bucket_goes_to_the_first_bound_above_its_largest_value():
    table = _slot_table(SUB_BITS)
    bounds = (*BOUNDS_NS, float("inf"))
    for index in range(bucket_count(SUB_BITS)):
        lo, width = bucket_bounds(index)
        hi = lo + width - 1
        slot = table[index]
        assert bounds[slot] >= hi
        assert slot == 0 or bounds[slot - 1] < hi


def test_rebinning_never_under_states_the_tail():
    rng = random.Random(1)
    values = [int(rng.lognormvariate(10, 2)) for _ in range(20000)]
    hist = LogLinHistogram.from_values(values)
    per_slot = rebin({b.index: b.count for b in hist.buckets()}, SUB_BITS)
    cum = 0
    for bound, n in zip(BOUNDS_NS, per_slot, strict=False):
        cum += n
        at_most = sum(v <= bound for v in values)
        assert cum <= at_most  # counted below a bound: certainly below it
        assert cum >= sum(v <= bound * (1 - 2**-SUB_BITS) for v in values)
    assert sum(per_slot) == len(values)


def test_empty_channel(server):
    s = scrape(server)
    labels = lab("imx8", "0")
    assert all(c == 0 for _, c in buckets_of(s, labels))
    assert s[("rtlab_latency_seconds_count", labels)] == 0
    assert s[("rtlab_latency_seconds_sum", labels)] == 0
    assert s[("rtlab_samples_total", labels)] == 0
    assert ("rtlab_latency_max_seconds", labels) not in s
    assert ("rtlab_latency_recent_max_seconds", labels) not in s


def test_labels_cpu_number_or_channel_name_and_probe(server):
    s = scrape(server)
    assert s[("rtlab_samples_total", lab("imx8", "irq", "event"))] == 2
    assert s[("rtlab_latency_max_seconds", lab("imx8", "irq", "event"))] == 31e-6
    assert s[("rtlab_latency_max_seconds", lab("rpi4", "2"))] == 10.0


# every value, and none stale (the exporter keeps re-binned histograms between scrapes) --
def expected(ch: ChannelLive) -> dict[Key, float]:
    """The samples one channel should export, computed here from its fine buckets without
    the exporter's re-binning table: each fine bucket counts at the first bound at or
    above the largest value it holds."""
    labels = lab(ch.board, ch.channel if ch.cpu is None else str(ch.cpu), ch.probe)
    base = dict(labels)
    his = [(lo + width - 1, n) for lo, width, n in
           ((*bucket_bounds(i, ch.sub_bits), n) for i, n in ch.buckets.items())]
    out: dict[Key, float] = {}
    for bound in (*BOUNDS_NS, float("inf")):
        le = "+Inf" if bound == float("inf") else repr(bound / 1e9)
        out[("rtlab_latency_seconds_bucket", frozenset({**base, "le": le}.items()))] = \
            sum(n for hi, n in his if hi <= bound)
    out[("rtlab_latency_seconds_count", labels)] = sum(ch.buckets.values())
    out[("rtlab_latency_seconds_sum", labels)] = ch.sum_ns / 1e9
    out[("rtlab_samples_total", labels)] = ch.samples
    out[("rtlab_missed_periods_total", labels)] = ch.missed
    if ch.samples or ch.max_ns:
        out[("rtlab_latency_max_seconds", labels)] = ch.max_ns / 1e9
    recent = ch.recent_max()
    if recent is not None:
        out[("rtlab_latency_recent_max_seconds", labels)] = recent / 1e9
    if ch.updated:
        out[("rtlab_channel_last_update_timestamp_seconds", labels)] = ch.updated
    return out


def channel_samples(s: dict[Key, float]) -> dict[Key, float]:
    """The per-channel samples of a scrape, with `le` written as `expected` writes it
    (the parsers give it as the exporter wrote it)."""
    out = {}
    for (name, labels), v in s.items():
        if {k for k, _ in labels} - {"le"} != set(CHANNEL_LABELS):
            continue
        d = dict(labels)
        if "le" in d and d["le"] != "+Inf":
            d["le"] = repr(float(d["le"]))
        out[(name, frozenset(d.items()))] = v
    return out


def assert_matches(s: dict[Key, float], live: LiveState) -> None:
    want: dict[Key, float] = {}
    for ch in live.view().channels:
        want.update(expected(ch))
    assert channel_samples(s) == want  # exactly: the exporter writes floats by repr


def several_cpus() -> LiveState:
    live = LiveState()
    rng = random.Random(11)
    for board, cpus in (("b1", 6), ("b2", 3)):
        live.set_board(board, up=True, probe_ok=True, last_seen=time.time())
        for cpu in range(cpus):
            feed(live, board, f"cpu{cpu}", cpu,
                 [int(rng.lognormvariate(10, 1.2)) for _ in range(3000)], missed=cpu)
    feed(live, "b2", "irq", None, [40_000, 2_000_000], probe="event")
    live.channel("b2", "cpu9", 9)  # known, never measured
    return live


@pytest.mark.parametrize("how", ["text", "prometheus", "openmetrics"])
def test_every_value_and_a_change_between_scrapes_shows_in_the_next(how):
    live = several_cpus()
    with MetricsServer(live, "127.0.0.1", 0) as srv:
        first = scrape(srv, how)
        assert_matches(first, live)
        for _ in range(2):  # unchanged: the same values (and the cache keeps copies)
            assert channel_samples(scrape(srv, how)) == channel_samples(first)
        # a snapshot into fine buckets a CPU had (no new key: same length), one into new
        # ones, a first one into a CPU never measured
        b1 = {ch.channel: ch for ch in live.view().channels if ch.board == "b1"}
        had = max(b1["cpu2"].buckets)
        live.update("b1", "cpu2", 2, samples=1, missed=0, sum_ns=7, buckets={had: 1},
                    windows=[], min_ns=None, max_ns=None, now=time.time())
        feed(live, "b1", "cpu4", 4, [3 * 10**9, 12_345])
        feed(live, "b2", "cpu9", 9, [5_000])
        # one count moved from the body to the tail: samples, sum, the number of fine
        # buckets and the update time all unchanged
        ch = b1["cpu0"]
        body, tail = max(ch.buckets, key=ch.buckets.__getitem__), max(ch.buckets)
        moved = {**ch.buckets, body: ch.buckets[body] - 1, tail: ch.buckets[tail] + 1}
        assert expected(replace(ch, buckets=moved)) != expected(ch)
        live.seed([replace(ch, buckets=moved)], [])
        second = scrape(srv, how)
        assert_matches(second, live)
        for cpu in ("0", "2", "4"):
            assert buckets_of(first, lab("b1", cpu)) != buckets_of(second, lab("b1", cpu))
        assert second[("rtlab_samples_total", lab("b2", "9"))] == 1
        assert buckets_of(first, lab("b1", "1")) == buckets_of(second, lab("b1", "1"))


def test_histogram_samples_are_the_ones_add_metric_makes():
    """The exporter makes the histogram's samples itself (faster): the same ones the
    library's `HistogramMetricFamily.add_metric` makes, cached or not."""
    view = several_cpus().view()
    ref = HistogramMetricFamily("rtlab_latency_seconds", "", labels=CHANNEL_LABELS,
                                unit="seconds")
    for ch in view.channels:
        want = expected(ch)
        labels = channel_labels(ch)
        pairs = []
        for bound in (*BOUNDS_NS, float("inf")):
            le = "+Inf" if bound == float("inf") else repr(bound / 1e9)
            key = frozenset({**dict(zip(CHANNEL_LABELS, labels, strict=True)),
                             "le": le}.items())
            pairs.append((floatToGoString(bound / 1e9), want[("rtlab_latency_seconds_bucket",
                                                              key)]))
        ref.add_metric(labels, pairs, ch.sum_ns / 1e9)
    cache = RebinCache()
    for fams in (families(view), families(view, cache=cache), families(view, cache=cache)):
        hist = fams[0]
        assert hist.name == "rtlab_latency_seconds"
        assert hist.samples == ref.samples
        assert [type(s.value) for s in hist.samples] == [type(s.value) for s in ref.samples]


def test_cache_reuses_only_equal_fine_buckets_even_changed_in_place():
    """A channel unchanged over two scrapes is re-binned no more; the cache compares the
    fine buckets with a copy of its own, so a caller's dict changed in place (same
    object, same keys, same samples and update time) is seen as changed."""
    view = several_cpus().view()
    keys = [tuple(channel_labels(ch)) for ch in view.channels]
    cache = RebinCache()
    cache.counts(view.channels, keys)
    second = cache.counts(view.channels, keys)
    third = cache.counts(view.channels, keys)
    assert all(a is b for a, b in zip(second, third, strict=True))  # reused
    ch = view.channels[0]
    body = max(ch.buckets, key=ch.buckets.__getitem__)
    ch.buckets[body] += 1000
    hist = families(view, cache=cache)[0]
    count = [s.value for s in hist.samples if s.name == "rtlab_latency_seconds_count"]
    assert count[0] == sum(ch.buckets.values()) == ch.samples + 1000
    assert hist.samples == families(view)[0].samples


# maxima -------------------------------------------------------------------------------
class ShiftedClock(LiveState):
    """A live state whose views are taken `shift` seconds later than now."""

    shift = 0.0

    def view(self) -> LiveView:
        v = super().view()
        return replace(v, now=v.now + self.shift)


def test_recent_max_appears_then_disappears_after_the_window():
    live = ShiftedClock()
    t = time.time()
    feed(live, "b", "cpu0", 0, [5_000, 7_000], now=t)
    feed(live, "b", "cpu0", 0, [6_000], now=t + 1)
    labels = lab("b", "0")
    with MetricsServer(live, "127.0.0.1", 0) as srv:
        s = scrape(srv)
        assert s[("rtlab_latency_recent_max_seconds", labels)] == 7e-6
        assert s[("rtlab_latency_max_seconds", labels)] == 7e-6
        live.shift = RECENT_S + 0.5  # the 7 µs window ended more than RECENT_S ago
        s = scrape(srv)
        assert s[("rtlab_latency_recent_max_seconds", labels)] == 6e-6
        live.shift = RECENT_S + 2
        s = scrape(srv)
        assert ("rtlab_latency_recent_max_seconds", labels) not in s
        assert s[("rtlab_latency_max_seconds", labels)] == 7e-6  # never lowered
        assert s[("rtlab_latency_recent_window_seconds", frozenset())] == RECENT_S


def test_families_use_the_views_now():
    live = LiveState()
    t = time.time()
    feed(live, "b", "cpu3", 3, [9_000], now=t)
    view = replace(live.view(), now=t + 1)
    fams = {f.name: f for f in families(view)}
    assert [s.value for s in fams["rtlab_latency_recent_max_seconds"].samples] == [9e-6]
    view = replace(view, now=t + RECENT_S + 1)
    fams = {f.name: f for f in families(view)}
    assert fams["rtlab_latency_recent_max_seconds"].samples == []


# boards and the process ---------------------------------------------------------------
def test_board_metrics(server, live):
    s = scrape(server)
    up = frozenset({"board": "rpi4"}.items())
    down = frozenset({"board": "imx8"}.items())
    assert s[("rtlab_board_up", up)] == 1 and s[("rtlab_board_up", down)] == 0
    assert s[("rtlab_probe_healthy", up)] == 1 and s[("rtlab_probe_healthy", down)] == 0
    assert s[("rtlab_board_gaps_total", up)] == 2
    assert s[("rtlab_board_gap_seconds_total", up)] == 12.5
    assert s[("rtlab_board_segments_total", up)] == 3
    assert s[("rtlab_board_store_pending_segments", up)] == 1
    assert ("rtlab_board_last_seen_timestamp_seconds", up) in s
    assert ("rtlab_board_last_seen_timestamp_seconds", down) not in s
    live.set_board("imx8", up=True)
    live.set_board("rpi4", up=False)
    s = scrape(server)
    assert s[("rtlab_board_up", up)] == 0 and s[("rtlab_board_up", down)] == 1


def test_build_info_and_self_metrics(server):
    from rtlab import __version__

    s = scrape(server)
    assert s[("rtlab_build_info", frozenset({"version": __version__}.items()))] == 1
    assert s[("rtlab_exporter_scrapes_total", frozenset())] == 0  # those before this one
    assert ("rtlab_exporter_scrape_duration_seconds", frozenset()) not in s
    s = scrape(server)
    assert s[("rtlab_exporter_scrapes_total", frozenset())] == 1
    assert 0 < s[("rtlab_exporter_scrape_duration_seconds", frozenset())] < 10
    assert ("process_resident_memory_bytes", frozenset()) in s


# HTTP -----------------------------------------------------------------------------------
def test_index_healthz_and_404(server):
    base = server.url.removesuffix("/metrics")
    status, headers, body = get(base + "/")
    assert status == 200 and b'href="/metrics"' in body
    assert headers["Content-Type"].startswith("text/html")
    assert get(base + "/healthz")[0:3:2] == (200, b"ok\n")
    assert get(base + "/nothing")[0] == 404
    assert get(base + "/metrics/extra")[0] == 404


@pytest.mark.parametrize(("accept", "fmt"), [
    (PROMETHEUS_HEADERS["Accept"], "text/plain"),  # Prometheus 2.x: OpenMetrics first
    ("text/plain;version=0.0.4;q=0.5,*/*;q=0.1", "text/plain"),
    ("application/openmetrics-text;version=1.0.0,*/*;q=0.1", "text/plain"),
    ("application/openmetrics-text;version=1.0.0,text/plain;q=0", "application/openmetrics"),
    ("application/openmetrics-text; version=1.0.0; charset=utf-8", "application/openmetrics"),
    ("", "text/plain"),
])
def test_the_text_format_whenever_the_client_accepts_it(server, accept, fmt):
    headers = {"Accept": accept} if accept else None
    status, got, _ = get(server.url, headers)
    assert status == 200 and got["Content-Type"].startswith(fmt)


def test_gzip_and_openmetrics(server):
    status, headers, body = get(server.url, {"Accept-Encoding": "gzip"})
    assert status == 200 and headers.get("Content-Encoding") == "gzip"
    assert b"rtlab_latency_seconds_bucket" in gzip.decompress(body)
    status, headers, body = get(server.url, {
        "Accept": "application/openmetrics-text; version=1.0.0; charset=utf-8"})
    assert headers["Content-Type"].startswith("application/openmetrics-text")
    names = {f.name: f.type for f in om_families(body.decode())}
    assert names["rtlab_latency_seconds"] == "histogram"
    assert names["rtlab_samples"] == "counter"
    assert names["rtlab_build"] == "info"


def test_gzip_is_the_same_answer_and_only_for_a_get(server):
    plain = get(server.url)[2].decode()
    status, headers, body = get(server.url, {"Accept-Encoding": "deflate, gzip;q=0.5"})
    assert status == 200 and headers["Content-Encoding"] == "gzip"
    assert headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
    assert int(headers["Content-Length"]) == len(body)

    def rtlab_lines(text: str) -> list[str]:  # without those that change at each scrape
        return [ln for ln in text.splitlines()
                if "process_" not in ln and "rtlab_exporter_" not in ln]

    assert rtlab_lines(gzip.decompress(body).decode()) == rtlab_lines(plain)
    assert "Content-Encoding" not in get(server.url, {"Accept-Encoding": "identity"})[1]
    req = urllib.request.Request(server.url, data=b"", method="POST",
                                 headers={"Accept-Encoding": "gzip"})
    with pytest.raises(urllib.error.HTTPError) as exc:
        urllib.request.urlopen(req, timeout=10)
    assert exc.value.code == 405 and "Content-Encoding" not in exc.value.headers


def test_default_address_is_this_machine_only():
    srv = MetricsServer(LiveState())
    assert (srv.host, srv.port) == (DEFAULT_HOST, DEFAULT_PORT) == ("127.0.0.1", 9477)


def test_port_in_use_is_one_clear_line():
    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", 0))
        blocker.listen()
        port = blocker.getsockname()[1]
        with pytest.raises(RtlabError) as exc:
            MetricsServer(LiveState(), "127.0.0.1", port).start()
    line = exc.value.one_line()
    assert "\n" not in line
    assert line.startswith(f"cannot listen on 127.0.0.1:{port}: the address is already in use")
    assert "--listen" in line
    assert exc.value.code == ExitCode.ERROR


def test_address_not_of_this_machine():
    addr = "198.51.100.7"  # TEST-NET-2: documentation only
    with socket.socket() as probe:
        try:
            probe.bind((addr, 0))
            pytest.skip(f"{addr} is local here")
        except OSError as e:
            assert e.errno == errno.EADDRNOTAVAIL
    with pytest.raises(RtlabError) as exc:
        MetricsServer(LiveState(), addr, 9477).start()
    assert exc.value.one_line().startswith(
        f"cannot listen on {addr}:9477: {addr} is not an address of this machine")


def test_ipv6_loopback():
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
    except OSError as exc:
        pytest.skip(f"no IPv6 loopback here: {exc}")
    with MetricsServer(LiveState(), "::1", 0) as srv:
        assert srv.address[0] == "::1"
        assert srv.url.startswith("http://[::1]:")
        assert get(srv.url)[0] == 200


def test_stop_releases_the_port(live):
    srv = MetricsServer(live, "127.0.0.1", 0)
    srv.start()
    port = srv.address[1]
    srv.stop()
    again = MetricsServer(live, "127.0.0.1", port)
    again.start()
    again.stop()


def test_concurrent_scrapes_while_the_watchers_write(server, live):
    stop = threading.Event()
    errors: list[BaseException] = []

    def writer() -> None:
        rng = random.Random(3)
        while not stop.is_set():
            for cpu in (1, 2):
                feed(live, "rpi4", f"cpu{cpu}", cpu,
                     [rng.randint(1_000, 500_000) for _ in range(50)])

    def scraper() -> None:
        try:
            for _ in range(15):
                s = scrape(server)
                for cpu in ("1", "2"):
                    labels = lab("rpi4", cpu)
                    counts = [c for _, c in buckets_of(s, labels)]
                    assert counts == sorted(counts)
                    assert counts[-1] == s[("rtlab_latency_seconds_count", labels)]
                    assert counts[-1] == s[("rtlab_samples_total", labels)]
        except BaseException as exc:  # reported to the main thread
            errors.append(exc)

    w = threading.Thread(target=writer)
    scrapers = [threading.Thread(target=scraper) for _ in range(4)]
    w.start()
    for t in scrapers:
        t.start()
    for t in scrapers:
        t.join(60)
    stop.set()
    w.join(10)
    assert not errors, errors[0]


def test_stalled_scrapers_block_neither_scrapes_nor_watchers(server, live):
    host, port = server.address
    with socket.create_connection((host, port)) as stalled, \
            socket.create_connection((host, port)) as lazy:
        stalled.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")  # headers never end
        lazy.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        lazy.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")  # asks, then never reads
        time.sleep(0.2)
        t0 = time.monotonic()
        feed(live, "rpi4", "cpu2", 2, [123_456])
        s = scrape(server)
        assert time.monotonic() - t0 < 5
        assert s[("rtlab_latency_max_seconds", lab("rpi4", "2"))] == 10.0
        assert s[("rtlab_samples_total", lab("rpi4", "2"))] == 6


# --listen -----------------------------------------------------------------------------
@pytest.mark.parametrize(("text", "want"), [
    ("127.0.0.1:9477", ("127.0.0.1", 9477)),
    ("0.0.0.0:9100", ("0.0.0.0", 9100)),
    (":9477", ("127.0.0.1", 9477)),
    ("9477", ("127.0.0.1", 9477)),
    ("[::1]:9477", ("::1", 9477)),
    ("[::]:80", ("::", 80)),
    ("localhost:65535", ("localhost", 65535)),
    ("board-7.lab.example:1", ("board-7.lab.example", 1)),
    (" 9477 ", ("127.0.0.1", 9477)),
])
def test_parse_listen_accepts(text, want):
    assert parse_listen(text) == want


@pytest.mark.parametrize(("text", "why"), [
    ("", "expected HOST:PORT"),
    ("localhost", "expected HOST:PORT"),
    ("127.0.0.1:", "port is missing"),
    ("127.0.0.1:0", "from 1 to 65535"),
    ("127.0.0.1:65536", "from 1 to 65535"),
    ("127.0.0.1:http", "from 1 to 65535"),
    (":-1", "from 1 to 65535"),
    ("::1:9477", "brackets"),
    ("[::1:9477", "brackets"),
    ("[nope]:9477", "IPv6"),
    ("300.1.1.1:9477", "not an IPv4 address"),
    ("http://x:9477", "brackets"),
    ("bad_host:9477", "not a host name"),
])
def test_parse_listen_refuses(text, why):
    with pytest.raises(UsageError) as exc:
        parse_listen(text)
    line = exc.value.one_line()
    assert why in line and "\n" not in line
    assert "--listen" in line and exc.value.code == ExitCode.USAGE


def test_board_info_carries_the_kernel() -> None:
    """rtlab_board_info: what the board's engine said of it, to follow latency across
    kernels; absent until the engine reported."""
    from prometheus_client import generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    from rtlab.monitor.exporter import make_registry

    live = LiveState()
    live.set_board("b1", up=True)
    live.set_board("b2", up=True, kernel="6.1.0-50-rt-arm64", preempt="rt", machine="aarch64",
                   engine_version="0.1.0")
    text = generate_latest(make_registry(live.view)).decode()
    infos = [s for f in text_string_to_metric_families(text) for s in f.samples
             if s.name == "rtlab_board_info"]
    assert len(infos) == 1
    assert infos[0].labels == {"board": "b2", "kernel": "6.1.0-50-rt-arm64", "preempt": "rt",
                               "machine": "aarch64", "engine_version": "0.1.0"}
    assert infos[0].value == 1.0
