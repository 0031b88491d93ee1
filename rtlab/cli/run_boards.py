# SPDX-License-Identifier: MIT
"""`rtlab run --target A --target B ...`: several boards measured in parallel, one run
each (all with one comparison id), one live display, one comparison by host at the end.

Every board's SSH connection is opened here, in the main thread (a connection is tied
to the thread that opened it: PR_SET_PDEATHSIG), before anything starts; each board's
scenario is loaded with its own CPUs; one `RunControl` is shared so a Ctrl-C stops
every board's engines and keeps what each measured.
"""

from __future__ import annotations

import argparse
import threading
from contextlib import ExitStack
from typing import Any

from rtlab.analysis.compare import build_configs
from rtlab.cli.cmd_compare import _side_by_side
from rtlab.cli.target import open_target
from rtlab.errors import RtlabError, UsageError
from rtlab.exitcodes import ExitCode
from rtlab.report import render
from rtlab.report.terminal import channel_label, make_console
from rtlab.results.store import Store
from rtlab.runner import RunControl, RunOptions, new_comparison_id, run_variants
from rtlab.runner.direct import make_peer, start_peer
from rtlab.runner.remote import check_remote, target_online_cpus
from rtlab.runner.run import handle_signals
from rtlab.textfmt import seconds, us

_RANK = {ExitCode.OK: 0, ExitCode.THRESHOLD: 1, ExitCode.ERROR: 2, ExitCode.SKIPPED: 3,
         ExitCode.USAGE: 3, ExitCode.INTERRUPTED: 4}


class BoardsProgress:
    """One live table of every board's channels."""

    def __init__(self, console: Any) -> None:
        from rich.live import Live

        self._live = Live(console=console, transient=True, auto_refresh=False)
        self._latest: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._live.start()

    def for_board(self, name: str) -> Any:
        def update(p: Any) -> None:
            with self._lock:
                self._latest[name] = p
                self._draw()
        return update

    def _draw(self) -> None:
        from rich.table import Table


        table = Table(title="measuring on " + ", ".join(self._latest), title_justify="left")
        for col in ("board", "phase", "elapsed", "channel", "samples", "max µs", "missed"):
            table.add_column(col, justify="left" if col in ("board", "phase", "channel")
                             else "right")
        for name, p in self._latest.items():
            for ch in p.channels:
                table.add_row(name, p.phase, seconds(p.elapsed_ns), channel_label(ch),
                              f"{ch.samples:,}", us(ch.max_ns), f"{ch.missed:,}")
        self._live.update(table, refresh=True)

    def stop(self) -> None:
        self._live.stop()


def run_boards(args: argparse.Namespace, slo: Any, targets: list[str],
               prepare: Any, report_and_gate: Any) -> int:
    """Measure every target in parallel; print each result and one comparison by host."""

    if len(set(targets)) != len(targets):
        raise UsageError("the same --target is given twice: one run per board")
    if args.peer is not None or args.reflector is not None:
        raise UsageError("--peer and --reflector go with one --target (the pinging board)")
    Store.open(args.store).close()  # a store that cannot be written: before any board
    console, err = make_console(), make_console(stderr=True)
    with ExitStack() as stack:
        boards = [stack.enter_context(open_target(t, args.engine_dir)) for t in targets]
        plans = []
        peers: list[Any] = []
        for b in boards:
            online = target_online_cpus(b)
            sfile, variants = prepare(args, online)
            if getattr(sfile, "reflector", None) is not None:
                raise UsageError(f"scenario {sfile.name} names a reflector board: it goes "
                                 "with one --target (the pinging board)")
            check_remote(variants, b, peer=None)
            plans.append(variants)
            # a udp scenario: each board pings a reflector of its own over its loopback
            peers.append(make_peer(variants, None, online, board=b))
        control = RunControl()
        comparison = new_comparison_id()
        progress = (BoardsProgress(console) if not args.no_progress and console.is_terminal
                    else None)
        outcomes: list[list[Any]] = [[] for _ in boards]
        failures: list[BaseException | None] = [None] * len(boards)

        def work(i: int) -> None:
            store = Store.open(args.store)
            opts = RunOptions(
                store=store, transport=boards[i], allow_non_rt=args.allow_non_rt,
                on_progress=progress.for_board(boards[i].target) if progress else None,
                command_line=["rtlab", *args.argv], restore_first=args.restore_first,
                no_shield=args.no_shield, handle_signals=False, control=control,
                comparison=comparison)
            peer = peers[i]
            try:
                variants = plans[i]
                if peer is not None:  # the loopback peer pings from this same board
                    variants = start_peer(peer, variants, opts)
                outcomes[i] = run_variants(variants, opts)
            except BaseException as exc:  # reported in the main thread
                failures[i] = exc
            finally:
                if peer is not None:
                    peer.close()
                store.close()

        try:
            with handle_signals(control):  # Ctrl-C stops every board's engines
                threads = [threading.Thread(target=work, args=(i,), daemon=True)
                           for i in range(len(boards))]
                for t in threads:
                    t.start()
                for t in threads:
                    while t.is_alive():
                        t.join(0.2)
        finally:
            if progress:
                progress.stop()
    codes: list[ExitCode] = []
    results = []
    for name, outs, exc in zip(targets, outcomes, failures, strict=True):
        console.print(f"board {name}", style="bold", highlight=False)
        if exc is not None:
            if not isinstance(exc, RtlabError):
                raise exc
            err.print(f"rtlab: error: {name}: {exc.one_line()}", highlight=False,
                      markup=False)
            codes.append(exc.code)
            continue
        for o in outs:
            if o.result.scenario.get("variant"):
                console.print(f"variant {o.result.scenario['variant']}", style="bold",
                              highlight=False)
            render(o.result, console)
            console.print(f"run {o.result.run_id} stored", highlight=False)
            codes.append(o.exit_code)
            results.append(o.result)
    if len(results) > 1:
        _compare(results, console)
        console.print(f"comparison {comparison}: runs "
                      + ", ".join(r.run_id for r in results), highlight=False)
    store = Store.open(args.store)
    display = store.display
    store.close()
    # by host merges a host's runs: with several matrix variants, that would merge
    # variants, so the report compares run by run instead
    several = len({r.scenario.get("variant") for r in results}) > 1
    codes += report_and_gate(args, slo, results, display, console,
                             compare_by="run" if several else "host")
    if ExitCode.INTERRUPTED in codes:
        err.print("rtlab: interrupted: partial results stored", highlight=False)
    return int(max(codes, key=lambda c: _RANK.get(c, 3))) if codes else int(ExitCode.ERROR)


def _compare(results: list[Any], console: Any) -> None:
    """The boards side by side, per matrix variant (never two variants in one column)."""
    variants: dict[str | None, list[Any]] = {}
    for r in results:
        variants.setdefault(r.scenario.get("variant"), []).append(r)
    for name, group in variants.items():
        configs = build_configs(group, "host")
        if len(configs) > 1:
            if name is not None:
                console.print(f"variant {name}: the boards side by side", style="bold",
                              highlight=False)
            console.print(_side_by_side(configs))
