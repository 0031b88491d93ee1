# SPDX-License-Identifier: MIT
"""Decoder of the kernel's binary ring-buffer pages (`per_cpu/cpuN/trace_pipe_raw`).

A page is a header (`events/header_page`: u64 base timestamp, a commit word
holding the number of data bytes plus two "missed events" flags) followed by
compressed events (`events/header_event`): a 32-bit word with a 5-bit type_len
and a 27-bit time delta, then the payload. The full description, with the
special types (padding, time extend, absolute time stamp), is in
docs/tracing.md.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from rtlab.trace.formats import EventFormat, EventHeader, PageHeader

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


def page_info(page: bytes | memoryview, hdr: PageHeader = DEFAULT_PAGE_HEADER) -> PageInfo:
    (ts,) = struct.unpack_from("<Q", page, hdr.timestamp_offset)
    fmt = "<Q" if hdr.commit_size == 8 else "<I"
    (raw,) = struct.unpack_from(fmt, page, hdr.commit_offset)
    commit = raw & _COMMIT_MASK
    missed = bool(raw & RB_MISSED_EVENTS)
    count: int | None = None
    if raw & RB_MISSED_STORED:
        off = hdr.data_offset + commit
        if off + hdr.commit_size <= len(page):
            (count,) = struct.unpack_from(fmt, page, off)
    return PageInfo(ts, min(commit, hdr.data_size), missed, count)


class DecodeError(ValueError):
    pass


class PageDecoder:
    """Turns raw pages of one CPU into Events using the kernel's format files."""

    def __init__(
        self,
        formats: Mapping[int, EventFormat],
        page_header: PageHeader = DEFAULT_PAGE_HEADER,
        event_header: EventHeader = DEFAULT_EVENT_HEADER,
    ):
        self.formats = dict(formats)
        self.ph = page_header
        self.eh = event_header
        self._tl_mask = (1 << event_header.type_len_bits) - 1

    def decode_page(self, page: bytes | memoryview, cpu: int) -> list[Event]:
        return list(self.iter_page(page, cpu))

    def iter_page(self, page: bytes | memoryview, cpu: int) -> Iterator[Event]:
        ph, eh = self.ph, self.eh
        info = page_info(page, ph)
        ts = info.timestamp
        data = memoryview(page)[ph.data_offset : ph.data_offset + info.commit]
        pos, end = 0, len(data)
        tl_mask, tl_bits = self._tl_mask, eh.type_len_bits
        while pos + 4 <= end:
            (word,) = struct.unpack_from("<I", data, pos)
            type_len = word & tl_mask
            delta = word >> tl_bits
            if type_len == eh.padding:
                if delta == 0:
                    break  # the rest of the page is padding
                (length,) = struct.unpack_from("<I", data, pos + 4)
                pos += 4 + length  # a discarded event: skip, no time update
                continue
            if type_len == eh.time_extend:
                (hi,) = struct.unpack_from("<I", data, pos + 4)
                ts += (hi << eh.time_delta_bits) + delta
                pos += 8
                continue
            if type_len == eh.time_stamp:
                (hi,) = struct.unpack_from("<I", data, pos + 4)
                abs_ts = (hi << eh.time_delta_bits) | delta
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
                (length,) = struct.unpack_from("<I", data, pos + 4)
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
        etype, pid = struct.unpack_from("<H2xi", rec, 0)
        fmt = self.formats.get(etype)
        if fmt is None:
            return Event(ts, cpu, f"unknown:{etype}", pid, {"raw": bytes(rec)})
        fields = fmt.decode(rec)
        if fmt.name == "print":  # trace_marker text: drop the trailing newline
            buf = fields.get("buf")
            if isinstance(buf, str):
                fields["buf"] = buf.rstrip("\n")
        return Event(ts, cpu, fmt.name, pid, fields)

    def decode_pages(self, pages: Iterable[bytes], cpu: int) -> list[Event]:
        out: list[Event] = []
        for p in pages:
            out.extend(self.iter_page(p, cpu))
        return out


def split_pages(blob: bytes, page_size: int) -> list[bytes]:
    """Cut a concatenation of whole pages (as read from trace_pipe_raw) into pages."""
    return [blob[i : i + page_size] for i in range(0, len(blob) - page_size + 1, page_size)]
