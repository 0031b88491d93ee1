# SPDX-License-Identifier: MIT
"""Hostile input to rtlab-probe (issue 24): every option of every command, found in the
engine's own tables (`list --json` for the probes, the generated `--help` of load and
sys), given values that are out of range, malformed, overflowing, empty or 100 000
characters long. Each must be refused before anything is done: exit 2, one short line
on stderr, nothing on stdout, no file created (not even the --output or --tee it was
given). Output files that are not regular files are refused and left as they are; a
journal that is not a journal is an error record, never a raw line in the JSON Lines.
No root needed; nothing here measures for more than a fraction of a second."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.devices import device_nodes

from .helpers import parse_lines, run_probe

HUGE = "A" * 100_000
MAX_MESSAGE = 400  # characters of a refusal line: a huge value is shown cut


@dataclass(frozen=True)
class Opt:
    name: str
    type: str  # int|duration|cpulist|enum|bool|string|size
    min: int | None = None
    max: int | None = None


def probe_table(probe: str) -> dict[str, list[Opt]]:
    r = run_probe(probe, "list", "--json")
    assert r.returncode == 0, r.stderr
    out: dict[str, list[Opt]] = {}
    for p in json.loads(r.stdout)["probes"]:
        if p["unavailable"]:
            continue
        out[p["name"]] = [Opt(o["name"], o["type"], o.get("min"), o.get("max"))
                          for o in p["options"]]
    return out


_HELP_OPT = re.compile(r"^  --([a-z0-9-]+)(?:, --no-[a-z0-9-]+)?(?: \S+)?\s")
_HELP_TYPE = re.compile(r"^\s+\[(integer|duration|CPU list|CPU number|one of|flag|string|size)"
                        r"(?: in bytes \(k\|M\|G\|T: x1024\))?(?: \(ns\|us\|ms\|s\|m\|h\))?"
                        r"(?: (-?\d+)\.\.(-?\d+))?")
_HELP_TYPES = {"integer": "int", "duration": "duration", "CPU list": "cpulist",
               "CPU number": "cpulist", "one of": "enum", "flag": "bool", "string": "string",
               "size": "size"}


def help_table(probe: str, *cmd: str) -> list[Opt]:
    """The options of a command from its --help, which the engine generates from the
    same table it parses with (engine/src/opts.c): name, type and integer range."""
    r = run_probe(probe, *cmd, "--help")
    assert r.returncode == 0, r.stderr
    opts: list[Opt] = []
    name = None
    for line in r.stdout.splitlines():
        m = _HELP_OPT.match(line)
        if m and m.group(1) != "help":
            name = m.group(1)
            continue
        t = _HELP_TYPE.match(line)
        if t and name:
            lo = int(t.group(2)) if t.group(2) and t.group(1) == "integer" else None
            hi = int(t.group(3)) if t.group(3) and t.group(1) == "integer" else None
            opts.append(Opt(name, _HELP_TYPES[t.group(1)], lo, hi))
            name = None
    assert opts, f"no options found in `{' '.join(cmd)} --help`"
    return opts


def bad_values(o: Opt) -> list[str]:
    """Values no option of this type and range may accept."""
    if o.type == "bool":
        return []
    vals = ["", HUGE]
    if o.type == "int":
        vals += ["x", "1e3", "0x10", "--", "99999999999999999999999"]
        if o.min is not None and o.min > -(1 << 63):
            vals.append(str(o.min - 1))
        if o.max is not None:
            vals.append(str(o.max + 1))
    elif o.type == "duration":
        vals += ["-1s", "1", "abc", "1.5ns", "99999999999999999999s", "1000001h"]
        if o.min:
            vals.append(f"{o.min - 1}ns")
    elif o.type == "size":
        vals += ["-1", "1P", "1.5M", "99999999999999999999T"]
    elif o.type == "cpulist":
        vals += ["1,,2", "-1", "1-", "3-1", ",", "0,", "a", "99999999",
                 str(os.cpu_count() or 1)]  # a CPU that is not online
    elif o.type == "enum":
        vals += ["bogus", "\x01\xff"]
    return vals


def assert_refused(r: subprocess.CompletedProcess, workdir: Path, what: str,
                   code: int = 2) -> None:
    err = r.stderr
    assert r.returncode == code, f"{what}: exit {r.returncode}: {err[:300]}"
    assert err.count("\n") == 1 and err.endswith("\n"), f"{what}: not one line: {err[:300]}"
    assert len(err) < MAX_MESSAGE, f"{what}: {len(err)} characters: {err[:120]}..."
    assert "Traceback" not in err and r.stdout == "", what
    left = sorted(p.name for p in workdir.iterdir())
    assert left == [], f"{what}: left {left}"


def run_in(probe: str, workdir: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([probe, *args], capture_output=True, timeout=60, cwd=workdir,
                          check=False, stdin=subprocess.DEVNULL, text=True,
                          errors="surrogateescape")


def shown(args: tuple[str, ...]) -> str:
    return " ".join(a if len(a) < 40 else f"{a[:20]}...({len(a)})" for a in args)


@pytest.fixture(scope="module")
def table(probe_bin: str) -> dict[str, list[Opt]]:
    return probe_table(probe_bin)


def test_every_probe_option_refuses_bad_values(probe_bin: str, table: dict[str, list[Opt]],
                                               tmp_path: Path) -> None:
    """Every option of every probe, from the probe table; --output names a file that
    a refused command must not create."""
    cases = 0
    for probe, opts in table.items():
        for o in opts:
            if o.name == "output":
                continue
            args_list = ([("--" + o.name + "=1",)] if o.type == "bool" else
                         [("--" + o.name, v) for v in bad_values(o)])
            for bad in args_list:
                args = (probe, *bad, "--output", "out.jsonl")
                assert_refused(run_in(probe_bin, tmp_path, *args), tmp_path, shown(args))
                cases += 1
    assert cases > 300  # the tables were read: seven probes, about twenty options each


def test_load_and_sys_options_refuse_bad_values(probe_bin: str, tmp_path: Path) -> None:
    """load and sys, from their generated --help; a --tee file must not be created."""
    cases = 0
    for o in help_table(probe_bin, "load"):
        for v in ([] if o.type == "bool" else bad_values(o)):
            if o.name == "priority" and v == "0":
                continue  # valid with the default policy (other)
            args = ("--tee", "t.jsonl", "load", "--cpu", "1", "--duration", "1s",
                    "--" + o.name, v)
            assert_refused(run_in(probe_bin, tmp_path, *args), tmp_path, shown(args))
            cases += 1
    subs = {"max-file": "snapshot", "max-total": "snapshot", "journal": "status",
            "root": "cpumodel", "dir": "journals", "lock": "lockinfo", "owner": "apply",
            "detach": "apply"}
    for o in help_table(probe_bin, "sys"):
        for v in ([] if o.type == "bool" else bad_values(o)):
            args = ("--tee", "t.jsonl", "sys", subs[o.name], "--" + o.name, v)
            assert_refused(run_in(probe_bin, tmp_path, *args), tmp_path, shown(args))
            cases += 1
    for args in (("sys", "bogus"), ("sys", HUGE), (HUGE,), ("list", HUGE),
                 ("--version", HUGE), ("exec", "--cpus", "1,,2", "--", "true"),
                 ("exec", "--cpus", HUGE, "--", "true"), ("timer", "--bogus\x01"),
                 ("timer", "--" + "x" * 200), ("timer", "stray")):
        assert_refused(run_in(probe_bin, tmp_path, *args), tmp_path, shown(args))
        cases += 1
    assert cases > 80


def test_conflicts_refused_before_output(probe_bin: str, tmp_path: Path) -> None:
    """Two ways to say how long, a run shorter than one period, an option refused by
    the probe after parsing: exit 2, and the --output file is not created."""
    for args in (("timer", "--duration", "1s", "--loops", "10"),
                 ("timer", "--interval", "10ms", "--duration", "1ms"),
                 ("switch", "--interval", "10ms", "--duration", "1ms"),
                 ("switch", "--duration", "1s", "--loops", "10"),
                 ("overhead", "--duration", "1s", "--test-duration", "1s"),
                 ("timer", "--priority", "0"),
                 ("timer", "--policy", "other", "--priority", "5"),
                 ("udp", "ping", "--peer", "127.0.0.1:9")):
        full = (*args, "--output", "out.jsonl")
        assert_refused(run_in(probe_bin, tmp_path, *full), tmp_path, shown(full))


def test_output_must_be_a_regular_file(probe_bin: str, tmp_path: Path) -> None:
    """--output, --samples and --tee: a directory, a FIFO, a device other than
    /dev/null, a path in no directory and /proc are refused (exit 2), and left as they
    are; `-` is stdout for --output only."""
    work = tmp_path / "work"
    work.mkdir()
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    full = device_nodes(tmp_path)["full"]  # the test's own node as root (never /dev/full)
    targets = [str(tmp_path), str(fifo), str(tmp_path / "missing" / "x"), "/proc/self/comm",
               full]
    table = probe_table(probe_bin)
    for probe, opts in table.items():
        if not any(o.name == "output" for o in opts):
            continue
        for t in targets:
            args = (probe, "--output", t)
            assert_refused(run_in(probe_bin, work, *args), work, shown(args))
    for t in [*targets, "-"]:
        for args in (("timer", "--samples", t, "--duration", "10ms"),
                     ("--tee", t, "sys", "preempt")):
            assert_refused(run_in(probe_bin, work, *args), work, shown(args))
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert stat.S_ISCHR(os.stat(full).st_mode)


def test_output_file_appears_only_when_the_run_starts(probe_bin: str, tmp_path: Path) -> None:
    """An existing --output is replaced by a run that started (whole JSON Lines), and
    no temporary file is left beside it; --output - is stdout; --tee takes its name
    at its first line and holds what stdout got."""
    out = tmp_path / "out.jsonl"
    out.write_text("old\n")
    r = run_in(probe_bin, tmp_path, "timer", "--duration", "20ms", "--allow-non-rt",
               "--output", str(out), "--samples", "s.bin")
    assert r.returncode == 0, r.stderr
    recs = parse_lines(out.read_text())
    assert recs[0]["type"] == "header" and recs[-1]["type"] == "result"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.jsonl", "s.bin"]
    r = run_in(probe_bin, tmp_path, "timer", "--duration", "10ms", "--allow-non-rt",
               "--output", "-")
    assert r.returncode == 0 and parse_lines(r.stdout)[-1]["type"] == "result"
    r = run_in(probe_bin, tmp_path, "--tee", "t.jsonl", "sys", "preempt")
    assert r.returncode == 0 and (tmp_path / "t.jsonl").read_text() == r.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.jsonl", "s.bin", "t.jsonl"]


def test_journals_never_echo_garbage(probe_bin: str, tmp_path: Path) -> None:
    """sys journals / status: a journal with a line that is not a journal record (text,
    a control character, bytes that are not UTF-8 inside a string, a header of another
    schema) is an error record, counted, and none of its lines is passed on."""
    head = b'{"type":"journal","schema":1,"pid":1}\n'
    (tmp_path / "a-good.journal").write_bytes(head)
    bad = {"b-text.journal": head + b"GARBAGE\n",
           "c-ctrl.journal": head + b'{"op":"x\x01"}\n',
           "d-utf8.journal": head + b'{"op":"\xff\xfe"}\n',
           "e-schema.journal": b'{"type":"journal","schema":99}\n'}
    for name, data in bad.items():
        (tmp_path / name).write_bytes(data)
    os.mkfifo(tmp_path / "f-fifo.journal")
    r = subprocess.run([probe_bin, "sys", "journals", "--dir", str(tmp_path)],
                       capture_output=True, timeout=30, check=False)
    assert r.returncode == 1
    recs = [json.loads(line.decode("utf-8")) for line in r.stdout.splitlines()]
    errors = [x for x in recs if x["type"] == "error"]
    assert sorted(Path(x["path"]).name for x in errors) == sorted(bad)
    assert all(x["error"] == "EBADMSG" for x in errors)
    assert recs[-1]["type"] == "journals_done"
    assert recs[-1]["count"] == 1 and recs[-1]["errors"] == len(bad)
    assert len(r.stderr.decode().splitlines()) == len(bad)
    for name in bad:
        s = subprocess.run([probe_bin, "sys", "status", "--journal", str(tmp_path / name)],
                           capture_output=True, timeout=30, check=False, text=True)
        assert s.returncode == 1 and s.stdout == "" and s.stderr.count("\n") == 1
        assert "not an rtlab journal" in s.stderr
    # a FIFO or a device named as a journal or a lock: refused at once, not read
    for args in (("status", "--journal", str(tmp_path / "f-fifo.journal")),
                 ("restore", "--journal", str(tmp_path / "f-fifo.journal")),
                 ("restore", "--journal", "/dev/null"),
                 ("lockinfo", "--lock", str(tmp_path / "f-fifo.journal"))):
        s = run_probe(probe_bin, "sys", *args, timeout=30)
        assert s.returncode == 2 and s.stdout == "", (args, s.stderr)
        assert s.stderr.count("\n") == 1 and "not a regular file" in s.stderr
    assert stat.S_ISFIFO(os.stat(tmp_path / "f-fifo.journal").st_mode)


def test_sys_stdin_garbage_stays_json(probe_bin: str, tmp_path: Path) -> None:
    """What sys reads on stdin is never echoed raw: a snapshot pattern with a control
    byte is shown escaped in its one line; apply answers garbage ops with JSON lines
    and changes nothing (root: apply needs it)."""
    r = subprocess.run([probe_bin, "sys", "snapshot"], input=b"\x01garbage\xff\n",
                       capture_output=True, timeout=30, check=False)
    assert r.returncode == 2 and r.stdout == b""
    assert r.stderr == b"rtlab-probe sys snapshot: pattern on line 1 '\\x01garbage\\xff': " \
                       b"not an absolute path\n"
    if os.geteuid() != 0:
        return
    ops = (b'garbage\xff\x01\n{"op":"\xff\xfe"}\n{"op":"affinity","tid":-1,"cpus":[0]}\n'
           b'{"op":"affinity","tid":1,"cpus":[-1]}\n{"op":"sched","tid":1,"policy":"fifo",'
           b'"priority":0}\n{"op":"release"}\n')
    journal = tmp_path / "x.journal"
    r = subprocess.run([probe_bin, "sys", "apply", "--journal", str(journal)], input=ops,
                       capture_output=True, timeout=60, check=False)
    assert r.returncode == 0, r.stderr
    recs = [json.loads(line.decode("utf-8")) for line in r.stdout.splitlines()]
    applied = [x for x in recs if x["type"] == "applied"]
    assert [x["ok"] for x in applied] == [False] * 5 + [True]
    assert recs[-1]["type"] == "released" and recs[-1]["restored"] == 0
    assert not journal.exists()
