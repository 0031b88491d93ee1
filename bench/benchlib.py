# SPDX-License-Identifier: MIT
"""What the benchmark scripts share: rtlab's own percentile rule on engine channels, the
check of what a benchmark needs, and the writing of its report.

The benchmarks run from the repository after `make setup`; they import the rtlab
package from the source tree so their numbers are computed exactly as rtlab's
reports compute them (rtlab.analysis.stats: upper bucket edge, clamped to the
exact min/max; None where too few samples support the percentile).
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rtlab.engine.locate import find_probe
from rtlab.errors import RtlabError
from rtlab.results.histogram import LogLinHistogram
from rtlab.results.summary import percentile


def channel_percentile(ch: Mapping[str, Any], p: float) -> int | None:
    """Percentile p (0-100) in ns of one engine channel object (docs/engine-output.md)."""
    return percentile(LogLinHistogram.from_json(ch["hist"]), p, ch["min_ns"], ch["max_ns"])


def default_probe() -> str:
    """The rtlab-probe rtlab itself would use ($RTLAB_PROBE, beside this Python, PATH)."""
    try:
        return str(find_probe())
    except RtlabError:
        return "rtlab-probe"


def write_report(text: str, out: str | Path) -> int:
    """Write a benchmark's Markdown report to `out` (its folder made when missing), print
    it, and return the exit status 0."""
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")
    print(text)
    return 0


def lacks(root: str | None = None, tools: Mapping[str, str] | None = None) -> bool:
    """True, after one line on stderr, when this process is not root (`root` says why
    the benchmark needs it) or a tool of `tools` is not on PATH (each tool's line); the
    benchmark then exits 4 (skipped)."""
    if root is not None and os.geteuid() != 0:
        print(root, file=sys.stderr)
        return True
    for tool, why in (tools or {}).items():
        if not shutil.which(tool):
            print(why, file=sys.stderr)
            return True
    return False
