# SPDX-License-Identifier: MIT
"""`rtlab shield`: apply, show or remove a persistent CPU shield (from options, or the
[shield] table of a scenario file), with its runtime knobs."""

from __future__ import annotations

import argparse
import contextlib
import json
import re
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
from rtlab.system.shield_knobs import KNOBS, RuntimeKnobs, check_knob
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
        "(cgroup v2 partition or v1 cpusets, chosen automatically), and set the runtime "
        "knobs asked (timer migration, watchdogs, cpuidle states, cpufreq governor, SMT, "
        "...), or apply the [shield] table of a scenario file (e.g. the profile `rtlab tune` "
        "exports). Every change is journaled in /run/rtlab/shield.journal and undone by "
        "`rtlab shield --reset` or `rtlab restore`; a knob the system lacks is skipped and "
        "named.",
    )
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--cpus", metavar="LIST", help="CPUs to shield, e.g. 1 or 2-3")
    g.add_argument("--scenario", metavar="FILE",
                   help="apply the [shield] table of this scenario file (its CPU sets, moves, "
                   "priorities and runtime knobs) persistently")
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
    k = p.add_argument_group("runtime knobs (with --cpus; default: leave as it is)")
    for decl in KNOBS:
        k.add_argument(decl.option, metavar=_KNOB_METAVAR.get(decl.name, "VALUE"),
                       dest=f"knob_{decl.name}", default=None,
                       help=f"{decl.changes}; {_knob_help(decl.name, decl.allowed)}")
    p.add_argument("--journal-dir", default=None, help=argparse.SUPPRESS)
    p.add_argument("--json", action="store_true",
                   help="print a JSON document: the shield applied (--cpus), requested vs in "
                   "effect (--status; always an object, `applied` false without a shield), "
                   "or what was undone (--reset)")
    add_target_args(p)
    p.set_defaults(func=run)


_KNOB_METAVAR = {"timer_migration": "on|off", "watchdogs": "on|off", "smt": "on|off",
                 "numa_balancing": "on|off", "vm_stat_interval": "S",
                 "idle_max_latency_us": "US", "governor": "NAME", "min_freq": "max|KHZ",
                 "thp": "never|madvise|always"}
_BOOL_KNOBS = ("timer_migration", "watchdogs", "smt", "numa_balancing")


def _knob_help(name: str, allowed: str) -> str:
    if name in _BOOL_KNOBS:
        return "on or off"
    return allowed.replace("an integer", "a number").replace("\"", "")


def knob_options(args: argparse.Namespace) -> RuntimeKnobs:
    """The runtime knobs given as options; UsageError (one line naming the option and what
    it takes) for a bad value."""
    values = {}
    for decl in KNOBS:
        text = getattr(args, f"knob_{decl.name}", None)
        if text is None:
            continue
        value: object = text
        if decl.name in _BOOL_KNOBS:
            value = {"on": True, "off": False}.get(text.strip().lower(), text)
        elif decl.name != "governor" and decl.name != "thp" and text.strip().isdigit():
            value = int(text.strip()[:12])
        try:
            values[decl.name] = check_knob(decl.name, value)
        except ValueError:
            raise UsageError(f"{decl.option} {shown(text)}: not allowed; allowed: "
                             f"{_knob_help(decl.name, decl.allowed)}") from None
    return RuntimeKnobs(**values)


def run(args: argparse.Namespace) -> int:

    knobs = knob_options(args)
    if (args.reset or args.status) and (args.irqs or args.kthreads or args.exclude is not None
                                        or args.thread_priority or args.rt_runtime is not None
                                        or knobs.asked()):
        raise UsageError("--irqs, --kthreads, --thread-priority, --rt-runtime, --exclude and "
                         "the runtime knobs go with --cpus")
    if args.scenario is not None and (args.irqs or args.kthreads or args.thread_priority
                                      or args.rt_runtime is not None or knobs.asked()):
        raise UsageError("--scenario applies the file's [shield] table as it is",
                         hint="change the table, or use --cpus with options instead")
    text = _scenario_text(args.scenario) if args.scenario is not None else None
    priorities = tuple(parse_thread_priority(t) for t in args.thread_priority)
    exclude = parse_pids(args.exclude, "--exclude") if args.exclude is not None else frozenset()
    if args.rt_runtime is not None:
        _check_rt_runtime(args.rt_runtime, args.target)
    given = (check_directory(args.journal_dir, "--journal-dir")
             if args.journal_dir is not None else None)  # before connecting
    with open_target(args.target, args.engine_dir) as probe, _sigterm_interrupts():
        directory = given or journal_dir(probe)
        if text is not None:
            return _run_scenario(args, probe, directory, text, exclude)
        return _run(args, probe, directory, priorities, exclude, knobs)


