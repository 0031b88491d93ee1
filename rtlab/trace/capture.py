# SPDX-License-Identifier: MIT
"""A recorded trace: raw ring-buffer pages per CPU plus the format files to decode them.

Pages are kept raw and decoded lazily, only around the time windows that are
asked for, so a long flight recording costs little CPU. A capture saves to and
loads from a directory (`meta.json`, `formats/`, `cpuN.pages`), which is also how
the test fixtures were recorded. The engine's flight recorder (`--trace-mode
flight`) writes the pages around each spike instead, in window files
`wSEQ-cpuN.pages` listed by `windows.jsonl` (docs/engine-output.md).
"""

from __future__ import annotations

import bisect
import json
import re
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rtlab.trace.formats import (
    EventFormat,
    EventHeader,
    PageHeader,
    parse_format,
    parse_header_event,
    parse_header_page,
    struct_prefix,
)
from rtlab.trace.ringbuf import Event, PageDecoder

CAPTURE_VERSION = 1
WINDOW_FILE = re.compile(r"^w(\d+)-cpu(\d+)\.pages$")
WINDOWS_LIST = "windows.jsonl"


@dataclass
class FormatSet:
    """Everything needed to decode pages: header layouts and event formats (by id)."""

    header_page_text: str
    header_event_text: str
    format_texts: dict[str, str]  # "system/name" -> format file text
    byte_order: str = "little"  # the recording kernel's: "little" or "big"

    def __post_init__(self) -> None:
        struct_prefix(self.byte_order)  # ValueError for anything else
        self.page_header: PageHeader = parse_header_page(self.header_page_text)
        self.event_header: EventHeader = parse_header_event(self.header_event_text)
        self.by_id: dict[int, EventFormat] = {}
        for key, text in self.format_texts.items():
            system = key.split("/", 1)[0]
            fmt = parse_format(text, system)
            self.by_id[fmt.id] = fmt

    def decoder(self) -> PageDecoder:
        return PageDecoder(self.by_id, self.page_header, self.event_header, self.byte_order)

    @classmethod
    def from_tracefs(cls, root: Path, events: Iterable[str]) -> FormatSet:
        texts = {}
        for ev in events:
            p = root / "events" / ev / "format"
            if p.exists():
                texts[ev] = p.read_text()
        return cls(
            (root / "events" / "header_page").read_text(),
            (root / "events" / "header_event").read_text(),
            texts,
        )

    def save(self, d: Path) -> None:
        d.mkdir(parents=True, exist_ok=True)
        (d / "header_page").write_text(self.header_page_text)
        (d / "header_event").write_text(self.header_event_text)
        for key, text in self.format_texts.items():
            (d / (key.replace("/", "__") + ".format")).write_text(text)

    @classmethod
    def load(cls, d: Path, byte_order: str = "little") -> FormatSet:
        texts = {
            p.name[: -len(".format")].replace("__", "/"): p.read_text()
            for p in sorted(d.glob("*.format"))
        }
        return cls(
            (d / "header_page").read_text(), (d / "header_event").read_text(), texts, byte_order
        )


def check_word_meta(meta: Mapping[str, object], formats: FormatSet) -> None:
    """Refuse a capture whose meta contradicts its format files (byte order, word size)."""
    order = meta.get("byte_order")
    if order is not None and order != formats.byte_order:
        raise ValueError(
            f"capture meta says byte_order {str(order)[:40]!r} but its formats are decoded as"
            f" {formats.byte_order!r}: load it with TraceCapture.load"
        )
    bits = meta.get("long_bits")
    commit_bits = formats.page_header.commit_size * 8
    if bits is not None and bits != commit_bits:
        raise ValueError(
            f"capture meta says long_bits {str(bits)[:20]} but its header_page has a"
            f" {commit_bits}-bit commit word: the format files are not the recording board's"
        )


