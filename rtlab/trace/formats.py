# SPDX-License-Identifier: MIT
"""Parsers for tracefs self-descriptions: `events/header_page` and `events/*/*/format`.

The kernel describes every binary layout it hands out through tracefs in text
files. We read the layouts from those files instead of hard-coding offsets, so
the decoder follows field changes between kernel versions (see docs/tracing.md).
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field

_FIELD_RE = re.compile(
    r"^\s*field:\s*(?P<decl>[^;]+);\s*offset:(?P<offset>\d+);\s*size:(?P<size>\d+);"
    r"\s*signed:(?P<signed>\d+);"
)
_INT_FORMATS = {1: "B", 2: "H", 4: "I", 8: "Q"}


@dataclass(frozen=True)
class Field:
    """One field of a binary record as declared in a format file."""

    name: str
    ctype: str
    offset: int
    size: int
    signed: bool
    data_loc: bool = False  # `__data_loc T[] name`: u32 = (length << 16) | offset
    array_len: int | None = None  # `char name[16]` -> 16; `char buf[]` -> 0

    @property
    def is_string(self) -> bool:
        return "char" in self.ctype and (self.array_len is not None or self.data_loc)

    def decode(self, rec: bytes | memoryview) -> int | str | bytes:
        """Decode this field from one event record (the payload, common fields first)."""
        if self.data_loc:
            (loc,) = struct.unpack_from("<I", rec, self.offset)
            off, length = loc & 0xFFFF, loc >> 16
            raw = bytes(rec[off : off + length])
            return _cstr(raw) if "char" in self.ctype else raw
        if self.array_len is not None:
            end = len(rec) if self.array_len == 0 else self.offset + self.size
            raw = bytes(rec[self.offset : end])
            return _cstr(raw) if "char" in self.ctype else raw
        fmt = _INT_FORMATS.get(self.size)
        if fmt is None:
            return bytes(rec[self.offset : self.offset + self.size])
        if self.signed:
            fmt = fmt.lower()
        return struct.unpack_from("<" + fmt, rec, self.offset)[0]


def _cstr(raw: bytes) -> str:
    return raw.split(b"\0", 1)[0].decode("utf-8", "replace")


def _parse_decl(decl: str) -> tuple[str, str, bool, int | None]:
    """`__data_loc char[] name` / `char prev_comm[16]` / `pid_t pid` -> parts."""
    decl = decl.strip()
    data_loc = decl.startswith("__data_loc ")
    if data_loc:
        decl = decl[len("__data_loc ") :]
    array_len: int | None = None
    m = re.match(r"^(?P<type>.*?)\s*(?P<name>[A-Za-z_]\w*)\s*\[(?P<n>\d*)\]$", decl)
    if m and not data_loc:
        array_len = int(m["n"]) if m["n"] else 0
        return m["name"], m["type"].strip(), False, array_len
    ctype, _, name = decl.rpartition(" ")
    if data_loc:
        ctype = ctype.replace("[]", "").strip()
    return name.strip(), ctype.strip(), data_loc, array_len


def parse_fields(text: str) -> list[Field]:
    fields = []
    for line in text.splitlines():
        m = _FIELD_RE.match(line)
        if not m:
            continue
        name, ctype, data_loc, array_len = _parse_decl(m["decl"])
        fields.append(
            Field(
                name=name,
                ctype=ctype,
                offset=int(m["offset"]),
                size=int(m["size"]),
                signed=m["signed"] == "1",
                data_loc=data_loc,
                array_len=array_len,
            )
        )
    return fields


@dataclass(frozen=True)
class EventFormat:
    """The layout of one trace event (`events/<system>/<name>/format`)."""

    system: str
    name: str
    id: int
    fields: tuple[Field, ...]
    print_fmt: str = ""
    common: tuple[Field, ...] = field(default=())

    def decode(self, rec: bytes | memoryview) -> dict[str, int | str | bytes]:
        out: dict[str, int | str | bytes] = {}
        for f in self.fields:
            if f.offset + (0 if f.array_len == 0 else f.size) > len(rec) and not f.data_loc:
                continue  # a truncated record; keep what is there
            out[f.name] = f.decode(rec)
        return out


def parse_format(text: str, system: str = "") -> EventFormat:
    name = ""
    ev_id = -1
    print_fmt = ""
    for line in text.splitlines():
        if line.startswith("name:"):
            name = line.split(":", 1)[1].strip()
        elif line.startswith("ID:"):
            ev_id = int(line.split(":", 1)[1])
        elif line.startswith("print fmt:"):
            print_fmt = line.split(":", 1)[1].strip()
    all_fields = parse_fields(text)
    common = tuple(f for f in all_fields if f.name.startswith("common_"))
    own = tuple(f for f in all_fields if not f.name.startswith("common_"))
    if not name or ev_id < 0:
        raise ValueError("not an event format file (no name/ID)")
    return EventFormat(system, name, ev_id, own, print_fmt, common)


@dataclass(frozen=True)
class PageHeader:
    """Layout of a ring-buffer sub-buffer ("page") from `events/header_page`."""

    timestamp_offset: int = 0
    commit_offset: int = 8
    commit_size: int = 8
    data_offset: int = 16
    data_size: int = 4080

    @property
    def page_size(self) -> int:
        return self.data_offset + self.data_size


def parse_header_page(text: str) -> PageHeader:
    fields = {f.name: f for f in parse_fields(text)}
    try:
        ts, commit, data = fields["timestamp"], fields["commit"], fields["data"]
    except KeyError as exc:
        raise ValueError(f"header_page lacks field {exc}") from None
    return PageHeader(ts.offset, commit.offset, commit.size, data.offset, data.size)


@dataclass(frozen=True)
class EventHeader:
    """Constants of the compressed event header from `events/header_event`."""

    type_len_bits: int = 5
    time_delta_bits: int = 27
    padding: int = 29
    time_extend: int = 30
    time_stamp: int = 31
    data_max_type_len: int = 28


def parse_header_event(text: str) -> EventHeader:
    vals: dict[str, int] = {}
    for key, pat in (
        ("type_len_bits", r"type_len\s*:\s*(\d+)\s*bits"),
        ("time_delta_bits", r"time_delta\s*:\s*(\d+)\s*bits"),
        ("padding", r"padding\s*:\s*type\s*==\s*(\d+)"),
        ("time_extend", r"time_extend\s*:\s*type\s*==\s*(\d+)"),
        ("time_stamp", r"time_stamp\s*:\s*type\s*==\s*(\d+)"),
        ("data_max_type_len", r"data max type_len\s*==\s*(\d+)"),
    ):
        m = re.search(pat, text)
        if m:
            vals[key] = int(m.group(1))
    hdr = EventHeader(**vals)
    if hdr.type_len_bits + hdr.time_delta_bits != 32:
        raise ValueError("unsupported header_event layout (type_len + time_delta != 32 bits)")
    return hdr
