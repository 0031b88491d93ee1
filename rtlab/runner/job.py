# SPDX-License-Identifier: MIT
"""The one entry point of every run: `run_job(RunJob) -> JobResult`.

A caller says what it wants (a scenario or one probe with its overrides, the
targets, the peer of a two-ended probe, the store) and gets back what happened:
every target's stored runs with their outcomes, the comparison that ties them, and
the one exit code they add up to. `rtlab run`, `rtlab tune` and any script differ
only in what they ask and how they show it (`Watch`); nothing here prints.

What the runner decides here, before anything starts: which targets (the given
ones, else those the scenario names, else this machine), that every request is
valid on each of them (their own CPUs), that the files the run writes can be
written, and which peer a two-ended probe gets (rtlab.runner.peers). One target is
measured in this thread; several boards in parallel, one thread each, sharing one
`RunControl` so that Ctrl-C stops every board's engines and keeps what each measured.
Every board's SSH connection is opened in this thread before anything starts (a
connection is tied to the thread that opened it: PR_SET_PDEATHSIG).
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from typing import Any

from rtlab.engine.board import open_target
from rtlab.engine.transport import Transport
from rtlab.errors import RtlabError, UsageError
from rtlab.exitcodes import ExitCode
from rtlab.fileio import check_output
from rtlab.results.model import RunResult
from rtlab.results.store import Store
from rtlab.runner.board_checks import check_remote, target_online_cpus
from rtlab.runner.control import RunControl, handle_signals
from rtlab.runner.outcome import worst_exit
from rtlab.runner.peers import ReflectorRequest, choose_peer, make_peer, start_peer
from rtlab.runner.prepare import RunRequest, prepare
from rtlab.runner.run import new_comparison_id, run_variants
from rtlab.runner.run_options import Progress, RunOptions, RunOutcome
from rtlab.scenario import find
from rtlab.scenario.loader import declared_targets
from rtlab.scenario.model import Scenario
from rtlab.scenario.units import online_cpus


@dataclass(frozen=True)
class RunJob:
    """What the caller wants measured, and where."""

    request: RunRequest = field(default_factory=RunRequest)
    # TARGET ([USER@]HOST[:PORT], an ssh alias, or "local"); (): the scenario's
    # `targets`, else this machine
    targets: tuple[str, ...] = ()
    peer: str | None = None  # ADDR:PORT of the other end (a reflector's address)
    reflector: ReflectorRequest = field(default_factory=ReflectorRequest)
    store: str | None = None  # None: $RTLAB_STORE or the default store
    engine_dir: str | None = None  # where the engine is kept on a board
    restore_first: bool = False
    no_shield: bool = False
    command_line: tuple[str, ...] | None = None  # stored with each run (None: sys.argv)
    # what the caller changes in each prepared variant before it runs (`rtlab tune`: a
    # configuration's shield); it may raise UsageError
    adjust: Callable[[Scenario], Scenario] | None = None
    # the caller holds the target's owner lock for the whole job and longer (`rtlab tune`)
    owner_held: bool = False
    comparison: str | None = None  # the id the job's runs share (e.g. a tune's); None: new
    # where a signal (Ctrl-C, SIGTERM) during the job is recorded, for a caller that must
    # know it was stopped whatever error the stop caused (`rtlab tune`); None: the job's own
    control: RunControl | None = None


@dataclass(frozen=True)
class Watch:
    """How the caller follows a job while it runs (each optional). `board` is the
    target as given (None: this machine)."""

    # a live update of a running phase; several boards call it from their threads
    on_progress: Callable[[str | None, Progress], None] | None = None
    # a run stored (with the store's display name); called as each run ends when the
    # job measures one target, not for several boards (their results come back together)
    on_stored: Callable[[str | None, RunOutcome, str], None] | None = None
    on_event: Callable[[str], None] | None = None  # one line of what the runner does


@dataclass
class BoardRuns:
    """One target's part of a job: its stored runs, or the error that stopped it."""

    target: str | None
    outcomes: list[RunOutcome] = field(default_factory=list)
    error: RtlabError | None = None


