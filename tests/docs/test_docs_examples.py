# SPDX-License-Identifier: MIT
"""Every example in the docs is one the tool accepts: each ```toml block of docs/*.md
(and README.md) loads with the scenario loader, each `rtlab ...` command line in a
shell block parses with the CLI's own parser (option names and choices; nothing runs).

A synopsis line (`rtlab results list [--limit N]`, `--format json|csv`) is checked with
every optional part given and the first of each alternative."""

from __future__ import annotations

import contextlib
import io
import re
import shlex
from pathlib import Path

import pytest

from rtlab.cli import build_parser
from rtlab.scenario.loader import parse_text

ROOT = Path(__file__).resolve().parents[2]
DOCS = [*sorted((ROOT / "docs").rglob("*.md")), ROOT / "README.md"]
ONLINE = list(range(8))  # examples may name CPUs up to 7
_BLOCK = re.compile(r"^```([a-z]*)\n(.*?)^```", re.S | re.M)


def _blocks(langs: tuple[str, ...]) -> list[tuple[str, int, str]]:
    out = []
    for md in DOCS:
        text = md.read_text(encoding="utf-8")
        for m in _BLOCK.finditer(text):
            if m.group(1) in langs:
                line = text[:m.start()].count("\n") + 2  # first line inside the block
                out.append((f"{md.relative_to(ROOT)}:{line}", m.group(2), line))
    return out


TOML = _blocks(("toml",))


def test_the_docs_have_toml_examples() -> None:
    assert len(TOML) >= 3, TOML


@pytest.mark.parametrize(("where", "text"), [(w, t) for w, t, _ in TOML],
                         ids=[w for w, _, _ in TOML])
def test_toml_example_loads(where: str, text: str) -> None:
    parse_text(text, where, ONLINE)  # UsageError with file:line:col if the loader refuses it


def _commands() -> list[tuple[str, str]]:
    out = []
    for where, text, first in _blocks(("", "sh", "bash", "console", "shell")):
        path = where.rsplit(":", 1)[0]
        lines = text.splitlines()
        i = 0
        while i < len(lines):
            n = i
            cmd = lines[i].strip()
            while cmd.endswith("\\") and i + 1 < len(lines):  # continuation lines
                i += 1
                cmd = cmd[:-1] + " " + lines[i].strip()
            i += 1
            cmd = re.sub(r"^\$ ", "", cmd)
            cmd = re.sub(r"\s+#.*$", "", cmd)  # trailing comment
            for part in cmd.split(";"):
                part = part.strip()
                if part.startswith("rtlab ") or part == "rtlab":
                    out.append((f"{path}:{first + n}", part))
    return out


def _synopsis(cmd: str) -> str:
    """`rtlab x [--a N] --f json|csv` -> `rtlab x --a N --f json` (every option checked)."""
    cmd = cmd.replace("[", " ").replace("]", " ")
    toks = [tok.split("|")[0] if "|" in tok else tok for tok in cmd.split()]
    return " ".join("1" if tok == "N" else tok for tok in toks)  # an integer placeholder


COMMANDS = _commands()


def test_the_docs_have_command_examples() -> None:
    assert len(COMMANDS) >= 30, len(COMMANDS)


@pytest.mark.parametrize(("where", "cmd"), COMMANDS, ids=[w for w, _ in COMMANDS])
def test_command_example_parses(where: str, cmd: str) -> None:
    if "..." in cmd or "…" in cmd:
        pytest.skip("an elided command line")
    argv = shlex.split(_synopsis(cmd))[1:]
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            build_parser().parse_args(argv)
    except SystemExit as exc:
        assert exc.code in (0, None), f"{where}: `{cmd}`: {err.getvalue().strip()}"
