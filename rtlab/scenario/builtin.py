# SPDX-License-Identifier: MIT
"""The built-in scenarios: `scenarios/*.toml` in a source tree, installed as package
data under `rtlab/data/scenarios` (meson). `find()` takes a built-in name or a path."""

from __future__ import annotations

from pathlib import Path

from rtlab.errors import RtlabError, UsageError
from rtlab.fileio import check_input
from rtlab.textfmt import shown

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
    from rtlab.scenario.loader import read_scenario_text, toml_document

    try:
        doc = toml_document(read_scenario_text(path), str(path))
    except RtlabError:
        return ""
    head = doc.get("scenario")
    desc = head.get("description", "") if isinstance(head, dict) else ""
    return " ".join(desc.split()) if isinstance(desc, str) else ""


def find(ref: str) -> Path:
    """A scenario file from a built-in name or a path (anything ending in .toml or with a /)."""
    if ref.endswith(".toml") or "/" in ref:
        return check_input(ref, "scenario file")
    found = builtins().get(ref)
    if found is None:
        names = ", ".join(builtins()) or "none installed"
        raise UsageError(f"unknown scenario {shown(ref)}",
                         hint=f"built-in scenarios: {names}; or give a FILE.toml")
    return found
