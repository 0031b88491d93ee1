# SPDX-License-Identifier: MIT
"""`rtlab shield`: apply, show or remove a persistent CPU shield."""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from rtlab.cli.options import add_target_args
from rtlab.engine.board import open_target
from rtlab.errors import UsageError
from rtlab.exitcodes import ExitCode
from rtlab.fileio import check_directory
from rtlab.system.facts import parse_cpus_arg, read_facts
from rtlab.system.journal_files import RestoreReport, journal_dir
from rtlab.system.shield_apply import apply_shield, reset_shield, run_shields, shield_status
from rtlab.system.shield_plan import ShieldRequest, parse_thread_priority
from rtlab.textfmt import shown

if TYPE_CHECKING:
    from rtlab.engine.transport import Transport
    from rtlab.system.shield_plan import ThreadPriority


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "shield",
        help="shield CPUs from tasks and IRQs (journaled; undo with --reset)",
        description="Move tasks, unbound kthreads and IRQs off CPUS with a cpuset shield "
        "(cgroup v2 partition or v1 cpusets, chosen automatically). Every change is "
        "journaled in /run/rtlab/shield.journal and undone by `rtlab shield --reset` "
        "or `rtlab restore`.",
    )
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--cpus", metavar="LIST", help="CPUs to shield, e.g. 1 or 2-3")
    g.add_argument("--reset", action="store_true", help="undo the shield")
    g.add_argument("--status", action="store_true", help="show the shield requested vs in effect")
    p.add_argument("--irqs", action="store_true", help="also move IRQs and default_smp_affinity")
    p.add_argument("--kthreads", action="store_true", help="also move unbound kernel threads")
    p.add_argument(
        "--thread-priority",
        metavar="PATTERN=POLICY:PRIO",
        action="append",
        default=[],
        help="give threads whose name matches PATTERN (a regular expression from the start "
        "of the name) this policy and priority, e.g. 'irq/.*-eth0=fifo:99'; repeatable",
    )
    p.add_argument(
        "--rt-runtime",
        metavar="US",
        type=int,
        default=None,
        help="set kernel.sched_rt_runtime_us (-1: no RT throttling) while the shield is on",
    )
    p.add_argument(
        "--exclude",
        metavar="PIDS",
        default=None,
        help="comma-separated process ids (1 or more) to leave where they are",
    )
    p.add_argument("--journal-dir", default=None, help=argparse.SUPPRESS)
    p.add_argument("--json", action="store_true",
                   help="print a JSON document: the shield applied (--cpus), requested vs in "
                   "effect (--status; always an object, `applied` false without a shield), "
                   "or what was undone (--reset)")
    add_target_args(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:

    if (args.reset or args.status) and (args.irqs or args.kthreads or args.exclude is not None
                                        or args.thread_priority or args.rt_runtime is not None):
        raise UsageError("--irqs, --kthreads, --thread-priority, --rt-runtime and --exclude go "
                         "with --cpus")
    priorities = tuple(parse_thread_priority(t) for t in args.thread_priority)
    exclude = parse_pids(args.exclude, "--exclude") if args.exclude is not None else frozenset()
    if args.rt_runtime is not None:
        _check_rt_runtime(args.rt_runtime, args.target)
    given = (check_directory(args.journal_dir, "--journal-dir")
             if args.journal_dir is not None else None)  # before connecting
    with open_target(args.target, args.engine_dir) as probe, _sigterm_interrupts():
        directory = given or journal_dir(probe)
        return _run(args, probe, directory, priorities, exclude)


RT_PERIOD_FILE = "/proc/sys/kernel/sched_rt_period_us"
RT_RUNTIME_MAX = 2**31 - 1  # the sysctl is an int; the kernel wants it <= the period


def _check_rt_runtime(value: int, target: str | None) -> None:
    """-1 (no throttling) or 0..the RT period (this machine's, read now; a board's kernel
    refuses a larger one itself, and the change is then undone)."""
    limit = RT_RUNTIME_MAX
    if target in (None, "local"):
        try:
            with open(RT_PERIOD_FILE, encoding="ascii") as f:
                limit = int(f.read(32).strip())
        except (OSError, ValueError):
            pass
    if not -1 <= value <= limit:
        raise UsageError(f"--rt-runtime {value}: out of range -1..{limit} µs (-1: no RT "
                         "throttling; at most kernel.sched_rt_period_us)")


# the kernel's PID_MAX_LIMIT (4M): no process id reaches it
PID_LIMIT = 4 * 1024 * 1024


def parse_pids(text: str, option: str) -> frozenset[int]:
    """'12,345' -> {12, 345}: process ids from 1 up, comma-separated; UsageError (one
    line naming the option and the bad item) for an empty list or item, a sign, 0, a
    number beyond the kernel's PID limit or anything that is not a decimal number."""
    if not text.strip():
        raise UsageError(f"{option} is empty", hint=f"give process ids, e.g. {option} 1234,5678")
    pids: set[int] = set()
    for item in text.split(","):
        word = item.strip()
        if not word:
            raise UsageError(f"{option} {shown(text)}: an empty item",
                             hint="leave no empty item between commas, e.g. 1234,5678")
        if not (word.isascii() and word.isdigit()):
            kind = "negative" if word.startswith("-") else "not a process id"
            raise UsageError(f"{option} {shown(text)}: {shown(word)} is {kind}",
                             hint="process ids are whole numbers from 1 up, e.g. 1234")
        if len(word) > 10 or not 1 <= int(word) < PID_LIMIT:
            raise UsageError(f"{option} {shown(text)}: process id {shown(word)} is out of "
                             f"range (1-{PID_LIMIT - 1})")
        pids.add(int(word))
    return frozenset(pids)


@contextlib.contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """SIGTERM like Ctrl-C: a shield half applied is undone, and the target's lock is let
    go, on either (KeyboardInterrupt reaches the applier's release)."""
    def handler(_sig: int, _frame: object) -> None:
        raise KeyboardInterrupt

    try:
        old = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def _run(args: argparse.Namespace, probe: Transport, directory: Path,
         priorities: tuple[ThreadPriority, ...], exclude: frozenset[int]) -> int:

    on = "" if probe.is_local else f" on {probe.target}"
    again = "" if probe.is_local else f" --target {probe.target}"
    if args.reset:
        rep = reset_shield(probe, directory)
        if args.json:
            print(json.dumps(_reset_json(probe, rep), indent=1))
            return int(ExitCode.OK if rep is None or rep.ok else ExitCode.ERROR)
        if rep is None:
            print(f"no shield is applied{on}: nothing to reset")
            return int(ExitCode.OK)
        print(f"shield removed{on}: {rep.summary()}")
        return int(ExitCode.OK if rep.ok else ExitCode.ERROR)
    if args.status:  # read-only: never takes the target's lock
        st = shield_status(probe, directory)
        runs = run_shields(probe, directory)
        if args.json:
            print(json.dumps(_status_json(probe, st, runs), indent=1))
        elif st is None and not runs:
            print(f"no shield is applied{on}")
        else:
            if st is not None:
                print(f"persistent shield{on} (`rtlab shield`, journal "
                      f"{st['requested'].get('journal')}):")
                _print_status(st)
            for r in runs:
                h = r["held_by"]
                print(f"shield{on} held by a running {h['who']}, since {h['since']} "
                      f"(journal {h['journal']}, {h['changes']} change(s))")
                if r.get("in_effect") is not None:
                    _print_status(r)
        return int(ExitCode.OK)

    facts = read_facts(probe)
    cpus = parse_cpus_arg(args.cpus, facts.cpus_online)
    req = ShieldRequest(cpus=cpus, irqs=args.irqs, kthreads=args.kthreads,
                        priorities=priorities, rt_runtime_us=args.rt_runtime,
                        exclude_pids=exclude)
    out = apply_shield(probe, req, directory, facts=facts)
    if args.json:
        print(json.dumps(out, indent=1))
        return int(ExitCode.OK)
    s = out["summary"]
    print(
        f"shielded CPU {s['shield_cpus']}{on} ({s['backend']} cpuset {s['shield_cgroup']}); "
        f"system on CPU {s['housekeeping_cpus']}"
    )
    print(
        f"  moved {out['tasks_moved']} user task(s), {out['kthreads_moved']} kthread(s); "
        f"{s['kthreads_not_movable']} per-CPU kthread(s) cannot move"
    )
    if args.irqs:
        print(f"  IRQs moved: {_ints(out['irqs_moved']) or 'none'}")
        for r in out["irqs_refused"]:
            print(f"  IRQ {r['irq']} refused: {r['error']} (kernel-managed)")
    for f in out["failed"]:
        print(f"  not applied: {f}")
    _print_status(out["verify"])
    print(f"undo with: rtlab shield --reset{again}")
    return int(ExitCode.OK)


def _status_json(probe: Transport, st: dict | None, runs: list[dict]) -> dict:
    """`--status --json`: always an object. `applied`: a shield is in place, persistent
    (`held_by` null) or held by a running session (`held_by` its owner); the first shield
    found is described at the top, any further ones held by runs in `run_shields`. No
    shield: `applied` false, `requested` and `in_effect` null."""
    if st is not None:
        out: dict = {**st, "held_by": None}
    elif runs:
        out, runs = dict(runs[0]), runs[1:]
    else:
        out = {"requested": None, "in_effect": None, "problems": [], "held_by": None}
    return {"applied": st is not None or bool(out.get("held_by")),
            "target": None if probe.is_local else probe.target, **out, "run_shields": runs}


def _reset_json(probe: Transport, rep: object) -> dict:
    """`--reset --json`: what was undone. `reset` false: no shield was applied."""

    base = {"target": None if probe.is_local else probe.target}
    if not isinstance(rep, RestoreReport):
        return base | {"reset": False, "ok": True, "journal": None, "restored": 0, "gone": 0,
                       "skipped": 0, "failed": 0, "journal_kept": False, "error": None,
                       "failures": [], "entries": [],
                       "summary": "no shield is applied: nothing to reset"}
    failures = [{"seq": e.get("seq"), "op": e.get("op"), "error": e.get("error")}
                for e in rep.entries if e.get("result") == "failed"]
    return base | {"reset": True, "ok": rep.ok, "journal": rep.journal,
                   "restored": rep.restored, "gone": rep.gone, "skipped": rep.skipped,
                   "failed": rep.failed, "journal_kept": rep.journal_kept,
                   "error": rep.error, "failures": failures, "entries": rep.entries,
                   "summary": rep.summary()}


def _ints(v: list[int]) -> str:
    return ",".join(str(i) for i in v)


def _print_status(st: dict) -> None:
    print(f"  requested: CPU {st['requested']['cpus']}")
    eff = st["in_effect"]
    for cpu, c in eff["cpus"].items():
        print(
            f"  in effect on CPU {cpu}: {len(c['user_tasks'])} user task(s)"
            + (f" (and {len(c['own_tasks'])} thread(s) of rtlab itself)"
               if c.get("own_tasks") else "") + ", "
            f"{len(c['kthreads_movable'])} unbound kthread(s), {c['kthreads_per_cpu']} per-CPU "
            f"kthread(s), IRQ affinity {_ints(c['irqs_affinity']) or 'none'}, "
            f"effective {_ints(c['irqs_effective']) or 'none'}"
        )
    cg = eff.get("cgroup") or {}
    if cg.get("path") and cg.get("cpus_effective"):
        part = f", partition {cg['partition']}" if cg.get("partition") else ""
        print(f"  cpuset {cg['path']}: CPU {cg['cpus_effective']} in effect{part}")
    for p in st["problems"]:
        print(f"  ! {p}")
