# SPDX-License-Identifier: MIT
"""Ring-buffer pages of every board architecture: byte order and word size.

Recorded pages: tests/trace/fixtures/boards/<arch>/, recorded on the emulated
Debian 12 6.1 PREEMPT_RT boards by scripts/lab/record-trace-fixture.sh (x86_64,
aarch64: 64-bit little-endian; armhf: 32-bit little-endian). Big-endian PowerPC
(ppc64, ppc) has no board here: its pages are built below by an encoder written
from the kernel's documented layout (include/linux/ring_buffer.h, header_page,
header_event), never by the decoder, and the same event stream encoded in all
four (byte order, word size) pairs must decode to identical events.
"""

from __future__ import annotations

import itertools
import json
import re
import shutil
import struct
from dataclasses import dataclass
from pathlib import Path

import pytest

from rtlab.trace.capture import FormatSet, TraceCapture
from rtlab.trace.formats import parse_format
from rtlab.trace.ringbuf import (
    RB_MISSED_EVENTS,
    RB_MISSED_STORED,
    Event,
    PageDecoder,
    page_info,
)

FIXTURES = Path(__file__).parent / "fixtures"
BOARDS = FIXTURES / "boards"
# arch -> (uname -m, long bits)
ARCHS = {"x86_64": ("x86_64", 64), "aarch64": ("aarch64", 64), "armhf": ("armv7l", 32)}
MARKERS = [f"rtlab-fixture marker {i}" for i in range(1, 21)]


# -- pages recorded on the boards ------------------------------------------------------


@pytest.fixture(scope="module", params=sorted(ARCHS))
def board_capture(request: pytest.FixtureRequest) -> tuple[str, TraceCapture, list[Event]]:
    cap = TraceCapture.load(BOARDS / request.param)
    return request.param, cap, cap.events(0)


def test_board_meta_and_word_size(board_capture: tuple[str, TraceCapture, list[Event]]) -> None:
    arch, cap, _ = board_capture
    machine, bits = ARCHS[arch]
    assert cap.meta["machine"] == machine and cap.meta["byte_order"] == "little"
    assert cap.meta["long_bits"] == bits
    ph = cap.formats.page_header
    # 32-bit: a 4-byte commit word, the data right after it at 12 (recorded, not assumed)
    assert (ph.commit_size, ph.data_offset) == ((8, 16) if bits == 64 else (4, 12))
    assert ph.page_size == 4096
    assert cap.lost_in_pages(0) == 0 and cap.lost[0] == {"dropped_events": 0, "overrun": 0}


def test_board_events_decode(board_capture: tuple[str, TraceCapture, list[Event]]) -> None:
    _, _, evs = board_capture
    assert len(evs) > 300
    assert all(a.ts <= b.ts for a, b in itertools.pairwise(evs))
    assert {"sched_switch", "sched_waking", "hrtimer_expire_entry", "print"} <= {
        e.name for e in evs
    }
    assert not [e for e in evs if e.name.startswith(("unknown", "short"))]
    # the 20 markers, in order, from one shell whose switches are in the same capture
    prints = [e for e in evs if e.name == "print"]
    assert [e.fields["buf"] for e in prints] == MARKERS
    assert len({e.pid for e in prints}) == 1


def test_board_sched_switch_is_consistent(
    board_capture: tuple[str, TraceCapture, list[Event]],
) -> None:
    _, _, evs = board_capture
    switches = [e for e in evs if e.name == "sched_switch"]
    assert len(switches) > 50
    for e in switches:
        for key in ("prev_comm", "next_comm"):
            comm = e.fields[key]
            assert isinstance(comm, str) and comm and comm.isprintable(), e
        assert e.pid == e.fields["prev_pid"]  # the task switching out is the current one
    # One CPU, nothing lost: each switch starts the task the next one stops (its comm
    # may differ: an exec in between renames it).
    for a, b in itertools.pairwise(switches):
        assert a.fields["next_pid"] == b.fields["prev_pid"], (a, b)
    # every pid that writes a marker or is woken was switched to or from on this CPU
    switched = {e.fields["prev_pid"] for e in switches} | {e.fields["next_pid"] for e in switches}
    assert {e.pid for e in evs if e.name == "print"} <= switched
    woken = {
        e.fields["pid"] for e in evs if e.name == "sched_waking" and e.fields["target_cpu"] == 0
    }
    assert woken and len(woken & switched) >= len(woken) // 2


