# SPDX-License-Identifier: MIT
"""The static engines for boards: which build a board needs, where it is, and
whether an engine found on a board may be used.

Every build architecture has one statically linked `rtlab-probe`, looked up as
`<dir>/<arch>/rtlab-probe` in the first of these directories that has it
(`engine_dirs`): `$RTLAB_ENGINES` alone when it is set; else the environment's
`share/rtlab/engines` (a clone's set-up: `scripts/cross-build.sh`), then the
package's own `rtlab/engines` (an installed wheel carries every build there). Beside
each engine, `rtlab-probe.json` says what built it (`EngineBuild`). The board's
`uname -m` picks the build (`engine_for`); before an engine is used, its
`rtlab-probe --version --json` record (`parse_version`) is checked against the
board and this rtlab (`check_engine`): same architecture, same version (the
engine's version is the meson project version, kept equal to `rtlab.__version__`),
schemas this rtlab reads (docs/engine-output.md, docs/sys-protocol.md).
"""

from __future__ import annotations

import hashlib
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

# The Debian packages that build each architecture with glibc (scripts/cross-build.sh
# --toolchain gnu, the fallback; its default, zig, builds them all from PyPI's ziglang).
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


def package_engines_dir() -> Path:
    """Where an installed wheel keeps its engines: the package's `engines` directory."""
    return Path(__file__).resolve().parent.parent / "engines"


def engine_dirs(env: Mapping[str, str] | None = None) -> list[Path]:
    """The directories searched for engines, first match wins: $RTLAB_ENGINES alone, or
    the environment's share/rtlab/engines and then the package's engines."""
    environ = os.environ if env is None else env
    if environ.get(ENV_VAR):
        return [engines_dir(environ)]
    return [engines_dir(environ), package_engines_dir()]


def available(directory: Path | None = None) -> list[str]:
    """The build architectures that have an executable engine in `directory` (or in any
    directory that is searched)."""
    dirs = engine_dirs() if directory is None else [directory]
    return [a for a in ARCHES if any(_usable(d / a / PROBE_NAME) for d in dirs)]


def _usable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def _how_to_get(arch: str) -> str:
    return (f"install an rtlab wheel that carries every board's engine (docs/engine.md: "
            f"`python -m build` in a clone, then `pipx install ./rtlab-*.whl`), or build this "
            f"one from a clone: `scripts/cross-build.sh {arch}` (needs `pip install ziglang`), "
            f"or point ${ENV_VAR} at a directory with {arch}/{PROBE_NAME}")


def engine_for(machine: str, *, env: Mapping[str, str] | None = None) -> Path:
    """The static engine for a board whose `uname -m` is `machine`."""
    dirs = engine_dirs(env)
    built = [a for a in ARCHES if any(_usable(d / a / PROBE_NAME) for d in dirs)]
    have = ", ".join(built) if built else "none"
    where = " or ".join(str(d) for d in dirs)
    arch = build_arch(machine)
    if arch is None:
        raise RtlabError(
            f"no rtlab-probe build for board architecture {machine!r} (uname -m); "
            f"builds in {where}: {have}",
            hint=f"rtlab builds static engines for {', '.join(ARCHES)} only",
        )
    for d in dirs:
        path = d / arch / PROBE_NAME
        if _usable(path):
            return path
    raise RtlabError(
        f"this rtlab has no {arch} engine for board architecture {machine} (uname -m) in "
        f"{where} (builds there: {have})",
        hint=_how_to_get(arch),
    )


@dataclass(frozen=True)
class EngineBuild:
    """One installed engine: what a lab engineer needs to know which binary ran."""

    arch: str
    path: Path
    size: int
    sha256: str
    engine_version: str | None  # from rtlab-probe.json beside it (None: not recorded)
    libc: str | None
    toolchain: str | None

    def describe(self) -> dict[str, object]:
        return {"arch": self.arch, "path": str(self.path), "size": self.size,
                "sha256": self.sha256, "engine_version": self.engine_version,
                "libc": self.libc, "toolchain": self.toolchain}

    def one_line(self) -> str:
        made = ", ".join(x for x in (self.libc, self.toolchain) if x) or "build not recorded"
        return (f"{self.arch:<8} {self.engine_version or '?'}  {self.size:>9,} B  "
                f"sha256 {self.sha256[:16]}  {made}  {self.path}")


def _manifest(path: Path) -> dict[str, object]:
    try:
        obj = json.loads((path.parent / f"{PROBE_NAME}.json").read_text())
    except (OSError, ValueError, RecursionError):
        return {}
    return obj if isinstance(obj, dict) else {}


def _text(obj: dict[str, object], key: str) -> str | None:
    value = obj.get(key)
    return value if isinstance(value, str) and value else None


def engine_build(path: Path, arch: str) -> EngineBuild:
    """The facts of the engine at `path`: size and digest of the file itself, the rest
    from the record that scripts/cross-build.sh wrote beside it."""
    data = path.read_bytes()
    info = _manifest(path)
    return EngineBuild(arch=arch, path=path, size=len(data),
                       sha256=hashlib.sha256(data).hexdigest(),
                       engine_version=_text(info, "engine_version"), libc=_text(info, "libc"),
                       toolchain=_text(info, "toolchain"))


def installed_builds(env: Mapping[str, str] | None = None) -> list[EngineBuild]:
    """The engine each build architecture would use (the first directory that has it)."""
    found = []
    for arch in ARCHES:
        for d in engine_dirs(env):
            path = d / arch / PROBE_NAME
            if _usable(path):
                found.append(engine_build(path, arch))
                break
    return found


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
    libc: str | None = None  # glibc, musl, ... (None: an engine before the key existed)


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
    libc = obj.get("libc")
    if libc is not None and (not isinstance(libc, str) or not libc):
        raise _bad("'libc' is not a non-empty string", text)
    return EngineVersion(
        engine_version=_str(obj, "engine_version", text),
        arch=_str(obj, "arch", text),
        machine=machine,
        output_schema=_int(obj, "output_schema", text),
        sys_schema=_int(obj, "sys_schema", text),
        static=_bool(obj, "static", text),
        af_xdp=_bool(obj, "af_xdp", text),
        schema=schema,
        libc=libc,
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
            hint=f"rebuild the engines (`make setup`, or `scripts/cross-build.sh {want_arch}`): "
            f"{want_arch}/{PROBE_NAME} of {engines_dir()} must be the {want_arch} build",
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
