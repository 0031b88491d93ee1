# SPDX-License-Identifier: MIT
"""Every option of `rtlab`, discovered from its parser, and what kind of input it takes.

`CLASSES` is the one table: a rule per kind of input (an option's metavar, dest, type or
name), tried in order. test_classification fails when an option matches no rule, so a
new option is covered by the hostile cases of its kind without being listed by hand
(and a new kind of input gets a rule and cases of its own)."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from rtlab.cli import build_parser


@dataclass(frozen=True)
class Option:
    command: tuple[str, ...]  # ("results", "import")
    name: str  # "--store", or the metavar of a positional ("FILE")
    action: argparse.Action

    @property
    def key(self) -> str:
        return " ".join((*self.command, self.name))

    @property
    def positional(self) -> bool:
        return not self.action.option_strings


def walk(parser: argparse.ArgumentParser | None = None,
         prefix: tuple[str, ...] = ()) -> Iterator[Option]:
    """Every option and positional of every command (help and version left out)."""
    parser = parser or build_parser()
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            for name, sub in a.choices.items():
                yield from walk(sub, (*prefix, name))
        elif not isinstance(a, (argparse._HelpAction, argparse._VersionAction)) \
                and a.dest != "version":  # rtlab's own --version action (the engines too)
            name = max(a.option_strings, key=len) if a.option_strings else str(a.metavar)
            yield Option(prefix, name, a)


Rule = Callable[[Option], bool]


def _metavar(*names: str) -> Rule:
    return lambda o: o.action.metavar in names


def _dest(*names: str) -> Rule:
    return lambda o: o.action.dest in names


def _both(a: Rule, b: Rule) -> Rule:
    return lambda o: a(o) and b(o)


# kind of input -> the rule that recognises it; the first rule that matches wins
CLASSES: dict[str, Rule] = {
    "flag": lambda o: o.action.nargs == 0,
    # a closed set: argparse's choices, a metavar that lists them ("on|off"), or names of a
    # catalogue ("NAMES": tune's knobs and statistics)
    "choice": lambda o: o.action.choices is not None or "|" in str(o.action.metavar or "")
    or o.action.metavar == "NAMES",
    "cpus": _metavar("LIST"),
    "pids": _metavar("PIDS"),
    "duration": _metavar("DUR"),
    "priority": _dest("priority"),
    "number": lambda o: o.action.type is int or o.action.metavar in ("S", "US"),
    "size": _metavar("BYTES"),
    "output": _both(_metavar("FILE", "FILE.png|svg"),
                    _dest("output", "report", "junit", "samples", "html", "plot")),
    "input": _both(_metavar("FILE", "SCENARIO"), _dest("file", "scenario")),
    "store": _both(_metavar("PATH", "STORE"), _dest("store", "other")),
    "target": _both(_metavar("TARGET"), _dest("target", "reflector")),
    "address": _metavar("ADDR:PORT", "HOST:PORT"),
    "slo": _metavar("EXPR"),
    "run": _metavar("RUN", "ID"),
    "date": _metavar("ISO", "YYYY-MM-DD"),
    "directory": lambda o: o.action.metavar == "DIR" or o.action.dest == "journal_dir",
    "assignment": _metavar("KEY=VALUE", "PATTERN=POLICY:PRIO", "PATTERN=CPUS"),
    "name": lambda o: o.action.metavar in ("NAME", "H", "RELEASE", "MODEL", "CMD")
    or o.action.dest == "probe",
}


def classify(o: Option) -> str | None:
    for kind, rule in CLASSES.items():
        if rule(o):
            return kind
    return None


def by_class(kind: str) -> list[Option]:
    return [o for o in walk() if classify(o) == kind]