@dataclass
class JobResult:
    """What happened: every target's runs, in the order the targets were given."""

    boards: list[BoardRuns]
    comparison: str | None  # the id shared by the job's runs (several variants or boards)
    store_display: str  # where they are stored, for people
    matrix: bool = False  # a scenario with a [matrix], or several variants of one

    @property
    def outcomes(self) -> list[RunOutcome]:
        return [o for b in self.boards for o in b.outcomes]

    @property
    def results(self) -> list[RunResult]:
        return [o.result for o in self.outcomes]

    @property
    def interrupted(self) -> bool:
        return ExitCode.INTERRUPTED in self.codes()

    @property
    def loads_died(self) -> bool:
        return any(o.loads_died for o in self.outcomes)

    def codes(self) -> list[ExitCode]:
        """Each run's exit code and each failed target's."""
        out: list[ExitCode] = []
        for b in self.boards:
            out += [o.exit_code for o in b.outcomes]
            if b.error is not None:
                out.append(b.error.code)
        return out

    def exit_code(self, *more: ExitCode) -> ExitCode:
        """The worst of every run's and target's code and `more` (e.g. an SLO's), by
        the one ranking (rtlab.runner.outcome.worst_exit); error if nothing ran."""
        codes = self.codes() + list(more)
        return worst_exit(*codes) if codes else ExitCode.ERROR


def job_targets(job: RunJob) -> list[str | None]:
    """The targets the job measures (as given, else the scenario's, else this machine:
    None), checked: UsageError for what is wrong as given, before anything connects or
    starts (the reflector's options first)."""
    job.reflector.check()
    targets: list[str | None] = [None]
    if job.targets:
        targets = list(job.targets)
    elif job.request.probe is None:
        targets = list(declared_targets(find(job.request.scenario or "quick"))) or [None]
    _check_targets(job, targets)
    return targets


def _check_targets(job: RunJob, targets: Sequence[str | None]) -> None:
    if len(targets) > 1:
        if len(set(targets)) != len(targets):
            raise UsageError("the same --target is given twice: one run per board")
        if job.peer is not None or job.reflector.target is not None:
            raise UsageError("--peer and --reflector go with one --target (the pinging "
                             "board)")


def run_job(job: RunJob, watch: Watch | None = None,
            targets: Sequence[str | None] | None = None) -> JobResult:
    """Measure what `job` asks on every target and store each run. A single target's
    failure is raised (RtlabError: one line, its exit code); with several boards each
    board's error is kept in its `BoardRuns` and the others go on. `targets`: what
    `job_targets(job)` gave, when the caller has asked already (it is not asked twice)."""
    watch = watch or Watch()
    targets = job_targets(job) if targets is None else list(targets)
    request = replace(job.request, peer=job.peer if job.reflector.target is None else None)
    job = replace(job, request=request)
    if len(targets) > 1:
        return _run_boards(job, [t for t in targets if t is not None], watch)
    return _run_one(job, targets[0], watch)


def _options(job: RunJob, store: Store, target: Transport, watch: Watch,
             board: str | None, **more: Any) -> RunOptions:
    progress = watch.on_progress
    return RunOptions(
        store=store, transport=target, allow_non_rt=job.request.allow_non_rt,
        on_progress=(lambda p: progress(board, p)) if progress is not None else None,
        on_event=watch.on_event,
        command_line=list(job.command_line if job.command_line is not None else sys.argv),
        restore_first=job.restore_first, no_shield=job.no_shield,
        owner_held=job.owner_held, **({"comparison": job.comparison}
                                       if job.comparison is not None and "comparison" not in more
                                       else {}),
        **({"control": job.control} if job.control is not None and "control" not in more
           else {}), **more)


def check_samples_outputs(variants: Sequence[Any]) -> None:
    """The raw sample files a local run's probes write (--samples: one per phase)."""
    for variant in variants:
        for phase in variant.phases:
            path = phase.probe.options.get("samples_file")
            if path:
                check_output(str(path), "--samples")