@dataclass
class TraceCapture:
    """Raw pages per CPU, in ring-buffer order, with what is needed to decode them."""

    formats: FormatSet
    pages: dict[int, list[bytes]]
    clock: str = "mono"
    lost: dict[int, dict[str, int]] = field(default_factory=dict)  # per CPU counters
    evicted: dict[int, int] = field(default_factory=dict)  # pages aged out of host memory
    meta: dict[str, object] = field(default_factory=dict)
    symbols: Mapping[int, str] | None = None  # optional kernel address -> symbol

    def __post_init__(self) -> None:
        check_word_meta(self.meta, self.formats)
        self._decoder = self.formats.decoder()
        self._page_ts: dict[int, list[int]] = {}
        self._cache: dict[int, list[Event]] = {}
        # Pages decoded for the last window asked of each CPU: attribution asks for
        # overlapping windows in time order, so each page is decoded about once.
        self._recent: dict[int, dict[int, list[Event]]] = {}

    @property
    def cpus(self) -> list[int]:
        return sorted(self.pages)

    def events(self, cpu: int) -> list[Event]:
        """All events of one CPU, decoded (cached)."""
        if cpu not in self._cache:
            self._cache[cpu] = self._decoder.decode_pages(self.pages.get(cpu, []), cpu)
        return self._cache[cpu]

    def _starts(self, cpu: int) -> list[int]:
        if cpu not in self._page_ts:
            info = self._decoder.page_info
            self._page_ts[cpu] = [info(p).timestamp for p in self.pages.get(cpu, [])]
        return self._page_ts[cpu]

    def window(self, cpu: int, t0: int, t1: int) -> list[Event]:
        """Events of `cpu` with t0 <= ts <= t1, decoding only the pages that may hold them."""
        if cpu in self._cache:
            evs = self._cache[cpu]
            ts = [e.ts for e in evs]
            return evs[bisect.bisect_left(ts, t0) : bisect.bisect_right(ts, t1)]
        starts = self._starts(cpu)
        pages = self.pages.get(cpu, [])
        # The page holding t0 starts at or before t0.
        i = max(0, bisect.bisect_right(starts, t0) - 1)
        j = bisect.bisect_right(starts, t1)
        old = self._recent.get(cpu, {})
        recent = {
            k: old[k] if k in old else self._decoder.decode_page(pages[k], cpu) for k in range(i, j)
        }
        self._recent[cpu] = recent
        out = []
        for k in range(i, j):
            out.extend(e for e in recent[k] if t0 <= e.ts <= t1)
        return out

    def first_ts(self, cpu: int) -> int | None:
        starts = self._starts(cpu)
        return starts[0] if starts else None

    def last_ts(self, cpu: int) -> int | None:
        pages = self.pages.get(cpu, [])
        for p in reversed(pages):
            evs = self._decoder.decode_page(p, cpu)
            if evs:
                return evs[-1].ts
        return None

    def lost_in_pages(self, cpu: int) -> int:
        """Events the kernel reported as lost in page headers (-1 per page without a count)."""
        n = 0
        for p in self.pages.get(cpu, []):
            info = self._decoder.page_info(p)
            if info.missed_events:
                n += info.missed_count if info.missed_count is not None else 1
        return n

    def resolve(self, addr: int) -> str:
        if self.symbols:
            name = self.symbols.get(addr)
            if name:
                return name
        return f"{addr:#x}"

    def _used_symbols(self) -> dict[int, str]:
        """Names of the kernel functions referenced by hrtimer events (kept on save)."""
        if not self.symbols:
            return {}
        out: dict[int, str] = {}
        for cpu in self.cpus:
            for e in self.events(cpu):
                fn = e.fields.get("function") if e.name.startswith("hrtimer") else None
                if isinstance(fn, int) and fn not in out:
                    name = self.symbols.get(fn)
                    if name:
                        out[fn] = name
        return out

    # -- persistence ---------------------------------------------------------------

    def save(self, d: str | Path, pages: bool = True) -> Path:
        """Write the capture to `d` (`pages=False`: only meta.json, e.g. to add the names
        of its symbols to a capture the engine wrote)."""
        d = Path(d)
        d.mkdir(parents=True, exist_ok=True)
        if pages:
            self.formats.save(d / "formats")
            for cpu, cpu_pages in self.pages.items():
                with open(d / f"cpu{cpu}.pages", "wb") as f:
                    for p in cpu_pages:  # each page framed by its length (pages may be trimmed)
                        f.write(struct.pack("<I", len(p)))
                        f.write(p)
        meta = {
            "version": CAPTURE_VERSION,
            "clock": self.clock,
            "cpus": self.cpus,
            "lost": {str(k): v for k, v in self.lost.items()},
            "evicted": {str(k): v for k, v in self.evicted.items()},
            "meta": {**self.meta, "byte_order": self.formats.byte_order},
            "symbols": {f"{k:x}": v for k, v in self._used_symbols().items()},
        }
        tmp = d / "meta.json.tmp"
        tmp.write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")
        tmp.replace(d / "meta.json")
        return d

    @classmethod
    def load(cls, d: str | Path) -> TraceCapture:
        d = Path(d)
        meta = json.loads((d / "meta.json").read_text())
        if meta.get("version") != CAPTURE_VERSION:
            raise ValueError(f"{d}: unknown trace capture version {meta.get('version')!r}")
        inner = meta.get("meta", {})
        if not isinstance(inner, dict):
            raise ValueError(f"{d}: meta.json 'meta' is not an object")
        # Captures from before byte orders were recorded come from this machine: little.
        order = inner.get("byte_order", "little")
        try:
            struct_prefix(order)
        except ValueError as exc:
            raise ValueError(f"{d}: meta.json byte_order: {exc}") from None
        formats = FormatSet.load(d / "formats", order)
        flight = inner.get("mode") == "flight"
        windows = _window_files(d)
        pages: dict[int, list[bytes]] = {}
        for cpu in meta["cpus"]:
            cpu = int(cpu)
            whole = d / f"cpu{cpu}.pages"
            lst = _read_frames(whole) if whole.exists() or not flight else []
            for _seq, path in windows.get(cpu, []):
                lst.extend(_read_frames(path))
            if windows.get(cpu):
                lst = _time_ordered(lst, formats, d, cpu)
            pages[cpu] = lst
        return cls(
            formats,
            pages,
            clock=meta.get("clock", "mono"),
            lost={int(k): v for k, v in meta.get("lost", {}).items()},
            evicted={int(k): v for k, v in meta.get("evicted", {}).items()},
            meta=inner,
            symbols={int(k, 16): v for k, v in meta.get("symbols", {}).items()} or None,
        )


