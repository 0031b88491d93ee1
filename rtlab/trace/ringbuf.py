# SPDX-License-Identifier: MIT
"""Decoder of the kernel's binary ring-buffer pages (`per_cpu/cpuN/trace_pipe_raw`).

A page is a header (`events/header_page`: u64 base timestamp, a commit word
(a `long`: 8 bytes on 64-bit kernels, 4 on 32-bit) holding the number of data
bytes plus two "missed events" flags) followed by compressed events
(`events/header_event`): a 32-bit word with a 5-bit type_len and a 27-bit time
delta, then the payload. Every word is in the recording machine's byte order;
on a big-endian kernel type_len is the top 5 bits of the word, on a little-endian
one the low 5 (the compiler's bitfield order). The full description, with the
special types (padding, time extend, absolute time stamp), is in docs/tracing.md.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from rtlab.trace.formats import INT_STRUCTS, EventFormat, EventHeader, PageHeader, struct_prefix

RB_MISSED_EVENTS = 1 << 31  # events were lost between the previous page and this one
RB_MISSED_STORED = 1 << 30  # the lost count is stored after the data
_COMMIT_MASK = (1 << 30) - 1
_TS_BITS = 59  # an absolute time stamp event carries the low 59 bits
_TS_MSB = ~((1 << _TS_BITS) - 1) & ((1 << 64) - 1)
DEFAULT_PAGE_HEADER = PageHeader()
DEFAULT_EVENT_HEADER = EventHeader()


@dataclass(slots=True)
class Event:
    """One decoded trace event. `ts` is in the trace clock's ns (CLOCK_MONOTONIC with `mono`)."""

    ts: int
    cpu: int
    name: str
    pid: int
    fields: dict[str, int | str | bytes] = field(default_factory=dict)

    def get(self, key: str, default: int | str | bytes | None = None) -> int | str | bytes | None:
        return self.fields.get(key, default)

    def to_dict(self) -> dict[str, object]:
        return {
            "ts": self.ts,
            "cpu": self.cpu,
            "name": self.name,
            "pid": self.pid,
            "fields": {k: (v.hex() if isinstance(v, bytes) else v) for k, v in self.fields.items()},
        }


@dataclass
class PageInfo:
    """What a page header says, without decoding its events."""

    timestamp: int
    commit: int
    missed_events: bool
    missed_count: int | None  # None when the kernel did not store the count


def page_info(
    page: bytes | memoryview, hdr: PageHeader = DEFAULT_PAGE_HEADER, byte_order: str = "little"
) -> PageInfo:
    """The page header of one page written by a kernel of `byte_order` ("little" or "big").

    The commit word and the stored missed-events count are a `long` of the
    recording kernel: their size is the header_page's commit size (4 or 8)."""
    struct_prefix(byte_order)
    (ts,) = INT_STRUCTS[byte_order, 8, False].unpack_from(page, hdr.timestamp_offset)
    word = INT_STRUCTS.get((byte_order, hdr.commit_size, False))
    if word is None:
        raise DecodeError(f"unsupported header_page commit size {hdr.commit_size} (not 4 or 8)")
    (raw,) = word.unpack_from(page, hdr.commit_offset)
    commit = raw & _COMMIT_MASK
    missed = bool(raw & RB_MISSED_EVENTS)
    count: int | None = None
    if raw & RB_MISSED_STORED:
        off = hdr.data_offset + commit
        if off + hdr.commit_size <= len(page):
            (count,) = word.unpack_from(page, off)
    return PageInfo(ts, min(commit, hdr.data_size), missed, count)


class DecodeError(ValueError):
    pass


