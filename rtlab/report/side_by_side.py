# SPDX-License-Identifier: MIT
"""Configurations side by side per channel (CPU) in the terminal: `rtlab compare --by
host` and the boards of one `rtlab run --target A --target B`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rtlab.analysis.configs import build_configs, side_by_side
from rtlab.probes.registry import shape as probe_shape
from rtlab.results.summary import percentile
from rtlab.textfmt import us


def per_cpu_tails(configs: Sequence[Any]
                  ) -> list[tuple[str, list[tuple[int | None, int | None, int] | None]]]:
    """Per channel (CPU), per configuration: its p99, p99.99 and max in ns (None: the
    configuration has no samples there)."""
    return [(name, [None if ch is None or not ch.samples else
                    (percentile(ch.hist, 99.0, ch.min_ns, ch.max_ns),
                     percentile(ch.hist, 99.99, ch.min_ns, ch.max_ns), ch.max_ns)
                    for ch in chans])
            for name, chans in side_by_side(configs)]


def side_by_side_table(configs: list[Any]) -> Any:
    """One row per channel (CPU), per configuration its p99, p99.99 and max (µs)."""
    from rich.table import Table

    table = Table(title="per CPU, side by side: p99 / p99.99 / max in µs", title_justify="left")
    table.add_column("channel")
    for c in configs:
        table.add_column(c.display, justify="right")
    for name, tails in per_cpu_tails(configs):
        table.add_row(name, *("-" if t is None else " / ".join(us(v) for v in t)
                              for t in tails))
    return table


def boards_side_by_side(results: list[Any], console: Any) -> None:
    """The boards side by side, per matrix variant (never two variants in one column)."""
    variants: dict[str | None, list[Any]] = {}
    for r in results:
        variants.setdefault(r.scenario.get("variant"), []).append(r)
    for name, group in variants.items():
        configs = build_configs(group, "host", shape_of=probe_shape)
        if len(configs) > 1:
            if name is not None:
                console.print(f"variant {name}: the boards side by side", style="bold",
                              highlight=False)
            console.print(side_by_side_table(configs))
