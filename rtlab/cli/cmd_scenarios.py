# SPDX-License-Identifier: MIT
"""`rtlab scenarios list|show|check`: the built-in scenarios and scenario files."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from rtlab.cli.options import add_json_arg
from rtlab.errors import RtlabError
from rtlab.exitcodes import ExitCode
from rtlab.probes.registry import DEFAULT_PROBE
from rtlab.scenario import format_duration
from rtlab.scenario.builtin import builtin_dirs, builtins, describe
from rtlab.scenario.cpus import format_cpulist
from rtlab.scenario.loader import ScenarioError, read_scenario_text, toml_document


def register(sub: Any) -> None:
    p = sub.add_parser(
        "scenarios",
        help="list, show or check scenarios (built-in or FILE.toml)",
        description="The built-in scenarios and scenario files (format: docs/scenarios.md).",
    )
    ssub = p.add_subparsers(dest="scenarios_command", metavar="ACTION",
                            parser_class=type(p))
    ls = ssub.add_parser("list", help="name and description of every built-in scenario",
                         description="The built-in scenarios (installed package data first, "
                         "then a source tree's scenarios/ directory; the first of a name "
                         "wins). --json lists every one with its file, description, probes, "
                         "phases, loads and matrix variants as the file writes them (what "
                         "they resolve to on this machine: `rtlab scenarios check NAME`).")
    add_json_arg(ls)
    ls.set_defaults(func=cmd_list)
    show = ssub.add_parser("show", help="print a scenario file")
    show.add_argument("name", metavar="NAME", help="built-in name or FILE.toml")
    show.set_defaults(func=cmd_show)
    check = ssub.add_parser("check", help="validate a scenario on this machine and print "
                            "what it resolves to (CPUs, phases, variants); changes nothing",
                            description="Validate each scenario on this machine and print "
                            "what it resolves to (CPUs, phases, variants); changes nothing. "
                            "An invalid one is one line on stderr (file, line, what is "
                            "wrong); the others are still checked. --json prints one document "
                            "on stdout: per file ok or its error (file, line, message), and "
                            "the variants it resolves to. Exit codes: 0 all valid, 2 any "
                            "invalid (with --json too).")
    check.add_argument("names", nargs="+", metavar="NAME",
                       help="built-in name or FILE.toml (several: each is checked)")
    add_json_arg(check)
    check.set_defaults(func=cmd_check)
    p.set_defaults(func=lambda _a: (p.print_help(), int(ExitCode.USAGE))[1])


def cmd_list(args: argparse.Namespace) -> int:

    items = builtins()
    if getattr(args, "json", False):
        _print_json({"schema": 1, "dirs": [str(d) for d in builtin_dirs()],
                     "scenarios": [_list_entry(n, p) for n, p in items.items()]})
        return int(ExitCode.OK)
    width = max((len(n) for n in items), default=0)
    for name, path in items.items():
        print(f"{name:<{width}}  {describe(path)}")
    return int(ExitCode.OK)


def _print_json(doc: Any) -> None:
    import json

    json.dump(doc, sys.stdout, indent=1)
    sys.stdout.write("\n")


def _list_entry(name: str, path: Any) -> dict[str, Any]:
    """A built-in scenario as its file writes it (not resolved on this machine): probes
    and phases with the loader's defaults (probe `timer`; one phase `main` of every
    load), CPU expressions and durations as written (null: the default)."""


    entry: dict[str, Any] = {"name": name, "source": str(path), "description": describe(path)}
    try:
        doc = toml_document(read_scenario_text(path), str(path))
    except RtlabError as exc:
        return entry | {"error": f"cannot read: {exc.message}"}

    def tables(key: str) -> list[dict[str, Any]]:
        v = doc.get(key, [])
        return [t for t in v if isinstance(t, dict)] if isinstance(v, list) else []

    head = doc.get("scenario") if isinstance(doc.get("scenario"), dict) else {}
    probes = [{"name": p.get("name") or p.get("probe", DEFAULT_PROBE),
               "probe": p.get("probe", DEFAULT_PROBE), "cpus": p.get("cpus")}
              for p in tables("probe") or [{}]]
    loads = [{"name": ld.get("name"), "kind": ld.get("kind"), "cpus": ld.get("cpus")}
             for ld in tables("load")]
    phases = [{"name": ph.get("name"), "duration": ph.get("duration"),
               "loads": ph.get("loads", [])} for ph in tables("phase")] or [
        {"name": "main", "duration": None, "loads": [ld["name"] for ld in loads]}]
    matrix = doc.get("matrix") if isinstance(doc.get("matrix"), dict) else None
    variants = ([v.get("name") for v in matrix.get("variant", []) if isinstance(v, dict)]
                if matrix is not None else None)
    return entry | {"scenario": head.get("name", name),
                    "shield": isinstance(doc.get("shield"), dict),
                    "trace": isinstance(doc.get("trace"), dict),
                    "probes": probes, "loads": loads, "phases": phases, "variants": variants}


def cmd_show(args: argparse.Namespace) -> int:
    from rtlab.scenario.builtin import find

    path = find(args.name)
    sys.stdout.write(read_scenario_text(path))
    return int(ExitCode.OK)


def cmd_check(args: argparse.Namespace) -> int:
    """Every NAME checked; an invalid one is its one line on stderr (exit 2 at the end)."""
    from rtlab.scenario import find, load_file

    files: list[dict[str, Any]] = []
    failed = False
    for ref in args.names:
        path = None
        try:
            path = find(ref)
            sf = load_file(path)
        except RtlabError as exc:
            failed = True
            print(f"rtlab: error: {exc.one_line()}", file=sys.stderr)
            if path is None and (ref.endswith(".toml") or "/" in ref):
                path = ref  # a file that is not there
            files.append({"name": ref, "file": str(path) if path is not None else None,
                          "ok": False, "error": _error_json(exc, path)})
            continue
        if args.json:
            files.append(_check_json(ref, sf))
        else:
            _print_check(sf)
    if args.json:
        _print_json({"schema": 1, "ok": not failed, "files": files})
    return int(ExitCode.USAGE if failed else ExitCode.OK)


def _error_json(exc: Any, path: Any) -> dict[str, Any]:
    """file, line (null: not known) and message (without the place) of an error."""

    if isinstance(exc, ScenarioError):
        detail = exc.detail + (f" ({exc.hint})" if exc.hint else "")
        return {"file": exc.source, "line": exc.line, "message": detail}
    return {"file": str(path) if path is not None else None, "line": None,
            "message": exc.one_line()}


def _check_json(ref: str, sf: Any) -> dict[str, Any]:
    """What `check` prints, as data: per variant the resolved scenario (as a run records
    it, with its hash) and its shield's system/user CPUs."""
    return {"name": ref, "file": sf.source, "ok": True, "scenario": sf.name,
            "description": sf.description, "matrix": sf.has_matrix,
            "variants": len(sf.variants),
            "resolved": [{"variant": sc.variant, "hash": sc.hash, **sc.to_dict()}
                         for sc in sf.variants]}


def _print_check(sf: Any) -> None:

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