def _read_frames(path: Path) -> list[bytes]:
    """The pages of a pages file: each framed by its u32 little-endian length."""
    blob = path.read_bytes()
    lst, pos = [], 0
    while pos + 4 <= len(blob):
        (n,) = struct.unpack_from("<I", blob, pos)
        lst.append(blob[pos + 4 : pos + 4 + n])
        pos += 4 + n
    return lst


def _window_files(d: Path) -> dict[int, list[tuple[int, Path]]]:
    """A flight capture's window files per CPU, in window (seq) order. Temporary files
    (being written) are not window files: the engine renames a window when whole."""
    out: dict[int, list[tuple[int, Path]]] = {}
    for p in d.iterdir():
        m = WINDOW_FILE.match(p.name)
        if m:
            out.setdefault(int(m.group(2)), []).append((int(m.group(1)), p))
    for lst in out.values():
        lst.sort()
    return out


def _time_ordered(pages: list[bytes], formats: FormatSet, d: Path, cpu: int) -> list[bytes]:
    """One CPU's pages of all its windows in time order (by page timestamp). The engine
    writes a page at most once, so the same page twice is a broken capture: refused."""
    info = formats.decoder().page_info
    keyed = sorted(((info(p).timestamp, i) for i, p in enumerate(pages)))
    out: list[bytes] = []
    prev_ts: int | None = None
    for ts, i in keyed:
        if ts == prev_ts and pages[i] == out[-1]:
            raise ValueError(
                f"{d}: CPU {cpu}: a page (timestamp {ts}) is in two window files; the engine "
                "writes each page once, so the capture was changed or mixed with another"
            )
        out.append(pages[i])
        prev_ts = ts
    return out


def flight_windows(d: str | Path) -> list[dict[str, Any]]:
    """The lines of a flight capture's windows.jsonl, one per trigger (spike) in the order
    written: seq, channel, cpu, deadline_ns, wake_ns (absolute CLOCK_MONOTONIC), value_ns,
    kept, why (null, "merged", "rate", "aged" or "disk"), partial, pages, bytes and file
    (the window's pages of the trigger's CPU, or null). An unfinished last line (the
    engine stopped while writing it) is left out; a broken line elsewhere is refused."""
    path = Path(d) / WINDOWS_LIST
    text = path.read_text()
    lines = text.split("\n")
    if lines and lines[-1]:
        lines = lines[:-1]  # no newline yet: not finished
    out: list[dict[str, Any]] = []
    for n, line in enumerate(lines, 1):
        if not line:
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            raise ValueError(f"{path}: line {n} is not JSON") from None
        if not isinstance(rec, dict) or not {"seq", "channel", "deadline_ns", "wake_ns",
                                             "value_ns", "kept"} <= rec.keys():
            raise ValueError(f"{path}: line {n} is not a flight window record")
        out.append(rec)
    return out
