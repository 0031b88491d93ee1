# SPDX-License-Identifier: MIT
"""A tune's state: one JSON document, saved (atomically) after every block, in the
tune's directory (`rtlab tune --dir`, default $XDG_STATE_HOME/rtlab/tunes/ID). It
holds the plan, the candidates and the knobs skipped with why, every experiment with
its blocks (the stored runs' ids), looks and verdicts, and the original kernel command
line of a tune with boot knobs. `rtlab tune --resume ID` continues from it.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from pathlib import Path
from typing import Any

from rtlab.errors import RtlabError, UsageError

STATE_VERSION = 1
STATE_FILE = "state.json"
MAX_STATE_BYTES = 64 * 1024 * 1024


def tunes_dir() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "rtlab" / "tunes"


def new_id() -> str:
    return "tune-" + time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + secrets.token_hex(2)


def new(*, tune_id: str, target: str | None, scenario: str, stats: tuple[str, ...],
        budget_s: float, block_s: float, block_cost_s: float, pairs: int,
        confirm_pairs: int, candidates: list[str], skipped: dict[str, str],
        proposed: dict[str, list[str]], not_tested: list[str], user: list[int],
        system: list[int], slo: str | None, store: str | None,
        reboot: dict[str, Any] | None, command_line: list[str]) -> dict[str, Any]:
    return {
        "version": STATE_VERSION, "id": tune_id, "created": time.time(),
        "target": target, "scenario": scenario, "stats": list(stats), "slo": slo,
        "budget_s": budget_s, "store": store, "user_cpus": user, "system_cpus": system,
        "plan": {"block_s": block_s, "block_cost_s": block_cost_s, "pairs": pairs,
                 "confirm_pairs": confirm_pairs},
        "candidates": candidates, "skipped": skipped, "proposed": proposed,
        "not_tested": not_tested, "reboot": reboot, "command_line": command_line,
        "stage": "plan", "experiments": [], "final": None, "kept": None,
    }


def save(directory: Path, state: dict[str, Any]) -> None:
    """Write the state whole or not at all (a kill mid-write keeps the previous one)."""
    target = directory / STATE_FILE
    tmp = directory / f".{STATE_FILE}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        f.write(json.dumps(state, indent=1) + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, target)


def find(ref: str, base: Path | None = None, option: str = "--resume") -> Path:
    """The directory of tune REF (its id, or a directory)."""
    if not ref.strip() or len(ref) > 4096 or any(ord(c) < 32 for c in ref):
        shown = ref[:40] + ("..." if len(ref) > 40 else "")
        raise UsageError(f"{option} {shown!r}: not a tune id",
                         hint="`rtlab tune --list` shows the tunes kept here")
    p = Path(ref)
    if (p / STATE_FILE).is_file():
        return p
    d = (base or tunes_dir()) / ref
    if (d / STATE_FILE).is_file():
        return d
    raise UsageError(f"{option} {ref!r}: no such tune (no {STATE_FILE} in {d})",
                     hint="`rtlab tune --list` shows the tunes kept here")


def load(directory: Path) -> dict[str, Any]:
    f = directory / STATE_FILE
    try:
        if f.stat().st_size > MAX_STATE_BYTES:
            raise RtlabError(f"{f} is larger than {MAX_STATE_BYTES} bytes: not a tune state")
        state = json.loads(f.read_text())
    except (OSError, ValueError) as exc:
        raise RtlabError(f"cannot read the tune state {f}: {exc}") from None
    if not isinstance(state, dict) or state.get("version") != STATE_VERSION:
        raise RtlabError(f"{f} is not a tune state of this rtlab (version "
                         f"{state.get('version') if isinstance(state, dict) else '?'})")
    return state


def listing(base: Path | None = None) -> list[dict[str, Any]]:
    d = base or tunes_dir()
    out = []
    if d.is_dir():
        for sub in sorted(d.iterdir()):
            try:
                out.append(load(sub))
            except (RtlabError, OSError):
                continue
    return out
