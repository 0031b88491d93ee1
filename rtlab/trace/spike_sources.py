# SPDX-License-Identifier: MIT
"""Where the spikes to explain come from: the probe's --samples file (every sample over a
threshold) or the probe's own `rtlab spike` markers in the trace."""

from __future__ import annotations

import re
import struct
from collections.abc import Iterable, Sequence
from pathlib import Path

from rtlab.trace.causes import Spike
from rtlab.trace.ringbuf import Event

SAMPLES_MAGIC = b"RTLABSMP"


def read_samples(path: str | Path) -> list[tuple[int, int, int]]:
    """The probe's --samples file -> [(channel_index, at_ns, value_ns)] (see engine-output.md)."""
    data = Path(path).read_bytes()
    if len(data) < 16 or data[:8] != SAMPLES_MAGIC:
        raise ValueError(f"{path}: not an rtlab samples file")
    version, rsize = struct.unpack_from("<II", data, 8)
    if version != 1 or rsize < 24:
        raise ValueError(f"{path}: unsupported samples version {version} / record size {rsize}")
    out = []
    for off in range(16, len(data) - rsize + 1, rsize):
        ch, _res, at, val = struct.unpack_from("<IIQQ", data, off)
        out.append((ch, at, val))
    return out


def spikes_from_samples(
    samples: Iterable[tuple[int, int, int]],
    start_monotonic_ns: int,
    threshold_ns: int,
    channel_cpus: Sequence[int | None],
    channel_tids: Sequence[int | None] | None = None,
    at_is_deadline: bool = True,
) -> list[Spike]:
    """Samples above `threshold_ns` -> Spikes. `at_ns` is the deadline (or, with
    at_is_deadline=False, the wake time) relative to start_monotonic_ns."""
    out = []
    for ch, at, val in samples:
        if val <= threshold_ns or ch >= len(channel_cpus) or channel_cpus[ch] is None:
            continue
        t = start_monotonic_ns + at
        d, w = (t, t + val) if at_is_deadline else (t - val, t)
        tid = channel_tids[ch] if channel_tids and ch < len(channel_tids) else None
        out.append(Spike(int(channel_cpus[ch]), d, w, tid, "samples"))  # type: ignore[arg-type]
    return out


_MARKER_RE = re.compile(r"\brtlab spike\b(?P<kv>.*)$")


def parse_spike_marker(text: str, ts: int, start_monotonic_ns: int | None = None) -> Spike | None:
    """`rtlab spike cpu=N lat=NNN [deadline=ABS_NS | at=REL_NS] [tid=T]` -> Spike.

    `deadline` is absolute CLOCK_MONOTONIC ns, `at` the deadline relative to the
    run start. Without either, the marker's own time stamp is taken as the wake time
    (an upper bound: the marker is written after the wake-up).
    """
    m = _MARKER_RE.search(text)
    if not m:
        return None
    kv = dict(re.findall(r"(\w+)=(-?\d+)", m["kv"]))
    if "cpu" not in kv or "lat" not in kv:
        return None
    lat = int(kv["lat"])
    if "deadline" in kv:
        dl = int(kv["deadline"])
    elif "at" in kv and start_monotonic_ns is not None:
        dl = start_monotonic_ns + int(kv["at"])
    else:
        dl = ts - lat
    tid = int(kv["tid"]) if "tid" in kv else None
    return Spike(int(kv["cpu"]), dl, dl + lat, tid, "marker")


def spikes_from_markers(
    events: Iterable[Event], start_monotonic_ns: int | None = None
) -> list[Spike]:
    out = []
    for ev in events:
        if ev.name == "print":
            s = parse_spike_marker(str(ev.fields.get("buf", "")), ev.ts, start_monotonic_ns)
            if s:
                out.append(s)
    return out
