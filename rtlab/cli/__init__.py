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
import contextlib
import importlib
import re
import sys

from rtlab import __version__
from rtlab.errors import RtlabError
from rtlab.exitcodes import ExitCode
from rtlab.textfmt import SHOWN_CHARS, shown

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
    "tune",
)


# a value argparse quotes in its message ("invalid int value: '...'"), when it is long
_LONG_QUOTED = re.compile(r"'[^'\n]{61,}'|\"[^\"\n]{61,}\"")


TOKEN_MAX = 400  # longer than any path or word of a message: a value echoed whole
_LONG_TOKEN = re.compile(rf"\S{{{TOKEN_MAX + 1},}}")
MESSAGE_MAX = 2000  # characters of one error line (a safety net: values are cut where quoted)


def short_message(message: str, *, quoted: bool = False) -> str:
    """An error line as printed: on one line and cut at MESSAGE_MAX, so a 10-MB argument
    never comes back whole. `quoted`: argparse's messages, which quote a value whole
    ("invalid choice: '...'"): every long quoted value is cut too (textfmt.shown). rtlab's
    own messages cut their values where they quote them, and are not searched for quotes:
    an apostrophe of the prose ("sockperf's") would be taken for one."""
    text = _LONG_QUOTED.sub(lambda m: shown(m.group(0)[1:-1]), message) if quoted else message
    # a value echoed whole (a 10-MB argument): any run of non-blank characters longer than
    # any path or word a message quotes is cut where it stands
    text = _LONG_TOKEN.sub(lambda m: f"{m.group(0)[:SHOWN_CHARS]}... "
                                     f"({len(m.group(0))} characters)", text)
    text = " ".join(text.splitlines())
    if len(text) > MESSAGE_MAX:
        text = f"{text[:MESSAGE_MAX]}... ({len(text)} characters)"
    return text


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit code 2, a long value cut
        self.exit(int(ExitCode.USAGE),
                  f"{self.prog}: error: {short_message(message, quoted=True)}\n")


class _VersionAction(argparse.Action):
    """`rtlab --version`: this rtlab and the engines it would put on boards (read only
    when asked: it hashes the engine files)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        from rtlab.engine.builds import ARCHES, engine_dirs, installed_builds

        builds = installed_builds()
        lines = [f"rtlab {__version__}"]
        lines += [f"  engine {b.one_line()}" for b in builds]
        missing = [a for a in ARCHES if a not in {b.arch for b in builds}]
        if missing:
            lines.append(f"  no engine for {', '.join(missing)} (looked in "
                         f"{' and '.join(str(d) for d in engine_dirs())})")
        sys.stdout.write("\n".join(lines) + "\n")
        parser.exit(int(ExitCode.OK))


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="rtlab",
        description="Real-time Linux latency lab: measure how late real-time work can be, "
        "explain why, and report it.",
    )
    parser.add_argument("--version", action=_VersionAction, nargs=0,
                        help="show rtlab's version and the engine build of each board "
                        "architecture (version, libc, size, sha256), and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in COMMANDS:
        module = importlib.import_module(f"rtlab.cli.cmd_{name}")
        module.register(sub)
    return parser


# a value that is a path may hold any bytes (Linux file names are bytes); any other must
# be text: a host name, a probe, a pattern that is not UTF-8 can match nothing
_PATH_METAVAR = re.compile(r"FILE|PATH|DIR|SCENARIO")


def _actions(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """Every option and positional of every command."""
    out: list[argparse.Action] = []
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            for sub in a.choices.values():
                out += _actions(sub)
        else:
            out.append(a)
    return out


def _path_dests(parser: argparse.ArgumentParser) -> set[str]:
    return {a.dest for a in _actions(parser)
            if a.metavar is not None and _PATH_METAVAR.search(str(a.metavar))}


def _typed_name(parser: argparse.ArgumentParser, dest: str, given: list[str]) -> str:
    """The option as the user typed it (`--stop-threshold` or its old spelling
    `--threshold`, `--to` or `--from`), or the positional's name."""
    spellings = [s for a in _actions(parser) if a.dest == dest for s in a.option_strings]
    for arg in given:
        for s in spellings:
            if arg == s or arg.startswith(s + "="):
                return s
    positional = [a for a in _actions(parser) if a.dest == dest and not a.option_strings]
    if positional:
        return str(positional[0].metavar or dest.upper())
    return max(spellings, key=len) if spellings else dest.upper()


def _bad_value(parser: argparse.ArgumentParser, args: argparse.Namespace,
               given: list[str]) -> str | None:
    """What is wrong with the first value no option accepts, whatever the command: an
    empty value (`--duration ''` must not mean "the default"), or one that is not UTF-8
    text where it must be."""
    paths = _path_dests(parser)
    for dest, value in vars(args).items():
        if dest == "argv":  # the command line as typed, kept for the provenance
            continue
        values = value if isinstance(value, list) else [value]
        for v in values:
            if not isinstance(v, str):
                continue
            name = _typed_name(parser, dest, given)
            if not v.strip():
                return f"{name} {shown(v)}: an empty value (give one, or leave the option out)"
            if dest not in paths and _undecodable(v):
                return f"{name} {shown(v)}: not valid UTF-8 text (check the value's encoding)"
    return None


def _undecodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def main(argv: list[str] | None = None) -> int:
    # a value or path with bytes that are not UTF-8 is shown escaped, never a traceback
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(AttributeError, ValueError):
            stream.reconfigure(errors="backslashreplace")  # type: ignore[union-attr]
    parser = build_parser()
    given = list(sys.argv[1:] if argv is None else argv)
    args_list = given or ["run"]  # `rtlab` alone runs the quick scenario
    args = parser.parse_args(args_list)
    args.argv = given  # the command line as typed, for the run's provenance
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return int(ExitCode.USAGE)
    bad = _bad_value(parser, args, given)
    if bad is not None:
        print(f"rtlab: error: {bad}", file=sys.stderr)
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
