# SPDX-License-Identifier: MIT
"""What an engine offers: its probe names and each probe's options.

The engine's option tables are declarative and `rtlab-probe PROBE --help` is
generated from them: every option line starts with two spaces and `--name`
(`--name, --no-name` for a flag). That generated first column is the only
thing read here; the values themselves are validated by the engine, which
exits 2 (usage) before measuring anything.

`adapt_options` maps the host's common probe options (what a scenario's
`[[probe]]` and `--cpus/--interval/--priority/--policy` set) onto the options
a probe really has: `cpus` becomes `cpu` (its first CPU) for single-thread
probes, and options the probe does not have are left out.
"""

from __future__ import annotations

import functools
import re
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rtlab.errors import RtlabError, UsageError

_OPT_LINE = re.compile(r"^  --([a-z][a-z0-9-]*)(, --no-[a-z0-9-]+)?(?:\s|$)")
# host-side keys that every scenario probe carries; dropped when the probe lacks them
COMMON_KEYS = ("cpus", "policy", "priority", "interval_ns", "duration_ns",
               "snapshot_interval_ns", "allow_non_rt", "threshold_ns", "samples_file")


@dataclass(frozen=True)
class ProbeOptions:
    probe: str
    options: dict[str, bool]  # flag name (without --) -> True if it is a boolean flag

    def has(self, key: str) -> bool:
        return flag_name(key) in self.options

    def is_flag(self, key: str) -> bool:
        return self.options.get(flag_name(key), False)


def flag_name(key: str) -> str:
    """`snapshot_interval_ns` -> `snapshot-interval` (the engine's flag, as argv.py maps it)."""
    if key == "samples_file":
        return "samples"
    name = key[:-3] if key.endswith("_ns") else key
    return name.replace("_", "-")


def _run(probe_bin: str, args: list[str]) -> str:
    try:
        r = subprocess.run([probe_bin, *args], capture_output=True, text=True, timeout=10,
                           check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RtlabError(f"cannot run {probe_bin} {' '.join(args)}: {exc}") from exc
    if r.returncode != 0:
        raise RtlabError(f"{probe_bin} {' '.join(args)} failed: "
                         f"{(r.stderr.strip().splitlines() or [f'exit {r.returncode}'])[-1]}")
    return r.stdout


def _bin(probe_bin: str | None) -> str:
    if probe_bin is not None:
        return probe_bin
    from rtlab.engine.locate import find_probe

    return str(find_probe())


@functools.cache
def _probe_names(probe_bin: str) -> tuple[str, ...]:
    return tuple(line.split()[0] for line in _run(probe_bin, ["list"]).splitlines()
                 if line.strip() and not line.startswith(" "))


def probe_names(probe_bin: str | None = None) -> tuple[str, ...]:
    """The measuring probes of the engine (`rtlab-probe list`)."""
    return _probe_names(_bin(probe_bin))


@functools.cache
def _probe_options(probe_bin: str, probe: str) -> ProbeOptions:
    opts: dict[str, bool] = {}
    for line in _run(probe_bin, [probe, "--help"]).splitlines():
        m = _OPT_LINE.match(line)
        if m and m.group(1) != "help":
            opts[m.group(1)] = m.group(2) is not None
    return ProbeOptions(probe, opts)


def probe_options(probe: str, probe_bin: str | None = None) -> ProbeOptions:
    """The options of one probe; UsageError (one line) for an unknown probe."""
    b = _bin(probe_bin)
    names = _probe_names(b)
    if probe not in names:
        raise UsageError(f"--probe {probe}: no such probe; allowed: {', '.join(names)}")
    return _probe_options(b, probe)


def adapt_options(options: Mapping[str, Any], table: ProbeOptions) -> dict[str, Any]:
    """Common host options -> the probe's own (see the module doc). Probe-specific keys
    are kept as they are (they were validated against `table` by `check_option`)."""
    out: dict[str, Any] = {}
    for key, value in options.items():
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
    """`adapt_options` for a local engine (its tables are readable here); the timer probe
    and engines whose tables cannot be read get the options unchanged."""
    path = getattr(transport, "probe", None) if probe != "timer" else None
    if path is None:
        return dict(options)
    try:
        return adapt_options(options, probe_options(probe, str(path)))
    except RtlabError:
        return dict(options)
