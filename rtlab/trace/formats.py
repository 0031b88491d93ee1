# SPDX-License-Identifier: MIT
"""Parsers for tracefs self-descriptions: `events/header_page` and `events/*/*/format`.

The kernel describes every binary layout it hands out through tracefs in text
files. We read the layouts from those files instead of hard-coding offsets, so
the decoder follows field changes between kernel versions (see docs/tracing.md).
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable
from dataclasses import dataclass, field

_FIELD_RE = re.compile(
    r"^\s*field:\s*(?P<decl>[^;]+);\s*offset:(?P<offset>\d+);\s*size:(?P<size>\d+);"
    r"\s*signed:(?P<signed>\d+);"
)
_INT_FORMATS = {1: "B", 2: "H", 4: "I", 8: "Q"}

# The byte orders a recording may have (meta "byte_order"), and their struct prefix.
BYTE_ORDERS = {"little": "<", "big": ">"}
# Precompiled integer structs per (byte order, size, signed): decoding is on the hot path.
INT_STRUCTS = {
    (order, size, signed): struct.Struct(prefix + (code.lower() if signed else code))
    for order, prefix in BYTE_ORDERS.items()
    for size, code in _INT_FORMATS.items()
    for signed in (False, True)
}

FieldValue = int | str | bytes


def struct_prefix(byte_order: str) -> str:
    """The struct prefix of a byte order ("little" -> "<"); ValueError names what is allowed."""
    prefix = BYTE_ORDERS.get(byte_order) if isinstance(byte_order, str) else None
    if prefix is None:
        raise ValueError(f"unknown byte order {str(byte_order)[:40]!r}: expected 'little' or 'big'")
    return prefix


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
    rel_loc: bool = False  # `__rel_loc T[] name`: as data_loc, offset from the field's end

    @property
    def is_string(self) -> bool:
        return "char" in self.ctype and (
            self.array_len is not None or self.data_loc or self.rel_loc
        )

    def decode(self, rec: bytes | memoryview, byte_order: str = "little") -> FieldValue:
        """Decode this field from one event record (the payload, common fields first),
        written in `byte_order` ("little" or "big", the recording machine's)."""
        struct_prefix(byte_order)
        return self.reader(byte_order)(rec)

    def reader(self, byte_order: str = "little") -> Callable[[bytes | memoryview], FieldValue]:
        """A function that decodes this field from a record: built once per byte order."""
        off, size = self.offset, self.size
        if self.data_loc or self.rel_loc:
            loc_unpack = INT_STRUCTS[byte_order, 4, False].unpack_from  # u32 on every word size
            # __rel_loc offsets count from the end of the u32 itself, __data_loc from
            # the start of the record.
            base = off + 4 if self.rel_loc else 0
            as_str = "char" in self.ctype

            def read_loc(rec: bytes | memoryview) -> FieldValue:
                (loc,) = loc_unpack(rec, off)
                start = base + (loc & 0xFFFF)
                raw = bytes(rec[start : start + (loc >> 16)])
                return _cstr(raw) if as_str else raw

            return read_loc
        if self.array_len is not None:
            as_str = "char" in self.ctype
            if self.array_len == 0:
                if as_str:
                    return lambda rec: _cstr(bytes(rec[off:]))
                return lambda rec: bytes(rec[off:])
            if as_str:
                return lambda rec: _cstr(bytes(rec[off : off + size]))
            return lambda rec: bytes(rec[off : off + size])
        st = INT_STRUCTS.get((byte_order, size, self.signed))
        if st is None:
            return lambda rec: bytes(rec[off : off + size])
        unpack = st.unpack_from
        return lambda rec: unpack(rec, off)[0]

    @property
    def end(self) -> int:
        """The record length this field needs to be decoded."""
        if self.data_loc or self.rel_loc:
            return self.offset + 4
        if self.array_len == 0:
            return self.offset
        return self.offset + self.size


def _cstr(raw: bytes) -> str:
    return raw.split(b"\0", 1)[0].decode("utf-8", "replace")


def _parse_decl(decl: str) -> tuple[str, str, str, int | None]:
    """`__data_loc char[] name` / `char prev_comm[16]` / `pid_t pid` -> parts.

    The third part is "data" for `__data_loc`, "rel" for `__rel_loc`, else ""."""
    decl = decl.strip()
    loc = ""
    for prefix, kind in (("__data_loc ", "data"), ("__rel_loc ", "rel")):
        if decl.startswith(prefix):
            decl, loc = decl[len(prefix) :], kind
    array_len: int | None = None
    m = re.match(r"^(?P<type>.*?)\s*(?P<name>[A-Za-z_]\w*)\s*\[(?P<n>\d*)\]$", decl)
    if m and not loc:
        array_len = int(m["n"]) if m["n"] else 0
        return m["name"], m["type"].strip(), "", array_len
    ctype, _, name = decl.rpartition(" ")
    if loc:
        ctype = ctype.replace("[]", "").strip()
    return name.strip(), ctype.strip(), loc, array_len


def parse_fields(text: str) -> list[Field]:
    fields = []
    for line in text.splitlines():
        m = _FIELD_RE.match(line)
        if not m:
            continue
        name, ctype, loc, array_len = _parse_decl(m["decl"])
        fields.append(
            Field(
                name=name,
                ctype=ctype,
                offset=int(m["offset"]),
                size=int(m["size"]),
                signed=m["signed"] == "1",
                data_loc=loc == "data",
                array_len=array_len,
                rel_loc=loc == "rel",
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
    # (name, record length needed, reader) per field, built once per byte order
    _readers: dict[str, tuple[tuple[str, int, Callable[[bytes | memoryview], FieldValue]], ...]] = (
        field(default_factory=dict, init=False, repr=False, compare=False, hash=False)
    )

    def readers(
        self, byte_order: str = "little"
    ) -> tuple[tuple[str, int, Callable[[bytes | memoryview], FieldValue]], ...]:
        plan = self._readers.get(byte_order)
        if plan is None:
            struct_prefix(byte_order)
            plan = tuple((f.name, f.end, f.reader(byte_order)) for f in self.fields)
            self._readers[byte_order] = plan
        return plan

    def decode(self, rec: bytes | memoryview, byte_order: str = "little") -> dict[str, FieldValue]:
        """The event's own fields (not the common ones) from one record in `byte_order`."""
        out: dict[str, FieldValue] = {}
        n = len(rec)
        for name, end, read in self.readers(byte_order):
            if end <= n:  # a truncated record: keep what is there
                out[name] = read(rec)
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