class PageDecoder:
    """Turns raw pages of one CPU into Events using the kernel's format files.

    `byte_order` is the recording kernel's ("little" or "big"); its word size comes
    from the format files themselves (header_page's commit size, each field's size)."""

    def __init__(
        self,
        formats: Mapping[int, EventFormat],
        page_header: PageHeader = DEFAULT_PAGE_HEADER,
        event_header: EventHeader = DEFAULT_EVENT_HEADER,
        byte_order: str = "little",
    ):
        struct_prefix(byte_order)
        self.formats = dict(formats)
        self.ph = page_header
        self.eh = event_header
        self.byte_order = byte_order
        self._big = byte_order == "big"
        self._tl_mask = (1 << event_header.type_len_bits) - 1
        self._delta_mask = (1 << event_header.time_delta_bits) - 1
        self._u32 = INT_STRUCTS[byte_order, 4, False].unpack_from
        # common_type (u16) and common_pid (s32) at the start of every record
        self._common = struct.Struct(struct_prefix(byte_order) + "H2xi").unpack_from
        self._plans = {
            i: (f.name, f.readers(byte_order), f.name == "print") for i, f in self.formats.items()
        }

    def page_info(self, page: bytes | memoryview) -> PageInfo:
        return page_info(page, self.ph, self.byte_order)

    def decode_page(self, page: bytes | memoryview, cpu: int) -> list[Event]:
        return list(self.iter_page(page, cpu))

    def iter_page(self, page: bytes | memoryview, cpu: int) -> Iterator[Event]:
        ph, eh = self.ph, self.eh
        info = page_info(page, ph, self.byte_order)
        ts = info.timestamp
        data = memoryview(page)[ph.data_offset : ph.data_offset + info.commit]
        pos, end = 0, len(data)
        u32, big = self._u32, self._big
        tl_mask, tl_bits = self._tl_mask, eh.type_len_bits
        delta_mask, delta_bits = self._delta_mask, eh.time_delta_bits
        while pos + 4 <= end:
            (word,) = u32(data, pos)
            if big:  # GCC's big-endian bitfields: type_len is the top of the word
                type_len = word >> delta_bits
                delta = word & delta_mask
            else:
                type_len = word & tl_mask
                delta = word >> tl_bits
            if type_len == eh.padding:
                if delta == 0:
                    break  # the rest of the page is padding
                (length,) = u32(data, pos + 4)
                pos += 4 + length  # a discarded event: skip, no time update
                continue
            if type_len == eh.time_extend:
                (hi,) = u32(data, pos + 4)
                ts += (hi << delta_bits) + delta
                pos += 8
                continue
            if type_len == eh.time_stamp:
                (hi,) = u32(data, pos + 4)
                abs_ts = (hi << delta_bits) | delta
                if ts & _TS_MSB:  # only the low 59 bits are stored: borrow the rest
                    abs_ts |= ts & _TS_MSB
                    if abs_ts < ts:
                        abs_ts += 1 << _TS_BITS
                ts = abs_ts
                pos += 8
                continue
            if type_len == 0:
                if pos + 8 > end:
                    raise DecodeError(f"truncated long event at {pos}")
                (length,) = u32(data, pos + 4)
                start, stop = pos + 8, pos + 4 + length
                pos = stop
            elif type_len <= eh.data_max_type_len:
                start, stop = pos + 4, pos + 4 + type_len * 4
                pos = stop
            else:
                raise DecodeError(f"unknown type_len {type_len} at {pos}")
            if stop > end or stop < start:
                raise DecodeError(f"event overruns page at {start}..{stop} (commit {end})")
            ts += delta
            yield self._event(data[start:stop], ts, cpu)

    def _event(self, rec: memoryview, ts: int, cpu: int) -> Event:
        if len(rec) < 8:
            return Event(ts, cpu, "short", -1, {})
        etype, pid = self._common(rec, 0)
        plan = self._plans.get(etype)
        if plan is None:
            return Event(ts, cpu, f"unknown:{etype}", pid, {"raw": bytes(rec)})
        name, readers, is_print = plan
        n = len(rec)
        fields = {fname: read(rec) for fname, need, read in readers if need <= n}
        if is_print:  # trace_marker text: drop the trailing newline
            buf = fields.get("buf")
            if isinstance(buf, str):
                fields["buf"] = buf.rstrip("\n")
        return Event(ts, cpu, name, pid, fields)

    def decode_pages(self, pages: Iterable[bytes], cpu: int) -> list[Event]:
        out: list[Event] = []
        for p in pages:
            out.extend(self.iter_page(p, cpu))
        return out


def split_pages(blob: bytes, page_size: int) -> list[bytes]:
    """Cut a concatenation of whole pages (as read from trace_pipe_raw) into pages."""
    return [blob[i : i + page_size] for i in range(0, len(blob) - page_size + 1, page_size)]