def _prepare(job: RunJob, online: list[int] | None) -> tuple[Any, list[Scenario]]:
    """The request's variants, validated, with the caller's adjustment."""
    sfile, variants = prepare(job.request, online)
    if job.adjust is not None:
        variants = [job.adjust(v) for v in variants]
    return sfile, variants


def _run_one(job: RunJob, name: str | None, watch: Watch) -> JobResult:
    with open_target(name, job.engine_dir) as target:
        online = None if target.is_local else target_online_cpus(target)
        sfile, variants = _prepare(job, online)
        if not target.is_local:
            check_remote(variants, target)
        elif job.request.samples is not None:
            check_samples_outputs(variants)  # FILE.PHASE of each phase (FILE: checked first)
        # validated; nothing created before run_variants
        peer = choose_peer(variants, job.peer, job.reflector,
                           online if online is not None else online_cpus(), target,
                           getattr(sfile, "reflector", None), job.engine_dir)
        store = Store.open(job.store)
        opts = _options(job, store, target, watch, name)
        stored = watch.on_stored

        def on_outcome(outcome: RunOutcome) -> None:
            if stored is not None:
                stored(name, outcome, store.display)
        try:
            if peer is not None:  # namespaces + reflector (or the remote one): removed below
                variants = start_peer(peer, variants, opts)
            outcomes = run_variants(variants, opts, on_outcome=on_outcome)
        finally:
            if peer is not None:
                peer.close()
            store.close()
    return JobResult([BoardRuns(name, outcomes)], opts.comparison, store.display,
                     matrix=len(variants) > 1 or bool(sfile.has_matrix))


def _run_boards(job: RunJob, names: list[str], watch: Watch) -> JobResult:
    """Every board in parallel, one run (per variant) each, one comparison id."""
    first = Store.open(job.store)  # a store that cannot be written: before any board
    display = first.display
    first.close()
    with ExitStack() as stack:
        boards = [stack.enter_context(open_target(t, job.engine_dir)) for t in names]
        plans = []
        peers: list[Any] = []
        for b in boards:
            online = target_online_cpus(b)
            sfile, variants = _prepare(job, online)
            if getattr(sfile, "reflector", None) is not None:
                raise UsageError(f"scenario {sfile.name} names a reflector board: it goes "
                                 "with one --target (the pinging board)")
            check_remote(variants, b)
            plans.append(variants)
            # a two-ended probe: each board measures against an end of its own, over its
            # loopback
            peers.append(make_peer(variants, None, online, board=b))
        control = RunControl()
        comparison = job.comparison or new_comparison_id()
        runs = [BoardRuns(n) for n in names]
        crashes: list[BaseException | None] = [None] * len(boards)

        def work(i: int) -> None:
            store = Store.open(job.store)
            opts = _options(job, store, boards[i], watch, names[i], handle_signals=False,
                            control=control, comparison=comparison)
            peer = peers[i]
            try:
                variants = plans[i]
                if peer is not None:  # the loopback peer pings from this same board
                    variants = start_peer(peer, variants, opts)
                runs[i].outcomes = run_variants(variants, opts)
            except RtlabError as exc:  # the other boards go on
                runs[i].error = exc
            except BaseException as exc:  # re-raised in the main thread
                crashes[i] = exc
            finally:
                if peer is not None:
                    peer.close()
                store.close()

        with handle_signals(control):  # Ctrl-C stops every board's engines
            threads = [threading.Thread(target=work, args=(i,), daemon=True)
                       for i in range(len(boards))]
            for t in threads:
                t.start()
            for t in threads:
                while t.is_alive():
                    t.join(0.2)
    for crash in crashes:
        if crash is not None:
            raise crash
    return JobResult(runs, comparison, display,
                     matrix=any(len(p) > 1 for p in plans) or bool(sfile.has_matrix))
