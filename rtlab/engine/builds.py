# SPDX-License-Identifier: MIT
"""The static engines for boards: which build a board needs, where it is, and
whether an engine found on a board may be used.

`scripts/cross-build.sh` (run by `make setup`) installs one statically linked
`rtlab-probe` per build architecture as `<engines_dir()>/<arch>/rtlab-probe`. The
board's `uname -m` picks the build (`engine_for`); before an engine is used, its
`rtlab-probe --version --json` record (`parse_version`) is checked against the
board and this rtlab (`check_engine`): same architecture, same version (the
engine's version is the meson project version, kept equal to `rtlab.__version__`),
schemas this rtlab reads (docs/engine-output.md, docs/sys-protocol.md).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

from rtlab.engine.jsonl import SUPPORTED_SCHEMAS
from rtlab.engine.locate import PROBE_NAME
from rtlab.errors import RtlabError

ENV_VAR = "RTLAB_ENGINES"

# The build architectures, as the engine names them (`arch` of its version record).
ARCHES: tuple[str, ...] = ("x86_64", "aarch64", "armhf", "ppc64", "ppc")

# `uname -m` of a board -> the build it runs.
MACHINE_ARCH: Mapping[str, str] = MappingProxyType({
    "x86_64": "x86_64",
    "aarch64": "aarch64",
    "arm64": "aarch64",
    "armv7l": "armhf",
    "armv7hl": "armhf",
    "armv8l": "armhf",  # a 32-bit userland on an ARMv8 CPU
    # ARMv6 (the first Raspberry Pi, Pi Zero): best effort only, the armhf build is
    # ARMv7 code (Debian's armhf baseline) and may stop on an illegal instruction.
    "armv6l": "armhf",
    "ppc64": "ppc64",  # big-endian; ppc64le is another build, not made
    "ppc": "ppc",
})

# The Debian packages that build each architecture (scripts/cross-build.sh).
TOOLCHAINS: Mapping[str, str] = MappingProxyType({
    "x86_64": "gcc-x86-64-linux-gnu libc6-dev-amd64-cross",
    "aarch64": "gcc-aarch64-linux-gnu libc6-dev-arm64-cross",
    "armhf": "gcc-arm-linux-gnueabihf libc6-dev-armhf-cross",
    "ppc64": "gcc-powerpc64-linux-gnu libc6-dev-ppc64-cross",
    "ppc": "gcc-powerpc-linux-gnu libc6-dev-powerpc-cross",
})

# Layouts of the `version` record this rtlab reads.
VERSION_SCHEMAS: frozenset[int] = frozenset({1})
# `rtlab-probe sys` protocols this rtlab speaks (docs/sys-protocol.md; the same
# number as rtlab.system.facts.SCHEMA, which lives a layer above this module).
SYS_SCHEMAS: frozenset[int] = frozenset({1})


def build_arch(machine: str) -> str | None:
    """The build a board with this `uname -m` runs, or None when there is none."""
    return MACHINE_ARCH.get(machine.strip())


def engines_dir(env: Mapping[str, str] | None = None) -> Path:
    """$RTLAB_ENGINES, else <sys.prefix>/share/rtlab/engines (a venv's)."""
    environ = os.environ if env is None else env
    explicit = environ.get(ENV_VAR)
    if explicit:
        return Path(explicit)
    return Path(sys.prefix) / "share" / "rtlab" / "engines"


def available(directory: Path | None = None) -> list[str]:
    """The build architectures that have an executable engine in `directory`."""
    d = engines_dir() if directory is None else directory
    return [a for a in ARCHES if _usable(d / a / PROBE_NAME)]


def _usable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def engine_for(machine: str, *, env: Mapping[str, str] | None = None) -> Path:
    """The static engine for a board whose `uname -m` is `machine`."""
    d = engines_dir(env)
    built = available(d)
    have = ", ".join(built) if built else "none"
    arch = build_arch(machine)
    if arch is None:
        raise RtlabError(
            f"no rtlab-probe build for board architecture {machine!r} (uname -m); "
            f"builds in {d}: {have}",
            hint=f"rtlab builds static engines for {', '.join(ARCHES)} only",
        )
    path = d / arch / PROBE_NAME
    if not _usable(path):
        raise RtlabError(
            f"no {arch} engine for board architecture {machine} (uname -m) in {d} "
            f"(builds there: {have})",
            hint=f"install {TOOLCHAINS[arch]} and run `make setup` (scripts/cross-build.sh), "
            f"or point ${ENV_VAR} at a directory with {arch}/{PROBE_NAME}",
        )
    return path


@dataclass(frozen=True)
class EngineVersion:
    """What `rtlab-probe --version --json` says about an engine."""

    engine_version: str
    arch: str  # build architecture (ARCHES, or "unknown")
    machine: str | None  # uname -m of the system it ran on
    output_schema: int  # JSON Lines of the probes
    sys_schema: int  # `sys` protocol
    static: bool
    af_xdp: bool
    schema: int = 1  # of the version record itself


def _bad(why: str, text: str) -> RtlabError:
    shown = text.strip().splitlines()[0][:120] if text.strip() else "(nothing)"
    return RtlabError(
        f"not an rtlab-probe version record ({why}): {shown}",
        hint="the file is not an rtlab-probe, or one too old to have `--version --json`",
    )


def _int(obj: dict[str, object], key: str, text: str) -> int:
    value = obj.get(key)
    if not isinstance(value, int) or isinstance(value, bool):
        raise _bad(f"{key!r} is not an integer", text)
    return value


def _str(obj: dict[str, object], key: str, text: str) -> str:
    value = obj.get(key)
    if not isinstance(value, str) or not value:
        raise _bad(f"{key!r} is not a non-empty string", text)
    return value


def _bool(obj: dict[str, object], key: str, text: str) -> bool:
    value = obj.get(key)
    if not isinstance(value, bool):
        raise _bad(f"{key!r} is not true or false", text)
    return value


def parse_version(text: str) -> EngineVersion:
    """The record of `rtlab-probe --version --json` (one JSON line)."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if len(lines) != 1:
        raise _bad(f"{len(lines)} lines instead of one", text)
    try:
        obj = json.loads(lines[0])
    except (json.JSONDecodeError, RecursionError) as exc:
        raise _bad("not JSON", text) from exc
    if not isinstance(obj, dict) or obj.get("type") != "version":
        raise _bad("no type 'version'", text)
    schema = _int(obj, "schema", text)
    if schema not in VERSION_SCHEMAS:
        raise RtlabError(
            f"the engine's version record has schema {schema}, which this rtlab does not read",
            hint="use an rtlab-probe built from the same release as rtlab",
        )
    machine = obj.get("machine")
    if machine is not None and not isinstance(machine, str):
        raise _bad("'machine' is not a string", text)
    return EngineVersion(
        engine_version=_str(obj, "engine_version", text),
        arch=_str(obj, "arch", text),
        machine=machine,
        output_schema=_int(obj, "output_schema", text),
        sys_schema=_int(obj, "sys_schema", text),
        static=_bool(obj, "static", text),
        af_xdp=_bool(obj, "af_xdp", text),
        schema=schema,
    )


def check_engine(found: EngineVersion, *, machine: str, want_version: str) -> None:
    """Refuse an engine that does not fit the board (its `uname -m`) or this rtlab."""
    want_arch = build_arch(machine)
    if found.arch != want_arch:
        if want_arch is None:
            raise RtlabError(
                f"the engine is built for {found.arch}, the board is {machine} (uname -m), "
                "for which rtlab makes no build",
                hint=f"rtlab builds static engines for {', '.join(ARCHES)} only",
            )
        raise RtlabError(
            f"the engine is built for {found.arch}, the board is {machine} (uname -m), "
            f"which needs the {want_arch} build",
            hint=f"rebuild the engines (`make setup`): {engines_dir()}/{want_arch}/{PROBE_NAME} "
            f"must be the {want_arch} build",
        )
    if found.engine_version != want_version:
        raise RtlabError(
            f"the engine on the board is version {found.engine_version}, this rtlab is "
            f"{want_version}",
            hint="rebuild the engines (`make setup`) so that rtlab copies a matching one",
        )
    if found.output_schema not in SUPPORTED_SCHEMAS:
        known = ", ".join(str(s) for s in sorted(SUPPORTED_SCHEMAS))
        raise RtlabError(
            f"the engine writes output schema {found.output_schema}, this rtlab reads {known}",
            hint="use an rtlab-probe built from the same release as rtlab",
        )
    if found.sys_schema not in SYS_SCHEMAS:
        known = ", ".join(str(s) for s in sorted(SYS_SCHEMAS))
        raise RtlabError(
            f"the engine speaks sys protocol {found.sys_schema}, this rtlab speaks {known}",
            hint="use an rtlab-probe built from the same release as rtlab",
        )
