# SPDX-License-Identifier: MIT
"""jitterdebugger `results.json`, every layout it has written.

* no `version` (jitterdebugger 0.1, before January 2019) and version 1 (0.2 to 0.3.1):
  only `cpu` (per measuring thread: `histogram`, `count`, `min`, `max`, `avg`), µs;
* version 2 (February 2019): adds `sysinfo` (uname fields, `cpus_online`), µs;
* version 3 (September 2019 on): `sysinfo.resolution_in_ns` (1000, or 1 with -N).

The keys of `cpu` are jitterdebugger's thread numbers; with the default affinity
(every online CPU) thread N runs on the N-th CPU of the set.
"""

from __future__ import annotations

import json
import re

from rtlab.results.importers.common import (
    ImportFormatError,
    as_int,
    channel_from_record,
    imported_result,
    int_keyed,
    json_document,
    need,
    uname_system,
)
from rtlab.results.model import RunResult

# jitterdebugger prints each CPU's avg as total/count with "%.2f": for a CPU whose
# thread never measured (count 0) that is "-nan", which is not JSON.
_NAN_AVG = re.compile(r'"(\d+)"\s*:\s*\{\s*"histogram"\s*:\s*\{[^{}]*\}\s*,\s*"count"\s*:\s*'
                      r'(\d+)\s*,[^{}]*?"avg"\s*:\s*(?P<nan>-?nan)\b', re.IGNORECASE)


_VERSIONS = (1, 2, 3)  # and none at all


def _invalid_json(text: str, exc: json.JSONDecodeError) -> ImportFormatError:
    """That defect, named (when it is what the parser stopped at), else the parser's words."""
    starved = [(m.group(1), int(m.group(2)), m.start("nan")) for m in _NAN_AVG.finditer(text)]
    if starved and starved[0][2] == exc.pos and all(n == 0 for _, n, _ in starved):
        cpus = ", ".join(cpu for cpu, _, _ in starved)
        return ImportFormatError(
            f"cpu {cpus}: jitterdebugger measured nothing there (count 0) and wrote its avg as "
            f"-nan, which is not JSON (line {exc.lineno}): that CPU's thread never ran during "
            "the run (a higher-priority task held the CPU), so its latency is unknown; "
            "measure again, or leave that CPU out with jitterdebugger -a")
    return ImportFormatError(f"invalid JSON ({exc})")


def parse(text: str, run_id: str) -> RunResult:
    doc = json_document(text, "cpu", "a jitterdebugger results.json",
                        lambda exc: _invalid_json(text, exc))
    version = doc.get("version")
    if version is not None and (type(version) is not int or version not in _VERSIONS):
        raise ImportFormatError(f"unsupported version {version!r} (this rtlab reads "
                                "results.json without a version and versions 1 to 3)")
    sysinfo = doc.get("sysinfo") if isinstance(doc.get("sysinfo"), dict) else {}
    res = sysinfo.get("resolution_in_ns", 1000) if version == 3 else 1000
    unit_ns = as_int(res, "resolution_in_ns") if res else 1000
    channels, notes = [], []
    beyond: dict[str, dict[str, int]] = {}
    for key in sorted(doc["cpu"], key=lambda k: as_int(k, "cpu")):
        c = doc["cpu"][key]
        if not isinstance(c, dict) or not isinstance(c.get("histogram"), dict):
            raise ImportFormatError(f"cpu {key} has no histogram")
        cpu = as_int(key, "cpu")
        what = f"cpu {key}"
        count = as_int(need(c, "count", what), f"{what} count")
        buckets = int_keyed(c["histogram"], what)
        ch, overflow, above = channel_from_record(f"cpu{cpu}", cpu, buckets, c, what, count,
                                                  unit_ns)
        if overflow:
            beyond[ch.name] = {"count": overflow, "above_ns": above}
            notes.append(f"{ch.name}: {overflow} sample(s) missing from jitterdebugger's "
                         "histogram (it drops values beyond its range) placed at the max")
        channels.append(ch)
    if not channels:
        raise ImportFormatError("no CPUs")
    return imported_result(
        run_id, probe="timer", tool="jitterdebugger", fmt="jitterdebugger", channels=channels,
        system=uname_system(sysinfo), notes=notes, resolution_ns=unit_ns,
        tool_version=f"results.json v{version}" if version else "results.json (no version)",
        beyond=beyond)
