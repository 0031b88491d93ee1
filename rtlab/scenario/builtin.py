# SPDX-License-Identifier: MIT
"""The built-in scenarios: `scenarios/*.toml` in a source tree, installed as package
data under `rtlab/data/scenarios` (meson). `find()` takes a built-in name or a path."""

from __future__ import annotations

import tomllib
from pathlib import Path

from rtlab.errors import UsageError

_PKG = Path(__file__).resolve().parent.parent  # .../rtlab


def builtin_dirs() -> list[Path]:
    """Installed package data first, then the source tree's scenarios/ directory."""
    return [d for d in (_PKG / "data" / "scenarios", _PKG.parent / "scenarios") if d.is_dir()]


def builtins() -> dict[str, Path]:
    """name (file stem) -> file, the first directory that has a name wins."""
    out: dict[str, Path] = {}
    for d in builtin_dirs():
        for f in sorted(d.glob("*.toml")):
            out.setdefault(f.stem, f)
    return out


def describe(path: Path) -> str:
    """The file's [scenario] description (empty if it cannot be read)."""
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        return ""
    head = doc.get("scenario")
    desc = head.get("description", "") if isinstance(head, dict) else ""
    return " ".join(desc.split()) if isinstance(desc, str) else ""


def find(ref: str) -> Path:
    """A scenario file from a built-in name or a path (anything ending in .toml or with a /)."""
    if ref.endswith(".toml") or "/" in ref:
        p = Path(ref)
        if not p.is_file():
            raise UsageError(f"scenario file {ref} not found")
        return p
    found = builtins().get(ref)
    if found is None:
        names = ", ".join(builtins()) or "none installed"
        raise UsageError(f"unknown scenario {ref!r}",
                         hint=f"built-in scenarios: {names}; or give a FILE.toml")
    return found
