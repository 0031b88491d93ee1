# SPDX-License-Identifier: MIT
"""Where a run's raw files go, beside the store: one engine JSON Lines file per phase
and probe, named so that `rtlab results import` can rebuild a run whose host died
(rtlab.runner.importer), and the run's layout file that lists them.

    ID.jsonl                     the first phase's (first) probe: store.raw_path(ID)
    ID.N-PHASE.jsonl             phase N's probe
    ID.N-PHASE-LABEL.jsonl       phase N's probe LABEL, when the phase runs several
    ID.N-PHASE...-outside.jsonl  the part of a probe outside a cgroup v2 partition
    ID.layout.json               every phase's name and files (and the [trace] table of a
                                 traced run), written before the run
"""

from __future__ import annotations

import json
import re
from contextlib import suppress
from pathlib import Path

from rtlab.scenario.model import Phase, ProbeSpec, Scenario

LAYOUT_SUFFIX = ".layout.json"
SPLIT_SUFFIX = "-outside.jsonl"  # the part of a split probe outside the partition
_PHASE_RAW = re.compile(r"[^.]+\.\d+-.+\.jsonl")


def write_layout(first: Path, run_id: str, scenario: Scenario) -> None:
    """`runs/ID.layout.json` beside the raw files, before anything runs: every phase's
    name and its raw files with their probe labels, so that `rtlab results import` can
    rebuild a run whose host died without guessing from file names. Best effort."""
    phases = [{"name": ph.name,
               "files": [{"label": (p.label or p.name) if ph.more_probes else None,
                          "file": raw_for(first, run_id, scenario, i, ph, p).name}
                         for p in ph.probes]}
              for i, ph in enumerate(scenario.phases)]
    doc: dict[str, object] = {"version": 1, "run_id": run_id, "phases": phases}
    if scenario.trace is not None and scenario.trace.enabled:
        doc["trace"] = scenario.trace.to_dict()  # the threshold an import attributes with
    with suppress(OSError):
        first.parent.mkdir(parents=True, exist_ok=True)
        first.with_name(run_id + LAYOUT_SUFFIX).write_text(json.dumps(doc, indent=1) + "\n")


def discard_unmeasured(first: Path, run_id: str, scenario: Scenario) -> None:
    """Nothing was stored (the engine refused its options, a privilege was missing, the
    run was stopped at once): leave no trace of it in the store, unless an engine wrote
    something (then its raw files and layout stay for `rtlab results import`)."""
    raws = [raw_for(first, run_id, scenario, i, ph, p)
            for i, ph in enumerate(scenario.phases) for p in ph.probes]
    raws += sorted(first.parent.glob(f"{run_id}.*{SPLIT_SUFFIX}"))
    if any(r.exists() and r.stat().st_size > 0 for r in raws):
        return
    for path in [*raws, first.with_name(run_id + LAYOUT_SUFFIX)]:
        with suppress(OSError):
            path.unlink()


def raw_for(first: Path, run_id: str, scenario: Scenario, index: int, phase: Phase,
            probe: ProbeSpec) -> Path:
    """The raw file of `probe` in phase `index`."""
    if index == 0 and probe is phase.probe:
        return first  # the run's raw file (store.raw_path) is its first phase's
    suffix = f"-{probe.label or probe.name}" if phase.more_probes else ""
    return first.with_name(f"{run_id}.{index + 1}-{phase.name}{suffix}.jsonl")


def layout_add(first: Path, run_id: str, index: int, raw: Path) -> None:
    """One more raw file of phase `index` in the run's layout (a probe split in two by
    a cgroup v2 partition), so that `rtlab results import` merges it too. Best effort."""
    path = first.with_name(run_id + LAYOUT_SUFFIX)
    with suppress(OSError, ValueError, KeyError, IndexError, TypeError, AttributeError):
        doc = json.loads(path.read_text())
        files = doc["phases"][index]["files"]
        if all(f.get("file") != raw.name for f in files):
            files.append({"label": None, "file": raw.name})
            tmp = path.with_name(path.name + ".tmp")
            tmp.write_text(json.dumps(doc, indent=1) + "\n")
            tmp.replace(path)


def split_raw(raw: Path, scenario: Scenario) -> Path:
    """The raw file of a probe's part outside a cgroup v2 partition, beside `raw`."""
    split = raw.with_name(raw.name.removesuffix(".jsonl") + SPLIT_SUFFIX)
    if _PHASE_RAW.fullmatch(raw.name) is None:  # the run's first file ID.jsonl
        split = raw.with_name(f"{raw.stem}.1-{scenario.phases[0].name}{SPLIT_SUFFIX}")
    return split
