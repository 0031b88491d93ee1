# SPDX-License-Identifier: MIT
"""The options several commands share, each defined once: `--target`/`--engine-dir`
(every command that reads or changes a system: docs/boards.md; rtlab.engine.board.open_target
opens it), `--store`, `--slo`,
`--json`, and the channel selection `--cpus`/`--channel` of the commands that read
stored runs."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from rtlab.analysis.channel_select import ChannelSelection, select_channels
from rtlab.errors import UsageError
from rtlab.results.store import Store
from rtlab.scenario.units import parse_cpu_list

if TYPE_CHECKING:  # pragma: no cover
    from rtlab.results.model import RunResult

STORE_HELP = ("result store: SQLite file or SQLAlchemy URL (default $RTLAB_STORE or "
              "~/.local/share/rtlab/rtlab.db)")
SLO_HELP = ("service-level objective, e.g. \"max < 50us and p99.99 < 20us\" (metrics min, avg, "
            "mode, max, pNN[.N], missed; units ns, us, ms, s); exit code 3 when not met: "
            "violated, or undecided (a percentile's 95 %% confidence interval contains the "
            "bound: the run is too short to decide)")
JSON_HELP = "print a JSON document"
LIMIT_MAX = 10**9  # --limit: more rows than any store holds


def add_store_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--store", metavar="PATH", help=STORE_HELP)


def add_json_arg(p: argparse.ArgumentParser, help_: str = JSON_HELP) -> None:
    p.add_argument("--json", action="store_true", help=help_)


def add_limit_arg(p: argparse.ArgumentParser, help_: str) -> None:
    p.add_argument("--limit", type=int, default=None, metavar="N", help=help_)


def check_limit(limit: int | None) -> None:
    """UsageError for a --limit out of its range (None: not given)."""
    if limit is not None and not 0 <= limit <= LIMIT_MAX:
        raise UsageError(f"--limit {limit}: out of range 0..{LIMIT_MAX} (0: all)")


def add_target_args(p: argparse.ArgumentParser, *, repeat: bool = False) -> None:
    help_ = ("the board to work on: [USER@]HOST[:PORT] or an alias of ~/.ssh/config, reached "
             "with your OpenSSH client (key-based login; nothing is asked for); "
             "labgrid:PLACE: a labgrid place, held for the command ($LG_COORDINATOR, "
             "docs/lab.md#labgrid); `local` or none: this machine")
    if repeat:
        p.add_argument("--target", metavar="TARGET", action="append", default=[],
                       help=help_ + "; repeat it to measure several boards in parallel")
    else:
        p.add_argument("--target", metavar="TARGET", default=None, help=help_)
    p.add_argument("--engine-dir", metavar="DIR", default=None,
                   help="where the engine is kept on the board (default /tmp/rtlab.UID; "
                   "`rtlab board clean` removes it)")


def add_selection(p: Any) -> None:
    """`--cpus` and `--channel` (docs/report.md#selecting-channels---cpus---channel)."""
    p.add_argument("--cpus", metavar="LIST", help="only the channels measured on these CPUs, "
                   "e.g. 1 or 1-3 (every row, verdict, comparison and SLO gate uses them "
                   "only; a run without one is an error)")
    p.add_argument("--channel", metavar="NAME", action="append",
                   help="only the channels named NAME: a name or shell pattern (cpu1, "
                   "'thread@cpu*'); repeatable or a comma list; with --cpus, both must match")


def selection_from_args(args: argparse.Namespace) -> ChannelSelection:
    """The ChannelSelection of --cpus/--channel (UsageError, exit 2, on a bad value)."""

    cpus = frozenset(parse_cpu_list(args.cpus)) if args.cpus is not None else None
    patterns: list[str] = []
    for value in args.channel or []:
        for name in value.split(","):
            if not name.strip():
                raise UsageError(f"--channel {value!r}: empty channel name",
                                 hint="e.g. --channel cpu1 or --channel 'thread@cpu*'")
            patterns.append(name.strip())
    return ChannelSelection(cpus, tuple(dict.fromkeys(patterns)))


def load_selected(args: argparse.Namespace, selection: ChannelSelection) -> list[RunResult]:
    """The runs given on the command line, each with the selected channels only."""

    return select_channels(load_runs(args.store, args.runs), selection)


def load_runs(store_arg: str | None, refs: list[str]) -> list[Any]:

    store = Store.open(store_arg, create=False)
    try:
        return [store.get(ref) for ref in refs]
    finally:
        store.close()


