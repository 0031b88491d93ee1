# SPDX-License-Identifier: MIT
"""The raw ring-buffer page decoder: synthetic pages and pages recorded on a real kernel."""

from __future__ import annotations

import itertools
import struct
from pathlib import Path

import pytest

from rtlab.trace.capture import TraceCapture
from rtlab.trace.formats import parse_format, parse_header_event, parse_header_page
from rtlab.trace.ringbuf import RB_MISSED_EVENTS, RB_MISSED_STORED, PageDecoder, page_info
from rtlab.trace.spike_sources import spikes_from_markers

FIXTURE = Path(__file__).parent / "fixtures" / "cpu1-sleeper"

HEADER_PAGE = """\
\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;
\tfield: local_t commit;\toffset:8;\tsize:8;\tsigned:1;
\tfield: int overwrite;\toffset:8;\tsize:1;\tsigned:1;
\tfield: char data;\toffset:16;\tsize:4080;\tsigned:0;
"""
HEADER_EVENT = """\
# compressed entry header
\ttype_len    :    5 bits
\ttime_delta  :   27 bits
\tarray       :   32 bits

\tpadding     : type == 29
\ttime_extend : type == 30
\ttime_stamp : type == 31
\tdata max type_len  == 28
"""
COMMON = """\
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;
"""
FMT_IRQ = (
    "name: irq_handler_entry\nID: 7\nformat:\n" + COMMON + "\n"
    "\tfield:int irq;\toffset:8;\tsize:4;\tsigned:1;\n"
    "\tfield:__data_loc char[] name;\toffset:12;\tsize:4;\tsigned:0;\n\n"
    'print fmt: "irq=%d name=%s", REC->irq, __get_str(name)\n'
)
FMT_NEG = (
    "name: negs\nID: 8\nformat:\n" + COMMON + "\n"
    "\tfield:s64 v;\toffset:8;\tsize:8;\tsigned:1;\n"
    "\tfield:char comm[16];\toffset:16;\tsize:16;\tsigned:0;\n\n"
    'print fmt: "v=%lld"\n'
)


def rec_irq(pid: int, irq: int, name: bytes) -> bytes:
    base = struct.pack("<HBBiiI", 7, 0, 0, pid, irq, 0)
    loc = (len(name) + 1) << 16 | len(base)
    return struct.pack("<HBBiiI", 7, 0, 0, pid, irq, loc) + name + b"\0"


def rec_neg(pid: int, v: int, comm: bytes) -> bytes:
    return struct.pack("<HBBiq16s", 8, 0, 0, pid, v, comm)


