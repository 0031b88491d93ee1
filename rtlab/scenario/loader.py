# SPDX-License-Identifier: MIT
"""Reading and validating scenario files (TOML) into runnable `Scenario`s.

Everything is checked here, before anything starts or changes on the system:
unknown keys, types, durations, priorities, CPU expressions against the
online CPUs, overlapping shield sets, load kinds and parameters (through the
loads layer's parameter tables), loads named by phases and variants. The
first problem is raised as a one-line `UsageError` that names the file, the
line (when the key can be found in the text), the key path and what is
allowed. The file format is documented in docs/scenarios.md.
"""


from __future__ import annotations

import re
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rtlab.errors import RtlabError
from rtlab.fileio import read_text_input
from rtlab.scenario import sections
from rtlab.scenario.fields import Ctx, Getter, ScenarioError, check_keys, sub_table, table_array
from rtlab.scenario.model import Phase, ProbeSpec, ReflectorSpec, Scenario, ShieldSpec
from rtlab.scenario.sections import NAME_RE, SCENARIO_KEYS, TOP_KEYS, check_matrix_size
from rtlab.scenario.units import online_cpus
from rtlab.textfmt import shown

__all__ = ["ScenarioError", "ScenarioFile", "declared_targets", "load_file", "parse_text",
           "read_scenario_text", "toml_document"]


@dataclass(frozen=True)
class ScenarioFile:
    """A parsed file: its variants (one without a matrix), each a runnable Scenario."""

    name: str
    description: str
    source: str
    text: str
    variants: tuple[Scenario, ...]
    has_matrix: bool
    reflector: ReflectorSpec | None = None  # [reflector]: the udp reflector's board

def read_scenario_text(path: Path | str) -> str:
    """A scenario file's text, read the one safe way (rtlab.fileio: a regular file of at
    most 4 MiB, UTF-8 text; anything else is one line, exit 2)."""
    try:
        text = read_text_input(path, "scenario file")
    except RtlabError as exc:  # one kind of error for `rtlab scenarios check --json`
        raise ScenarioError(str(path), None, exc.one_line(), exc.one_line()) from None
    if not text.strip():  # not "the defaults": a file emptied by mistake runs nothing
        raise ScenarioError(str(path), None, "the scenario file is empty",
                            f"scenario file {shown(str(path), 200)} is empty: nothing to run")
    return text


def toml_document(text: str, source: str) -> dict[str, Any]:
    """The TOML document of a scenario text; ScenarioError (one line, with the line where
    the parser knows it) when it is not valid TOML or nests too deeply to read."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        m = re.search(r"\(at line (\d+), column (\d+)\)", str(exc))
        msg = re.sub(r"\s*\(at line \d+, column \d+\)", "", str(exc))
        raise ScenarioError(source, int(m.group(1)) if m else None,
                            f"not valid TOML: {msg}") from None
    except RecursionError:
        raise ScenarioError(source, None, "arrays or tables nested too deeply to read "
                            "(a scenario needs a few levels)") from None


def declared_targets(path: Path | str) -> list[str]:
    """The boards a scenario file names (`[scenario] targets`), checked; [] if none."""
    p = Path(path)
    text = read_scenario_text(p)
    ctx = Ctx(str(p), text)
    try:
        doc = toml_document(text, str(p))
    except ScenarioError:
        return []  # the full parse says what is wrong, with the line
    head = doc.get("scenario")
    return sections.targets(ctx, head) if isinstance(head, dict) else []


def parse_text(text: str, source: str = "<scenario>", online: Sequence[int] | None = None,
               default_name: str | None = None) -> ScenarioFile:
    """Parse and validate a scenario text; UsageError naming source:line on any problem."""
    ctx = Ctx(source, text)
    # before the TOML parse: a file of 200,000 [[matrix.variant]] headers fails at once
    check_matrix_size(ctx, sum(1 for _, n, arr in ctx.headers if arr and n == "matrix.variant"))
    doc = toml_document(text, source)
    cpus = sorted(online) if online is not None else online_cpus()
    check_keys(ctx, doc, TOP_KEYS, "", None, None)
    head = sub_table(ctx, doc, "scenario")
    check_keys(ctx, head, SCENARIO_KEYS, "scenario", "scenario", None)
    g = Getter(ctx, head, "scenario", "scenario", None)
    name = g.str("name", default_name or "unnamed", NAME_RE,
                 "a name of letters, digits, _ . -")
    description = g.str("description", "") or ""
    sections.targets(ctx, head)
    assert name is not None

    shield_raw = sub_table(ctx, doc, "shield")
    shield = (sections.shield(ctx, shield_raw, cpus, "shield", "shield", None)
              if "shield" in doc else None)
    trace = sections.trace(ctx, sub_table(ctx, doc, "trace")) if "trace" in doc else None
    loads = sections.loads(ctx, table_array(ctx, doc, "load"), cpus, shield)
    probes = sections.probes(ctx, table_array(ctx, doc, "probe"), cpus, shield)
    phases = sections.phases(ctx, table_array(ctx, doc, "phase"), loads)
    variants = (sections.variants(ctx, sub_table(ctx, doc, "matrix"), loads) if "matrix" in doc
                else [{"name": None, "description": "", "shield": True, "loads": None,
                       "index": None}])

    out: list[Scenario] = []
    for v in variants:
        vshield: ShieldSpec | None = shield
        if v["shield"] is False:
            vshield = None
        elif isinstance(v["shield"], dict):
            merged = {**shield_raw, **v["shield"]}
            vshield = sections.shield(ctx, merged, cpus, f"matrix.variant[{v['index']}].shield",
                              "matrix.variant", v["index"])
        vprobes, vloads = probes, loads
        if vshield is not shield:  # CPU words like "user" follow the variant's shield
            vprobes = sections.probes(ctx, table_array(ctx, doc, "probe"), cpus, vshield)
            vloads = sections.loads(ctx, table_array(ctx, doc, "load"), cpus, vshield)
        enabled = v["loads"]
        built: list[Phase] = []
        for pname, dur, active in phases:
            act = tuple(n for n in active if enabled is None or n in enabled)
            ps = [ProbeSpec(p.name, {**p.options, "duration_ns": dur}, p.label)
                  for p in vprobes]
            built.append(Phase(pname, ps[0], dur, "+".join(act) if act else "idle",
                               act, tuple(ps[1:])))
        used = {n for p in built for n in p.loads}
        out.append(Scenario(
            name=name, description=description, phases=tuple(built),
            loads=tuple(ld for ld in vloads if ld.name in used), shield=vshield,
            variant=v["name"], source=source, text=text, trace=trace))
    reflector = (sections.reflector(ctx, sub_table(ctx, doc, "reflector")) if "reflector" in doc
                 else None)
    return ScenarioFile(name, description, source, text, tuple(out), "matrix" in doc,
                        reflector)


def load_file(path: Path | str, online: Sequence[int] | None = None) -> ScenarioFile:
    p = Path(path)
    return parse_text(read_scenario_text(p), str(p), online, default_name=p.stem)

