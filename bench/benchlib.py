# SPDX-License-Identifier: MIT
"""What the benchmark scripts share: rtlab's own percentile rule on engine channels.

The benchmarks run from the repository after `make setup`; they import the rtlab
package from the source tree so their numbers are computed exactly as rtlab's
reports compute them (rtlab.analysis.stats: upper bucket edge, clamped to the
exact min/max; None where too few samples support the percentile).
"""

from __future__ import annotations

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
