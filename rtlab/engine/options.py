# SPDX-License-Identifier: MIT
"""What an engine offers: its probe names and each probe's options.

Read from `rtlab-probe list --json` (the engine's declarative option tables as
JSON; never its human `--help` text). Only option names and which options are
flags are used here; the values themselves are validated by the engine, which
exits 2 (usage) before measuring anything.

`adapt_options` maps the host's common probe options (what a scenario's
`[[probe]]` and `--cpus/--interval/--priority/--policy` set) onto the options
a probe really has: `cpus` is cut to its first CPU for single-thread probes
(whose `--cpus` takes one CPU; `cpu` for one that still spells it so), and
options the probe does not have are left out. Old spellings the engine still
accepts (`alias_of` in the list) are known names; `check_option` turns them into
the current one (docs/vocabulary.md).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rtlab.engine.locate import find_probe
from rtlab.engine.transport import LocalTransport
from rtlab.errors import RtlabError, UsageError
from rtlab.probes.registry import info as probe_info

# host-side keys that every scenario probe carries; dropped when the probe lacks them
COMMON_KEYS = ("cpus", "policy", "priority", "interval_ns", "duration_ns",
               "snapshot_interval_ns", "allow_non_rt", "threshold_ns", "samples_file")


@dataclass(frozen=True)
class ProbeOptions:
    probe: str
    options: dict[str, bool]  # flag name (without --) -> True if it is a boolean flag
    one_cpu: frozenset[str] = frozenset()  # CPU-list options that take a single CPU
    aliases: dict[str, str] = field(default_factory=dict)  # old spelling -> option

    def has(self, key: str) -> bool:
        return flag_name(key) in self.options

    def is_flag(self, key: str) -> bool:
        return self.options.get(flag_name(key), False)

    def takes_one_cpu(self, key: str) -> bool:
        return flag_name(key) in self.one_cpu


_FLAGS = {"samples_file": "samples", "threshold_ns": "stop-threshold"}  # as argv.py maps them


def flag_name(key: str) -> str:
    """`snapshot_interval_ns` -> `snapshot-interval` (the engine's flag, as argv.py maps it)."""
    if key in _FLAGS:
        return _FLAGS[key]
    name = key[:-3] if key.endswith("_ns") else key
    return name.replace("_", "-")


def _run(probe_bin: str, args: list[str]) -> str:
    """This machine's engine (the same version as every board's: its option tables)."""

    r = LocalTransport(probe_bin).run(args, timeout_s=10)
    if r.returncode != 0:
        raise RtlabError(f"{probe_bin} {' '.join(args)} failed: "
                         f"{(r.stderr.strip().splitlines() or [f'exit {r.returncode}'])[-1]}")
    return r.stdout


def _bin(probe_bin: str | None) -> str:
    if probe_bin is not None:
        return probe_bin

    return str(find_probe())


@functools.cache
def _catalogue(probe_bin: str) -> dict[str, ProbeOptions]:
    """`rtlab-probe list --json` -> {probe: its options}, in the engine's order."""
    text = _run(probe_bin, ["list", "--json"])
    try:
        doc = json.loads(text)
        if doc.get("type") != "probes" or doc.get("schema") != 1:
            raise ValueError(f"type {doc.get('type')!r}, schema {doc.get('schema')!r}")
        return {
            p["name"]: ProbeOptions(
                p["name"], {o["name"]: o["type"] == "bool" for o in p["options"]},
                one_cpu=frozenset(o["name"] for o in p["options"]
                                  if o["type"] == "cpulist" and o.get("max") == 1),
                aliases={o["name"]: o["alias_of"] for o in p["options"] if o.get("alias_of")})
            for p in doc["probes"]
        }
    except (ValueError, KeyError, TypeError) as exc:
        raise RtlabError(f"{probe_bin} list --json: not a probe list this rtlab understands "
                         f"({exc})", hint="rebuild the engine: make setup") from exc


def _probe_names(probe_bin: str) -> tuple[str, ...]:
    return tuple(_catalogue(probe_bin))


def probe_names(probe_bin: str | None = None) -> tuple[str, ...]:
    """The measuring probes of the engine (`rtlab-probe list --json`)."""
    return _probe_names(_bin(probe_bin))


def probe_options(probe: str, probe_bin: str | None = None) -> ProbeOptions:
    """The options of one probe; UsageError (one line) for an unknown probe."""
    b = _bin(probe_bin)
    names = _probe_names(b)
    if probe not in names:
        raise UsageError(f"--probe {probe}: no such probe; allowed: {', '.join(names)}")
    return _catalogue(b)[probe]


def adapt_options(options: Mapping[str, Any], table: ProbeOptions) -> dict[str, Any]:
    """Common host options -> the probe's own (see the module doc). Probe-specific keys
    are kept as they are (they were validated against `table` by `check_option`)."""
    out: dict[str, Any] = {}
    for key, value in options.items():
        if key == "cpus" and table.takes_one_cpu("cpus"):
            cpus = list(value or [])
            if cpus:
                out["cpus"] = [int(cpus[0])]
            continue
        if key == "cpus" and not table.has("cpus"):
            cpus = list(value or [])
            if cpus and table.has("cpu") and "cpu" not in options:
                out["cpu"] = int(cpus[0])
            continue
        if key in COMMON_KEYS and not table.has(key):
            continue
        out[key] = value
    return out


def check_option(table: ProbeOptions, key: str, value: str) -> tuple[str, Any]:
    """One `--probe-opt KEY=VALUE`: (option key, value for argv.py). UsageError if the
    probe has no such option or a flag gets something other than true/false."""
    k = key.strip().lstrip("-").replace("-", "_")
    if not k or not table.has(k):
        known = ", ".join(sorted(o for o in table.options if o != "output"))
        raise UsageError(f"--probe-opt {key}={value}: `rtlab-probe {table.probe}` has no "
                         f"option --{flag_name(k)}; allowed: {known}")
    if flag_name(k) in ("output", "help"):
        raise UsageError(f"--probe-opt {key}: set by rtlab itself, not allowed here")
    old = table.aliases.get(flag_name(k))
    if old is not None:  # an old spelling: stored (and passed on) as the option it is
        k = old.replace("-", "_")
    if table.is_flag(k):
        low = value.strip().lower()
        if low in ("", "1", "true", "yes", "on"):
            return k, True
        if low in ("0", "false", "no", "off"):
            return f"no_{k}", True
        raise UsageError(f"--probe-opt {key}={value}: a flag; allowed: true or false")
    if value == "":
        raise UsageError(f"--probe-opt {key}=: needs a value")
    return k, value


def adapt_for(transport: Any, probe: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """`adapt_options` for a local engine (its tables are readable here); a probe that
    takes every common option (`ProbeInfo.takes_common_options`: timer) and engines whose
    tables cannot be read get the options unchanged."""
    if probe_info(probe).takes_common_options:
        return dict(options)
    path = getattr(transport, "probe", None)
    if path is None:  # a board: its engine is this machine's version, with the same tables
        try:
            path = _bin(None)
        except RtlabError:
            return dict(options)
    try:
        return adapt_options(options, probe_options(probe, str(path)))
    except RtlabError:
        return dict(options)
