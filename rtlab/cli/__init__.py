# SPDX-License-Identifier: MIT
"""Command line entry point: argument parsing, display and exit codes only.

Each sub-command lives in its own module `rtlab.cli.cmd_<name>` exposing
`register(subparsers) -> None`, which adds its parser and sets `func` (a
callable taking the parsed `argparse.Namespace` and returning an exit code).
Adding a command is one module plus one entry in COMMANDS. Command modules
import heavy dependencies lazily, inside `func`.
"""

from __future__ import annotations

import argparse
import importlib
import re
import sys

from rtlab import __version__
from rtlab.errors import RtlabError
from rtlab.exitcodes import ExitCode

COMMANDS: tuple[str, ...] = (
    "run",
    "results",
    "export",
    "doctor",
    "shield",
    "restore",
    "scenarios",
    "report",
    "plot",
    "compare",
    "history",
    "spikes",
    "board",
    "monitor",
)


# a value argparse quotes in its message ("invalid int value: '...'"), when it is long
_LONG_QUOTED = re.compile(r"'[^'\n]{61,}'|\"[^\"\n]{61,}\"")


MESSAGE_MAX = 2000  # characters of one error line (a safety net: values are cut where quoted)


def short_message(message: str, *, quoted: bool = False) -> str:
    """An error line as printed: on one line and cut at MESSAGE_MAX, so a 10-MB argument
    never comes back whole. `quoted`: argparse's messages, which quote a value whole
    ("invalid choice: '...'"): every long quoted value is cut too (textfmt.shown). rtlab's
    own messages cut their values where they quote them, and are not searched for quotes:
    an apostrophe of the prose ("sockperf's") would be taken for one."""
    from rtlab.textfmt import shown

    text = _LONG_QUOTED.sub(lambda m: shown(m.group(0)[1:-1]), message) if quoted else message
    text = " ".join(text.splitlines())
    if len(text) > MESSAGE_MAX:
        text = f"{text[:MESSAGE_MAX]}... ({len(text)} characters)"
    return text


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit code 2, a long value cut
        self.exit(int(ExitCode.USAGE),
                  f"{self.prog}: error: {short_message(message, quoted=True)}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="rtlab",
        description="Real-time Linux latency lab: measure how late real-time work can be, "
        "explain why, and report it.",
    )
    parser.add_argument("--version", action="version", version=f"rtlab {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in COMMANDS:
        module = importlib.import_module(f"rtlab.cli.cmd_{name}")
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    given = list(sys.argv[1:] if argv is None else argv)
    args_list = given or ["run"]  # `rtlab` alone runs the quick scenario
    args = parser.parse_args(args_list)
    args.argv = given  # the command line as typed, for the run's provenance
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return int(ExitCode.USAGE)
    try:
        return int(func(args))
    except RtlabError as exc:
        print(f"rtlab: error: {short_message(exc.one_line())}", file=sys.stderr)
        return int(exc.code)
    except KeyboardInterrupt:
        print("rtlab: interrupted", file=sys.stderr)
        return int(ExitCode.INTERRUPTED)
    except BrokenPipeError:
        return int(ExitCode.OK)