def ev_small(delta: int, payload: bytes) -> bytes:
    payload += b"\0" * (-len(payload) % 4)
    return struct.pack("<I", (delta << 5) | (len(payload) // 4)) + payload


def ev_long(delta: int, payload: bytes) -> bytes:
    payload += b"\0" * (-len(payload) % 4)
    return struct.pack("<II", delta << 5, len(payload) + 4) + payload


def ev_extend(delta: int) -> bytes:
    return struct.pack("<II", ((delta & ((1 << 27) - 1)) << 5) | 30, delta >> 27)


def ev_abs(ts: int) -> bytes:
    low = ts & ((1 << 59) - 1)
    return struct.pack("<II", ((low & ((1 << 27) - 1)) << 5) | 31, low >> 27)


def ev_discarded(length: int) -> bytes:
    return struct.pack("<II", (1 << 5) | 29, length) + b"\xee" * (length - 4)


def page(ts: int, body: bytes, flags: int = 0, missed: int | None = None) -> bytes:
    commit = len(body) | flags
    data = body + (struct.pack("<Q", missed) if missed is not None else b"")
    data += b"\0" * (4080 - len(data))
    return struct.pack("<QQ", ts, commit) + data


@pytest.fixture
def decoder() -> PageDecoder:
    fmts = {f.id: f for f in (parse_format(FMT_IRQ, "irq"), parse_format(FMT_NEG, "test"))}
    return PageDecoder(fmts, parse_header_page(HEADER_PAGE), parse_header_event(HEADER_EVENT))


def test_small_long_extend_abs_and_padding(decoder: PageDecoder) -> None:
    t0 = 1_000_000_000
    body = (
        ev_small(5, rec_irq(42, 11, b"virtio2"))
        + ev_long(7, rec_neg(9, -3, b"comm-x"))
        + ev_discarded(24)  # no time update
        + ev_extend(3 << 27 | 17)  # delta above 27 bits
        + ev_small(1, rec_neg(9, 5, b"y"))
        + ev_abs(t0 + 10**9)
        + ev_small(2, rec_irq(0, 3, b""))
    )
    evs = decoder.decode_page(page(t0, body), cpu=3)
    assert [e.name for e in evs] == ["irq_handler_entry", "negs", "negs", "irq_handler_entry"]
    assert [e.ts - t0 for e in evs] == [5, 12, 12 + (3 << 27 | 17) + 1, 10**9 + 2]
    assert evs[0].fields == {"irq": 11, "name": "virtio2"} and evs[0].pid == 42
    assert evs[1].fields["v"] == -3 and evs[1].fields["comm"] == "comm-x"
    assert evs[3].fields["name"] == "" and evs[3].cpu == 3


def test_absolute_timestamp_borrows_upper_bits(decoder: PageDecoder) -> None:
    t0 = (1 << 59) * 3 + 100  # upper bits set: the 59-bit stamp must borrow them
    evs = decoder.decode_page(page(t0, ev_abs(t0 + 50) + ev_small(0, rec_neg(1, 0, b""))), 0)
    assert evs[0].ts == t0 + 50


def test_trailing_padding_ends_the_page(decoder: PageDecoder) -> None:
    body = ev_small(1, rec_neg(1, 1, b"")) + struct.pack("<I", 29) + b"\xff" * 12
    assert len(decoder.decode_page(page(10, body), 0)) == 1


def test_missed_events_flags() -> None:
    body = ev_small(1, rec_neg(1, 1, b""))
    info = page_info(page(10, body, RB_MISSED_EVENTS | RB_MISSED_STORED, missed=1234))
    assert info.missed_events and info.missed_count == 1234 and info.commit == len(body)
    info = page_info(page(10, body, RB_MISSED_EVENTS))
    assert info.missed_events and info.missed_count is None
    assert not page_info(page(10, body)).missed_events


def test_unknown_event_type_is_kept(decoder: PageDecoder) -> None:
    evs = decoder.decode_page(page(0, ev_small(1, struct.pack("<HBBi", 99, 0, 0, 5))), 0)
    assert evs[0].name == "unknown:99" and evs[0].pid == 5


def test_recorded_pages_decode() -> None:
    cap = TraceCapture.load(FIXTURE)
    evs = cap.events(1)
    assert len(evs) == 532
    assert all(a.ts <= b.ts for a, b in itertools.pairwise(evs))
    names = {e.name for e in evs}
    assert {
        "sched_switch",
        "sched_waking",
        "hrtimer_expire_entry",
        "local_timer_entry",
        "print",
    } <= names
    # The recorded markers are the sleeper's: one pid, and they parse as spikes.
    spikes = spikes_from_markers(evs)
    assert len(spikes) == 43 and len({s.tid for s in spikes}) == 1
    marker_pids = {e.pid for e in evs if e.name == "print"}
    assert marker_pids == {spikes[0].tid}
    # hrtimer 'now' (CLOCK_MONOTONIC read by the kernel) agrees with the mono trace clock
    for e in evs:
        if e.name == "hrtimer_expire_entry":
            assert 0 <= e.ts - int(e.fields["now"]) < 1_000_000
    # windows decode only the pages they need and agree with the full decode
    mid = evs[len(evs) // 2].ts
    win = cap.window(1, mid - 2_000_000, mid + 2_000_000)
    assert win == [e for e in evs if mid - 2_000_000 <= e.ts <= mid + 2_000_000]


def test_recorded_irq_name_data_loc() -> None:
    cap = TraceCapture.load(FIXTURE)
    irqs = [e for e in cap.events(1) if e.name == "irq_handler_entry"]
    assert irqs and all(isinstance(e.fields["name"], str) and e.fields["name"] for e in irqs)


def test_sliding_windows_reuse_pages_and_agree_with_the_full_decode() -> None:
    evs = TraceCapture.load(FIXTURE).events(1)
    cap = TraceCapture.load(FIXTURE)  # fresh: windows decode pages themselves
    first, last = evs[0].ts, evs[-1].ts
    step = (last - first) // 40
    for t in [*range(first - step, last + step, step), first + step]:  # and one step back
        want = [e for e in evs if t - 3 * step <= e.ts <= t + step]
        assert cap.window(1, t - 3 * step, t + step) == want
    assert 0 < len(cap._recent[1]) < len(cap.pages[1])