def test_board_pointer_width_and_clock(
    board_capture: tuple[str, TraceCapture, list[Event]],
) -> None:
    arch, cap, evs = board_capture
    bits = ARCHS[arch][1]
    fmt = next(f for f in cap.formats.by_id.values() if f.name == "hrtimer_expire_entry")
    sizes = {f.name: f.size for f in fmt.fields}
    assert sizes == {"hrtimer": bits // 8, "now": 8, "function": bits // 8}
    hr = [e for e in evs if e.name == "hrtimer_expire_entry"]
    assert hr
    for e in hr:
        for key in ("function", "hrtimer"):
            addr = e.fields[key]
            assert isinstance(addr, int)
            # kernel addresses: the top half of the board's address space
            assert 1 << (bits - 1) <= addr < 1 << bits, (key, hex(addr))
        # hrtimer 'now' (the kernel's CLOCK_MONOTONIC) is just before the mono trace time
        assert 0 <= e.ts - int(e.fields["now"]) < 10_000_000


def test_board_irq_names_are_data_loc_strings() -> None:
    for arch in ("aarch64", "armhf"):
        evs = TraceCapture.load(BOARDS / arch).events(0)
        names = {e.fields["name"] for e in evs if e.name == "irq_handler_entry"}
        assert "arch_timer" in names, (arch, names)


def test_board_windows_agree_with_the_full_decode() -> None:
    for arch in ARCHS:
        evs = TraceCapture.load(BOARDS / arch).events(0)
        cap = TraceCapture.load(BOARDS / arch)
        mid = evs[len(evs) // 2].ts
        assert cap.window(0, mid - 5_000_000, mid + 5_000_000) == [
            e for e in evs if mid - 5_000_000 <= e.ts <= mid + 5_000_000
        ]


def test_meta_that_contradicts_the_format_files_is_refused(tmp_path: Path) -> None:
    d = shutil.copytree(BOARDS / "armhf", tmp_path / "armhf")
    meta = json.loads((d / "meta.json").read_text())
    meta["meta"]["long_bits"] = 64
    (d / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(ValueError, match=r"long_bits 64 .* 32-bit commit word"):
        TraceCapture.load(d)


# -- old captures and unknown byte orders -------------------------------------------------


def test_old_capture_without_byte_order_is_little_endian(tmp_path: Path) -> None:
    old = FIXTURES / "cpu1-sleeper"
    assert "byte_order" not in json.loads((old / "meta.json").read_text())["meta"]
    cap = TraceCapture.load(old)
    assert cap.formats.byte_order == "little"
    evs = cap.events(1)
    assert len(evs) == 532 and sum(e.name == "print" for e in evs) > 40
    # saved again, it says so, and decodes to the same events
    again = TraceCapture.load(cap.save(tmp_path / "again"))
    assert again.meta["byte_order"] == "little" and again.events(1) == evs


@pytest.mark.parametrize("order", ["middle", "LITTLE", "", 1, None])
def test_unknown_byte_order_is_refused(tmp_path: Path, order: object) -> None:
    d = shutil.copytree(BOARDS / "x86_64", tmp_path / "cap")
    meta = json.loads((d / "meta.json").read_text())
    meta["meta"]["byte_order"] = order
    (d / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(ValueError, match=r"byte_order: unknown byte order .* 'little' or 'big'"):
        TraceCapture.load(d)
    with pytest.raises(ValueError, match="expected 'little' or 'big'"):
        FormatSet.load(d / "formats", order)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="expected 'little' or 'big'"):
        PageDecoder({}, byte_order=order)  # type: ignore[arg-type]


# -- synthetic pages: little and big endian, 64 and 32 bit --------------------------------

HEADER_EVENT = (BOARDS / "aarch64" / "formats" / "header_event").read_text()


def header_page(bits: int) -> str:
    """header_page as a kernel with `bits`-bit longs prints it (4 KiB pages)."""
    w = bits // 8
    return (
        "\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;\n"
        f"\tfield: local_t commit;\toffset:8;\tsize:{w};\tsigned:1;\n"
        "\tfield: int overwrite;\toffset:8;\tsize:1;\tsigned:1;\n"
        f"\tfield: char data;\toffset:{8 + w};\tsize:{4096 - 8 - w};\tsigned:0;\n"
    )


# The boards' own format files: a 64-bit kernel's (aarch64) and a 32-bit one's (armhf);
# a ppc64 / ppc kernel prints the same layouts for these events.
EVENTS = (
    "sched__sched_switch",
    "irq__irq_handler_entry",
    "timer__hrtimer_expire_entry",
    "ftrace__print",
)


def format_texts(bits: int) -> dict[str, str]:
    src = BOARDS / ("aarch64" if bits == 64 else "armhf") / "formats"
    return {e.replace("__", "/"): (src / f"{e}.format").read_text() for e in EVENTS}


_FIELD = re.compile(r"field:(?P<decl>[^;]*);\s*offset:(?P<off>\d+);\s*size:(?P<size>\d+);")


@dataclass
class Encoder:
    """Writes records, events and pages as a kernel of this byte order and word size would.

    Written from the documented layout only (ring_buffer.h, header_page, format files):
    `struct ring_buffer_event { u32 type_len:5, time_delta:27; u32 array[]; }` whose
    bitfields GCC allocates from the low bit on little-endian and from the high bit
    on big-endian machines."""

    order: str
    bits: int

    @property
    def p(self) -> str:
        return "<" if self.order == "little" else ">"

    def u32(self, v: int) -> bytes:
        return struct.pack(self.p + "I", v)

    def long(self, v: int) -> bytes:
        return struct.pack(self.p + ("Q" if self.bits == 64 else "I"), v)

    def header(self, type_len: int, delta: int) -> bytes:
        assert 0 <= type_len < 32 and 0 <= delta < 1 << 27
        if self.order == "little":
            return self.u32(delta << 5 | type_len)
        return self.u32(type_len << 27 | delta)

    def record(self, fmt_text: str, values: dict[str, int | bytes]) -> bytes:
        """One event record: fields at the format file's offsets, __data_loc data after."""
        layout = {}
        for m in _FIELD.finditer(fmt_text):
            name = re.findall(r"\w+", re.sub(r"\[\d*\]", "", m["decl"]))[-1]
            layout[name] = (m["decl"], int(m["off"]), int(m["size"]))
        fixed = max(off + size for _, off, size in layout.values())
        rec = bytearray(fixed)
        tail = b""
        for name, value in values.items():
            decl, off, size = layout[name]
            if decl.startswith("__data_loc"):
                assert isinstance(value, bytes)
                loc = (len(value) << 16) | (fixed + len(tail))
                rec[off : off + 4] = self.u32(loc)
                tail += value
            elif isinstance(value, bytes):
                if size == 0:  # flexible array: the rest of the record
                    tail += value
                else:
                    rec[off : off + size] = value.ljust(size, b"\0")
            else:
                code = {1: "B", 2: "H", 4: "I", 8: "Q"}[size]
                rec[off : off + size] = struct.pack(self.p + code, value & ((1 << 8 * size) - 1))
        return bytes(rec) + tail

    def data(self, delta: int, payload: bytes) -> bytes:
        payload += b"\0" * (-len(payload) % 4)
        if len(payload) <= 28 * 4:
            return self.header(len(payload) // 4, delta) + payload
        return self.header(0, delta) + self.u32(len(payload) + 4) + payload  # a long event

    def extend(self, delta: int) -> bytes:
        return self.header(30, delta & ((1 << 27) - 1)) + self.u32(delta >> 27)

    def absolute(self, ts: int) -> bytes:
        low = ts & ((1 << 59) - 1)
        return self.header(31, low & ((1 << 27) - 1)) + self.u32(low >> 27)

    def discarded(self, length: int) -> bytes:
        return self.header(29, 1) + self.u32(length) + b"\xee" * (length - 4)

    def page(self, ts: int, body: bytes, flags: int = 0, missed: int | None = None) -> bytes:
        w = self.bits // 8
        data = body + (self.long(missed) if missed is not None else b"")
        return (
            struct.pack(self.p + "Q", ts)
            + self.long(len(body) | flags)
            + data.ljust(4096 - 8 - w, b"\0")
        )


T0 = (1 << 59) + 5_000_000_000  # above 2^59: absolute stamps must borrow the top bits
COMMON = {"common_type": 0, "common_flags": 1, "common_preempt_count": 2}
LONG_TEXT = "a marker longer than 112 bytes goes in a long event: " + "x" * 80


def stream(enc: Encoder, fmts: dict[str, str], ids: dict[str, int]) -> list[bytes]:
    """Two pages of one CPU: every kind of entry the kernel writes."""

    def rec(event: str, pid: int, **values: int | bytes) -> bytes:
        key = next(k for k in fmts if k.endswith("/" + event))
        return enc.record(
            fmts[key], {**COMMON, "common_type": ids[event], "common_pid": pid, **values}
        )

    switch = rec(
        "sched_switch",
        77,
        prev_comm=b"rtlab-probe",
        prev_pid=77,
        prev_prio=0,
        prev_state=1,
        next_comm=b"swapper/1",
        next_pid=0,
        next_prio=120,
    )
    irq = rec("irq_handler_entry", 0, irq=41, name=b"eth0-rx\0")
    hrt = rec("hrtimer_expire_entry", 0, hrtimer=0xC1A0_0040, now=T0 + 900, function=0xC012_3456)
    mark = rec("print", 77, ip=0xC000_1000, buf=b"rtlab spike 1\n\0")
    long_mark = rec("print", 77, ip=0xC000_1000, buf=LONG_TEXT.encode() + b"\n\0")
    page1 = enc.page(
        T0,
        enc.data(1000, hrt)
        + enc.data(5, irq)
        + enc.discarded(20)  # no time update
        + enc.extend(3 << 27 | 99)  # a delta above 27 bits
        + enc.data(7, switch)
        + enc.data(0, long_mark)
        + enc.header(29, 0)
        + b"\xee" * 12,  # padding: the rest of the page is empty
    )
    page2 = enc.page(
        T0 + 10**9,
        enc.absolute(T0 + 2 * 10**9) + enc.data(3, mark) + enc.data(1, switch),
        flags=RB_MISSED_EVENTS | RB_MISSED_STORED,
        missed=4321,
    )
    return [page1, page2]


PAIRS = [("little", 64), ("little", 32), ("big", 64), ("big", 32)]


def synthetic_capture(order: str, bits: int) -> TraceCapture:
    texts = format_texts(bits)
    fs = FormatSet(header_page(bits), HEADER_EVENT, texts, order)
    ids = {f.name: f.id for f in fs.by_id.values()}
    pages = stream(Encoder(order, bits), texts, ids)
    return TraceCapture(fs, {1: pages}, meta={"byte_order": order, "long_bits": bits})


@pytest.mark.parametrize(("order", "bits"), PAIRS)
def test_synthetic_pages_decode_to_what_was_written(order: str, bits: int) -> None:
    cap = synthetic_capture(order, bits)
    evs = cap.events(1)
    assert [e.name for e in evs] == [
        "hrtimer_expire_entry",
        "irq_handler_entry",
        "sched_switch",
        "print",
        "print",
        "sched_switch",
    ]
    ext = (3 << 27 | 99) + 7
    assert [e.ts - T0 for e in evs] == [
        1000,
        1005,
        1005 + ext,
        1005 + ext,
        2 * 10**9 + 3,
        2 * 10**9 + 4,
    ]
    assert evs[0].fields == {"hrtimer": 0xC1A0_0040, "now": T0 + 900, "function": 0xC012_3456}
    assert evs[1].fields == {"irq": 41, "name": "eth0-rx"} and evs[1].pid == 0
    assert evs[2].pid == 77 and evs[2].fields == {
        "prev_comm": "rtlab-probe",
        "prev_pid": 77,
        "prev_prio": 0,
        "prev_state": 1,
        "next_comm": "swapper/1",
        "next_pid": 0,
        "next_prio": 120,
    }
    assert evs[3].fields["buf"] == LONG_TEXT and evs[4].fields["buf"] == "rtlab spike 1"
    assert evs[3].fields["ip"] == 0xC000_1000
    info = page_info(cap.pages[1][1], cap.formats.page_header, order)
    assert info.missed_events and info.missed_count == 4321
    assert cap.lost_in_pages(1) == 4321
    assert not page_info(cap.pages[1][0], cap.formats.page_header, order).missed_events


def test_same_stream_decodes_identically_in_every_byte_order_and_word_size() -> None:
    decoded = {pair: synthetic_capture(*pair).events(1) for pair in PAIRS}
    want = decoded["little", 64]
    assert len(want) == 6
    for pair, evs in decoded.items():
        assert evs == want, pair
    # and the pages really differ: a big-endian page read as little-endian is not the same
    le, be = synthetic_capture("little", 64), synthetic_capture("big", 64)
    assert le.pages[1][0] != be.pages[1][0]
    wrong = PageDecoder(le.formats.by_id, le.formats.page_header, le.formats.event_header)
    try:
        misread: list[Event] | None = wrong.decode_page(be.pages[1][0], 1)
    except ValueError:  # DecodeError or a struct error: also a refusal
        misread = None
    assert misread != want[:4]


@pytest.mark.parametrize(("order", "bits"), PAIRS)
def test_synthetic_capture_saves_and_loads_in_its_byte_order(
    tmp_path: Path, order: str, bits: int
) -> None:
    cap = synthetic_capture(order, bits)
    loaded = TraceCapture.load(cap.save(tmp_path / "cap"))
    assert loaded.formats.byte_order == order and loaded.meta["long_bits"] == bits
    assert loaded.events(1) == cap.events(1)
    mid = cap.events(1)[2].ts
    assert loaded.window(1, mid, mid + 10**10) == cap.events(1)[2:]


REL_LOC_FORMAT = (
    "name: rel_test\nID: 901\nformat:\n"
    "\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n"
    "\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n"
    "\tfield:__rel_loc char[] msg;\toffset:8;\tsize:4;\tsigned:0;\n"
    "\tfield:__data_loc u8[] blob;\toffset:12;\tsize:4;\tsigned:0;\n"
    "\tfield:s16 level;\toffset:16;\tsize:2;\tsigned:1;\n"
)


@pytest.mark.parametrize("order", ["little", "big"])
def test_rel_loc_data_loc_and_signed_fields_in_both_orders(order: str) -> None:
    fmt = parse_format(REL_LOC_FORMAT, "test")
    p = "<" if order == "little" else ">"
    # __rel_loc: offset counted from the end of its own u32 (12); __data_loc: from 0
    msg, blob = b"hello\0", b"\x01\x02\x03"
    rec = struct.pack(p + "H2xiIIh2x", 901, 5, len(msg) << 16 | (20 - 12), 0, -7)
    rec = rec[:12] + struct.pack(p + "I", len(blob) << 16 | (20 + len(msg))) + rec[16:]
    rec += msg + blob
    assert fmt.decode(rec, order) == {"msg": "hello", "blob": blob, "level": -7}
    field = next(f for f in fmt.fields if f.name == "level")
    assert field.decode(rec, order) == -7
    with pytest.raises(ValueError, match="expected 'little' or 'big'"):
        fmt.decode(rec, "native")
    with pytest.raises(ValueError, match="expected 'little' or 'big'"):
        field.decode(rec, "native")
