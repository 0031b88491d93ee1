# SPDX-License-Identifier: MIT
"""`rtlab scenarios list|show|check`: the built-in scenarios and scenario files."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from rtlab.exitcodes import ExitCode


def register(sub: Any) -> None:
    p = sub.add_parser(
        "scenarios",
        help="list, show or check scenarios (built-in or FILE.toml)",
        description="The built-in scenarios and scenario files (format: docs/scenarios.md).",
    )
    ssub = p.add_subparsers(dest="scenarios_command", metavar="ACTION",
                            parser_class=type(p))
    ls = ssub.add_parser("list", help="name and description of every built-in scenario")
    ls.set_defaults(func=cmd_list)
    show = ssub.add_parser("show", help="print a scenario file")
    show.add_argument("name", metavar="NAME", help="built-in name or FILE.toml")
    show.set_defaults(func=cmd_show)
    check = ssub.add_parser("check", help="validate a scenario on this machine and print "
                            "what it resolves to (CPUs, phases, variants); changes nothing")
    check.add_argument("name", metavar="NAME", help="built-in name or FILE.toml")
    check.set_defaults(func=cmd_check)
    p.set_defaults(func=lambda _a: (p.print_help(), int(ExitCode.USAGE))[1])


def cmd_list(_args: argparse.Namespace) -> int:
    from rtlab.scenario.builtin import builtins, describe

    items = builtins()
    width = max((len(n) for n in items), default=0)
    for name, path in items.items():
        print(f"{name:<{width}}  {describe(path)}")
    return int(ExitCode.OK)


def cmd_show(args: argparse.Namespace) -> int:
    from rtlab.scenario.builtin import find

    path = find(args.name)
    sys.stdout.write(path.read_text(encoding="utf-8"))
    return int(ExitCode.OK)


def cmd_check(args: argparse.Namespace) -> int:
    from rtlab.scenario import find, format_duration, load_file
    from rtlab.scenario.cpus import format_cpulist

    sf = load_file(find(args.name))
    print(f"{sf.name}: valid on this machine ({sf.source})")
    for sc in sf.variants:
        indent = "  "
        if sc.variant is not None:
            print(f"  variant {sc.variant}")
            indent = "    "
        if sc.shield is not None:
            sh = sc.shield
            moved = [k for k in ("cpuset", "tasks", "kthreads", "irqs", "default_smp_affinity")
                     if getattr(sh, k)]
            print(f"{indent}shield: system CPUs {format_cpulist(sh.system)}, user CPUs "
                  f"{format_cpulist(sh.user)} ({', '.join(moved) or 'nothing moved'})")
        for ld in sc.loads:
            where = format_cpulist(ld.cpus) if ld.cpus is not None else "any CPU"
            print(f"{indent}load {ld.name}: {ld.kind} on {where}")
        for ph in sc.phases:
            probes = ", ".join(f"{p.label or p.name} on CPU {format_cpulist(p.cpus)}"
                               for p in ph.probes)
            dur = format_duration(ph.duration_ns) if ph.duration_ns else "-"
            print(f"{indent}phase {ph.name} {dur}: {probes}; loads: {ph.load}")
    return int(ExitCode.OK)
