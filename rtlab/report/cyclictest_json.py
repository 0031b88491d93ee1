# SPDX-License-Identifier: MIT
"""A run in the JSON layout of `cyclictest --json=FILE` (rt-tests 2.x).

For pipelines that already read cyclictest's JSON (LAVA test definitions, board
farms, CI scripts): same keys, same nesting, same units. rt-tests writes the top
level in `rt_write_json` (src/lib/rt-utils.c) and the threads in cyclictest's
`write_stats`:

    file_version 1, "cmdline:", "rt_test_version:" (both keys with cyclictest's
    stray colon), start_time / end_time (RFC 2822), return_code, sysinfo {sysname,
    nodename, release, version, machine, realtime}, num_threads, resolution_in_ns,
    thread {"0": {histogram {"<µs>": count}, cycles, min, max, avg, cpu, node}, ...}

Threads are the run's headline channels (model.HEADLINE_CHANNELS: per CPU for the
timer probe, `rtt` for udp, the task channels of an rtla import), phase after phase
in order. Values are µs like cyclictest's default (`resolution_in_ns` 0): min and
max truncated to whole µs as cyclictest does, `avg` the exact mean in µs with two
decimals (cyclictest averages its truncated values, so its own is up to 1 µs lower;
kept within [min, max]), the histogram rtlab's re-binned into 1-µs buckets exactly as
the `cyclictest-hist` export does (only non-empty buckets are written, like
cyclictest), and `cycles` the sample count: samples beyond 1 s (cyclictest's largest
histogram) are in `cycles` but not in the histogram, as cyclictest's overflows.
`cpu` is -1 and `node` -1 where not known (cyclictest's "not pinned").

`return_code` is 0 only for a completed run whose numbers passed validation, with
real-time scheduling in effect (or unknown) and samples on every thread; 3 when a
threshold stopped it (rtlab's exit code), 1 otherwise — so a pipeline that checks
`return_code == 0` never passes a run rtlab does not believe.
`rt_test_version:` names rtlab's version ("rtlab X"). A top-level `rtlab` object
(ignored by cyclictest readers) gives the run id, status and each thread's phase
and channel.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from email.utils import format_datetime
from typing import Any

from rtlab import __version__
from rtlab.probes.registry import shape as probe_shape
from rtlab.report.cyclictest_hist import HIST_MAX, rebin_us
from rtlab.report.export_base import Exporter
from rtlab.results.model import Channel, Phase, RunResult
from rtlab.results.validate import first_problem


class CyclictestJsonExporter(Exporter):
    name, extension, media_type = "cyclictest-json", "json", "application/json"

    def serialize(self, result: RunResult) -> bytes:
        threads = list(result.headline_channels(probe_shape(result.probe)))
        version = result.provenance.get("host", {}).get("rtlab_version") or __version__
        doc: dict[str, Any] = {
            "file_version": 1,
            "cmdline:": _cmdline(result),
            "rt_test_version:": f"rtlab {version}",
            "start_time": "",
            "end_time": "",
            "return_code": return_code(result),
            "sysinfo": _sysinfo(result),
            "num_threads": len(threads),
            "resolution_in_ns": 0,
            "thread": {str(i): _thread(ch) for i, (_, ch) in enumerate(threads)},
            "rtlab": {"run_id": result.run_id, "status": result.status,
                      "probe": result.probe, "threads": _mapping(threads)},
        }
        doc["start_time"], doc["end_time"] = _times(result)
        return (json.dumps(doc, indent=2, ensure_ascii=False) + "\n").encode()


def return_code(result: RunResult) -> int:
    """0: a run rtlab believes (see the module docstring); 3: threshold; 1: anything else."""

    if result.status == "threshold":
        return 3
    if (result.status != "completed" or result.partial or result.rt_valid is False
            or first_problem(result) is not None):
        return 1
    if any(ch.samples == 0 for _, ch in result.headline_channels(probe_shape(result.probe))):
        return 1
    return 0


def _thread(ch: Channel) -> dict[str, Any]:
    if not ch.samples or ch.min_ns is None or ch.max_ns is None:
        return {"histogram": {}, "cycles": 0, "min": 0, "max": 0, "avg": 0.0,
                "cpu": _or_minus_one(ch.cpu), "node": -1}
    rows = min(ch.max_ns // 1000 + 1, HIST_MAX)
    counts, _overflow = rebin_us(ch.hist, rows, ch.min_ns, ch.max_ns)
    lo, hi = ch.min_ns // 1000, ch.max_ns // 1000
    avg = min(max(round(ch.sum_ns / ch.samples / 1000, 2), float(lo)), float(hi))
    return {"histogram": {str(i): n for i, n in enumerate(counts) if n},
            "cycles": ch.samples, "min": lo, "max": hi, "avg": avg,
            "cpu": _or_minus_one(ch.cpu), "node": -1}


def _or_minus_one(v: int | None) -> int:
    return -1 if v is None else v


def _mapping(threads: list[tuple[Phase, Channel]]) -> dict[str, dict[str, str]]:
    return {str(i): {"phase": p.name, "channel": ch.name} for i, (p, ch) in enumerate(threads)}


def _cmdline(result: RunResult) -> str:
    given = result.provenance.get("host", {}).get("command_line")
    if isinstance(given, list) and given:
        return " ".join(str(a) for a in given)
    return f"rtlab run {result.scenario.get('name') or ''}".strip()


def _sysinfo(result: RunResult) -> dict[str, Any]:
    s = result.system
    preempt = str(s.get("preempt") or "").lower()
    rt = s.get("realtime") is True or preempt in ("rt", "preempt_rt")
    return {"sysname": s.get("sysname") or "Linux",
            "nodename": s.get("hostname") or result.provenance.get("host", {}).get("hostname")
            or "",
            "release": s.get("release") or "", "version": s.get("version") or "",
            "machine": s.get("machine") or "", "realtime": 1 if rt else 0}


def _times(result: RunResult) -> tuple[str, str]:
    """start_time and end_time as cyclictest writes them ("%a, %d %b %Y %T %z");
    empty when the run does not say."""
    host = result.provenance.get("host", {})
    start, end = _parse(host.get("start_wall")), _parse(host.get("end_wall"))
    if end is None and start is not None and result.elapsed_ns:
        end = start + timedelta(microseconds=result.elapsed_ns // 1000)
    return (format_datetime(start) if start else "", format_datetime(end) if end else "")


def _parse(text: Any) -> datetime | None:
    if not isinstance(text, str):
        return None
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        return None
    return when if when.tzinfo is not None else None