def _scenario_text(path: str) -> str:
    """The scenario file's text, read before connecting (a missing file: exit 2)."""
    from rtlab.scenario.loader import read_scenario_text

    return read_scenario_text(path)


def _run_scenario(args: argparse.Namespace, probe: Transport, directory: Path, text: str,
                  exclude: frozenset[int]) -> int:
    """`--scenario FILE`: its [shield] table, resolved on the target's online CPUs,
    applied persistently (detached, journaled; `--reset` undoes it)."""
    from rtlab.runner.shield import shield_request
    from rtlab.scenario.loader import parse_text

    facts = read_facts(probe)
    parsed = parse_text(text, args.scenario, sorted(facts.cpus_online))
    shields = {v.shield for v in parsed.variants}
    if parsed.variants[0].shield is None or len(shields) != 1:
        why = "has no [shield] table" if parsed.variants[0].shield is None else \
            f"has {len(shields)} different shields in its [matrix]"
        raise UsageError(f"{args.scenario} {why}",
                         hint="give a file with one [shield] table (e.g. `rtlab tune`'s profile)")
    spec = parsed.variants[0].shield
    assert spec is not None
    req = shield_request(spec, facts, exclude)
    out = apply_shield(probe, req, directory, facts=facts, cpuset=spec.cpuset,
                       system=frozenset(spec.system))
    if not (spec.cpuset or spec.tasks or spec.irqs or spec.default_smp_affinity):
        # moves nothing: what may run on the CPUs is no problem of this shield
        v = out["verify"]
        v["problems"] = [p for p in v["problems"] if not re.match(r"CPU \d+: ", p)]
        out["moves"] = False
    return _print_applied(args, probe, out, req.irqs or spec.default_smp_affinity)


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
         priorities: tuple[ThreadPriority, ...], exclude: frozenset[int],
         knobs: RuntimeKnobs) -> int:

    on = "" if probe.is_local else f" on {probe.target}"
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
                        exclude_pids=exclude, knobs=knobs)
    out = apply_shield(probe, req, directory, facts=facts)
    return _print_applied(args, probe, out, args.irqs)


def _print_applied(args: argparse.Namespace, probe: Transport, out: dict, irqs: bool) -> int:
    on = "" if probe.is_local else f" on {probe.target}"
    again = "" if probe.is_local else f" --target {probe.target}"
    if args.json:
        print(json.dumps(out, indent=1))
        return int(ExitCode.OK)
    s = out["summary"]
    if out.get("moves") is False:
        print(f"applied{on} to CPU {s['shield_cpus']}: runtime knobs and priorities only, "
              "nothing moved")
        out["verify"]["in_effect"]["cpus"] = {}
        out["verify"]["requested"]["cpus"] = None
    else:
        where = (f"{s['backend']} cpuset {s['shield_cgroup']}" if s["shield_cgroup"]
                 else "affinities only, no cpuset")
        print(f"shielded CPU {s['shield_cpus']}{on} ({where}); system on CPU "
              f"{s['housekeeping_cpus']}")
        print(f"  moved {out['tasks_moved']} user task(s), {out['kthreads_moved']} "
              f"kthread(s); {s['kthreads_not_movable']} per-CPU kthread(s) cannot move")
    if irqs:
        print(f"  IRQs moved: {_ints(out['irqs_moved']) or 'none'}")
        for r in out["irqs_refused"]:
            print(f"  IRQ {r['irq']} refused: {r['error']} (kernel-managed)")
    for f in out["failed"]:
        print(f"  not applied: {f}")
    _print_status(out["verify"])
    for n in out.get("notes") or []:
        print(f"  note: {n}")
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
    if st["requested"].get("cpus") is not None:
        print(f"  requested: CPU {st['requested']['cpus']}")
    eff = st.get("in_effect") or {"cpus": {}}
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
    for name, k in (eff.get("knobs") or {}).items():
        state = (f"skipped: {k['skipped']}" if k.get("skipped") else
                 f"in effect {_knob_text(k['in_effect'])}" + ("" if k.get("ok") else " (!)"))
        print(f"  {name} = {_knob_text(k['requested'])}: {state}")
    for k in st["requested"].get("knobs") or []:  # a persistent shield's knobs (--status)
        print(f"  {k['knob']}: {k['path']} = {k['value']} (was {k['was']}, reads {k['now']})")
    for p in st["problems"]:
        print(f"  ! {p}")


def _knob_text(v: object) -> str:
    if isinstance(v, bool):
        return "on" if v else "off"
    return str(v)
