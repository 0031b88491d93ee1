#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""How the checks of a scenario matrix scale with its number of variants (issue 12).

Generates scenario files with N `[[matrix.variant]]` tables (a mix of the four
kinds a matrix has: the file's shield, no shield, a load subset, a shield table
overriding `[shield]`) and measures:

* `parse_text` in process (TOML parse + every check + resolving the variants) for
  each N, with the size cap lifted so that sizes beyond it can be timed: the
  time per variant must stay flat if the checks are linear; beside it the number
  of Python function calls of one parse (deterministic, unlike the time on a busy
  machine), whose per-variant figure must stay flat too;
* `rtlab scenarios check FILE` as a new process on a file of `--over` variants
  (beyond the cap): its wall time, exit code and the one line it prints.

Usage: python3 bench/scenario_matrix.py [--sizes 1000,5000,20000,50000] [--over 200000]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import FrameType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rtlab.scenario import loader, sections

ROOT = Path(__file__).resolve().parent.parent

HEAD = """\
[scenario]
name = "big"

[shield]
user = "last"
system = "first"

[[load]]
name = "hog"
kind = "stress"
cpu = 1
cpus = "system"

[[probe]]
cpus = "user"

[[phase]]
name = "idle"
duration = "1s"

[[phase]]
name = "load"
duration = "1s"
loads = ["hog"]
"""

KINDS = ("", "shield = false\n", "loads = []\n", "shield = { irqs = true }\n")


def matrix_text(n: int, head: str = HEAD) -> str:
    """A scenario file with `n` variants after `head`, the four kinds in turn: each
    variant starts with a blank line and its header (also used by
    tests/scenario/test_matrix_size.py)."""
    parts = [head]
    for i in range(n):
        parts.append(f'\n[[matrix.variant]]\nname = "v{i}"\n{KINDS[i % len(KINDS)]}')
    return "".join(parts)


def time_parse(n: int, rounds: int) -> float:
    """Best wall time of `rounds` parses of an n-variant file, cap lifted."""
    text = matrix_text(n)
    saved = getattr(sections, "MAX_VARIANTS", None)
    if saved is not None:
        sections.MAX_VARIANTS = n
    try:
        best = float("inf")
        for _ in range(rounds):
            t0 = time.perf_counter()
            sf = loader.parse_text(text, "bench.toml", online=[0, 1])
            best = min(best, time.perf_counter() - t0)
            assert len(sf.variants) == n
        return best
    finally:
        if saved is not None:
            sections.MAX_VARIANTS = saved


def count_calls(n: int) -> int:
    """Python function calls of one parse of an n-variant file (cap lifted): unlike the
    wall time, this does not depend on how busy the machine is."""
    text = matrix_text(n)
    saved = getattr(sections, "MAX_VARIANTS", None)
    if saved is not None:
        sections.MAX_VARIANTS = n
    calls = 0

    def profile(_frame: FrameType, event: str, _arg: Any) -> None:
        nonlocal calls
        calls += event == "call"

    sys.setprofile(profile)
    try:
        loader.parse_text(text, "bench.toml", online=[0, 1])
    finally:
        sys.setprofile(None)
        if saved is not None:
            sections.MAX_VARIANTS = saved
    return calls


def time_check(n: int, timeout: float) -> tuple[float, str, str]:
    """`rtlab scenarios check` of an n-variant file: (seconds, exit code, last line)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "big.toml"
        path.write_text(matrix_text(n))
        t0 = time.perf_counter()
        try:
            proc = subprocess.run([sys.executable, "-m", "rtlab", "scenarios", "check",
                                   str(path)], capture_output=True, text=True,
                                  timeout=timeout, cwd=ROOT)  # the source tree's rtlab
        except subprocess.TimeoutExpired:
            return time.perf_counter() - t0, "timeout", ""
        took = time.perf_counter() - t0
    lines = (proc.stderr or proc.stdout).strip().splitlines()
    last = lines[-1].replace(tmp, "TMP") if lines else ""
    return took, str(proc.returncode), last


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,5000,20000,50000",
                    help="variant counts to parse in process (comma list)")
    ap.add_argument("--rounds", type=int, default=3, help="parses per size (best is kept)")
    ap.add_argument("--over", type=int, default=200_000,
                    help="variants of the file given to `rtlab scenarios check` (0: skip)")
    ap.add_argument("--timeout", type=float, default=300.0)
    args = ap.parse_args()
    print(f"cap: {getattr(sections, 'MAX_VARIANTS', 'none')} variants")
    print(f"{'variants':>9}  {'parse_text':>10}  {'per variant':>11}  {'calls':>10}  "
          f"{'per variant':>11}")
    for n in (int(s) for s in args.sizes.split(",")):
        took = time_parse(n, args.rounds)
        calls = count_calls(n)
        print(f"{n:>9}  {took:>9.3f}s  {took / n * 1e6:>9.1f}us  {calls:>10,}  "
              f"{calls / n:>11.1f}")
    if args.over:
        took, code, line = time_check(args.over, args.timeout)
        print(f"rtlab scenarios check, {args.over} variants: {took:.2f}s, exit {code}: {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
