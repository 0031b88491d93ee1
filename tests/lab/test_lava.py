# SPDX-License-Identifier: MIT
"""The LAVA board-farm job: scripts/lava/rtlab-lava.sh and docs/lava/rtlab-latency.yaml.

The script runs the static engine on a board with nothing but a POSIX shell and awk,
prints one `lava-test-case` line per check and keeps the engine's raw output, which
`rtlab results import` stores with the board's facts (docs/lava.md).

Tiers:
* here, without a board: the script under this machine's /bin/sh and awk (dash and
  mawk on Debian), on synthetic engine output whose statistics rtlab computes too (the
  printed values and SLO verdicts must be rtlab's), and with the native engine (root);
* on an emulated PREEMPT_RT board (busybox sh and busybox awk, which Debian builds
  without math functions; docs/lab.md): the exact lines, exit codes, a forced SLO
  failure and a met SLO, and the import of the artifact with the board's provenance.
Latency under emulation means nothing: values are checked for format, consistency with
rtlab's own computation of the same histogram, and plausibility, never for size.
"""

from __future__ import annotations

import json
import os
import random
import re
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from rtlab.probes.registry import shape as probe_shape
from tests.support.store_reading import stored_runs

from .boards import Board

REPO = Path(__file__).resolve().parent.parent.parent
SCRIPT = REPO / "scripts" / "lava" / "rtlab-lava.sh"
DEFINITION = REPO / "docs" / "lava" / "rtlab-latency.yaml"

CASE_RE = re.compile(
    r"lava-test-case (?P<name>[A-Za-z0-9._-]+) --result (?P<result>pass|fail|skip|unknown)"
    r"(?: --measurement (?P<measurement>[0-9]+(?:\.[0-9]+)?) --units (?P<units>[a-z]+))?")
REF_RE = re.compile(r"lava-test-reference (?P<name>[A-Za-z0-9._-]+) --result "
                    r"(?P<result>pass|fail) --reference (?P<url>\S+)")
RAW_RE = re.compile(r"rtlab-lava: raw output \(rtlab results import FILE\): (?P<path>\S+)")
SAY = "rtlab-lava: "


@dataclass(frozen=True)
class Case:
    name: str
    result: str
    measurement: str | None
    units: str | None


@dataclass
class Out:
    rc: int
    stdout: str
    stderr: str

    @property
    def lines(self) -> list[str]:
        return self.stdout.splitlines()

    @property
    def cases(self) -> list[Case]:
        found = []
        for line in self.lines:
            m = CASE_RE.fullmatch(line)
            if m:
                found.append(Case(m["name"], m["result"], m["measurement"], m["units"]))
        return found

    def case(self, name: str) -> Case:
        (c,) = [c for c in self.cases if c.name == name]
        return c

    @property
    def notes(self) -> list[str]:
        return [ln[len(SAY):] for ln in self.lines if ln.startswith(SAY)]

    @property
    def raw(self) -> str:
        (path,) = [m["path"] for ln in self.lines if (m := RAW_RE.fullmatch(ln))]
        return path

    def check_format(self) -> None:
        """Every line is a LAVA helper call (in the exact form) or a log line of ours."""
        for line in self.lines:
            assert (line.startswith(SAY) or CASE_RE.fullmatch(line)
                    or REF_RE.fullmatch(line)), line


def run_script(*args: str, env: dict[str, str] | None = None, timeout: float = 300,
               cwd: Path | None = None) -> Out:
    e = {k: v for k, v in os.environ.items() if k != "RTLAB_STORE"}
    e.update(env or {})
    p = subprocess.run(["sh", str(SCRIPT), *args], capture_output=True, text=True,
                       env=e, timeout=timeout, cwd=cwd, check=False)
    return Out(p.returncode, p.stdout, p.stderr)


def rtlab(tmp: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "XDG_DATA_HOME": str(tmp / "xdg"),
           "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "rtlab", *args, "--store",
                           str(tmp / "store.db")], capture_output=True, text=True, env=env,
                          timeout=timeout, check=False)


def us(ns: float) -> str:
    return f"{ns / 1000:.3f}"


def expected_channel_cases(ch: Any) -> list[Case]:
    """The per-CPU lines the script must print for a channel rtlab stored."""
    from rtlab.results.summary import percentile

    p = percentile(ch.hist, 99.99, ch.min_ns, ch.max_ns)
    return [Case(f"{ch.name}-max", "pass", us(ch.max_ns), "us"),
            Case(f"{ch.name}-p99.99", "skip", None, None) if p is None else
            Case(f"{ch.name}-p99.99", "pass", us(p), "us"),
            Case(f"{ch.name}-missed", "pass", str(ch.missed), "periods")]


# --- synthetic engine output -------------------------------------------------------------


def header(hostname: str = "synth-board", release: str = "6.1.0-synth-rt") -> dict[str, Any]:
    return {"type": "header", "schema": 1, "engine_version": "0.1.0", "engine_arch": "x86_64",
            "probe": "timer", "argv": ["rtlab-probe", "timer", "--cpus", "0,1"],
            "start_realtime_ns": 1_790_000_000_000_000_000, "start_monotonic_ns": 1_000,
            "config": {"cpus": [0, 1], "policy": "fifo", "priority": 99,
                       "interval_ns": 1_000_000, "duration_ns": None, "loops": None,
                       "clock": "monotonic", "mlock": True, "window_ns": 1_000_000_000,
                       "snapshot_interval_ns": 1_000_000_000},
            "effective": {"rt_valid": True, "mlock": {"requested": True, "locked": True,
                                                      "error": None}},
            "system": {"hostname": hostname, "sysname": "Linux", "release": release,
                       "version": "#1 SMP PREEMPT_RT \"quoted\" \\ back \\no", "machine": "x86_64",
                       "cmdline": "console=ttyS0 a=\"b c\" x={y:[1,2]}", "preempt": "rt",
                       "cpu_model": "Synthetic, \"quoted\" [CPU]", "cpus_online": [0, 1]}}


def channel(name: str, cpu: int, values: list[int], missed: int = 0) -> dict[str, Any]:
    from rtlab.results.histogram import LogLinHistogram

    hist = LogLinHistogram.from_values(values)
    return {"name": name, "cpu": cpu, "tid": 100 + cpu, "samples": len(values),
            "missed": missed, "negative": 0, "min_ns": min(values), "max_ns": max(values),
            "sum_ns": sum(values), "max_at_ns": 5_000, "hist": hist.to_json(),
            "windows": [], "windows_lost": 0, "ring_lost": 0, "cpu_use": None}


def write_jsonl(path: Path, channels: list[dict[str, Any]], status: str = "completed",
                hdr: dict[str, Any] | None = None) -> Path:
    records = [hdr or header(),
               {"type": "snapshot", "schema": 1, "seq": 1, "elapsed_ns": 1_000_000_000,
                "channels": channels},
               {"type": "result", "schema": 1, "status": status, "exit_code": 0,
                "elapsed_ns": 1_500_000_000, "end_realtime_ns": 1_790_000_001_500_000_000,
                "channels": channels, "threshold_hit": None, "samples_file": None,
                "error": None}]
    path.write_text("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records))
    return path


def latencies(n: int, seed: int, scale: float) -> list[int]:
    rng = random.Random(seed)
    return [int(scale * rng.lognormvariate(0, 0.35)) + int(rng.paretovariate(2.5) * 100)
            for _ in range(n)]


@pytest.fixture(scope="module")
def big_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two channels of 1,000,000 samples each: every tail percentile is supported."""
    d = tmp_path_factory.mktemp("synthetic")
    return write_jsonl(d / "big.jsonl", [channel("cpu0", 0, latencies(1_000_000, 1, 20_000)),
                                         channel("cpu1", 1, latencies(1_000_000, 2, 35_000),
                                                 missed=3)])


# --- without a board: the script's arithmetic is rtlab's -----------------------------------


def test_values_and_slo_verdicts_are_rtlabs(big_run: Path, tmp_path: Path) -> None:
    """max, p99.99 and every SLO verdict (met / violated / undecided, the last printed as
    fail) agree with rtlab's own computation of the imported run; the run has no
    per-window data, so rtlab's intervals are the independent-sample ones too."""
    from rtlab.analysis.slo import evaluate_slo, parse_slo
    from rtlab.analysis.stats import percentile_intervals
    from rtlab.results.summary import percentile

    imp = rtlab(tmp_path, "results", "import", str(big_run))
    assert imp.returncode == 0, imp.stderr
    (result,) = stored_runs(tmp_path / "store.db")
    chans = {ch.name: ch for _, ch in result.channels()}
    # bounds around each channel's percentiles, so that all three outcomes occur: upper
    # bounds only (an SLO with a lower bound above an upper one can never be met and is
    # refused), lower bounds on min and avg
    clauses = ["max < 1s", "missed <= 2", "avg < 40us", "min >= 1us", "avg > 1ns",
               "mode < 30us"]
    for q in (50.0, 99.0, 99.9, 99.99, 99.9999):
        for ch in chans.values():
            iv = percentile_intervals(ch.hist, [q], min_ns=ch.min_ns, max_ns=ch.max_ns)[q]
            for bound in {iv.low_ns, iv.high_ns, percentile(ch.hist, q, ch.min_ns, ch.max_ns)}:
                if bound is not None:
                    clauses.append(f"p{q:g} < {bound}ns")
                    clauses.append(f"p{q:g} <= {bound + 1}ns")
    slo = " and ".join(clauses)
    out = run_script("--input", str(big_run), "--slo", slo)
    out.check_format()
    report = evaluate_slo(parse_slo(slo), result, shape_of=probe_shape)
    assert {o.status for o in report.outcomes} == {"met", "violated", "undecided"}
    want: list[Case] = [Case("engine-run", "pass", "1.500", "s"), Case("rt-valid", "pass", None,
                                                                       None)]
    for ch in chans.values():
        want += expected_channel_cases(ch)
    for o in report.outcomes:
        name = f"slo-{o.channel}-{o.clause.metric}-" + {
            "<": "lt", "<=": "le", ">": "gt", ">=": "ge"}[o.clause.op] + "-" + \
            o.clause.text.split()[-1]
        if o.value is None:
            want.append(Case(name, "pass" if o.passed else "fail", None, None))
        elif o.clause.is_count:
            want.append(Case(name, "pass" if o.passed else "fail", str(int(o.value)),
                             "periods"))
        else:
            want.append(Case(name, "pass" if o.passed else "fail", us(o.value), "us"))
    failed = len(report.failures)
    want.append(Case("slo", "fail", str(failed), "checks"))
    assert out.cases == want
    assert out.rc == 3
    # the log says which checks were undecided, with rtlab's interval
    undecided = [o for o in report.outcomes if o.status == "undecided"]
    for o in undecided[:5]:
        iv = o.interval
        assert iv is not None
        lo = "-inf" if iv.low_ns is None else us(iv.low_ns)
        hi = "unbounded" if iv.high_ns is None else us(iv.high_ns)
        assert any(n.startswith(f"{o.channel}: {o.clause.metric} {o.clause.op} ")
                   and " undecided: " in n and f"interval [{lo}, {hi}] us" in n
                   for n in out.notes), (o, out.notes)
    assert out.notes[-2].startswith(f"SLO NOT MET: {failed} of {len(report.outcomes)} check(s)")


def test_met_slo_passes_and_facts_are_read_from_the_header(big_run: Path) -> None:
    out = run_script("--input", str(big_run), "--slo", "max < 10s and p99 < 1s")
    out.check_format()
    assert out.rc == 0, out.stdout + out.stderr
    assert out.case("slo") == Case("slo", "pass", "0", "checks")
    assert [c.name for c in out.cases if c.name.startswith("slo-")] == [
        "slo-cpu0-max-lt-10s", "slo-cpu0-p99-lt-1s", "slo-cpu1-max-lt-10s", "slo-cpu1-p99-lt-1s"]
    # quoted strings, brackets and commas inside strings do not confuse the reader
    assert out.notes[0] == ("board synth-board, kernel 6.1.0-synth-rt (#1 SMP PREEMPT_RT "
                            "\"quoted\" \\ back \\no), preemption rt, CPU Synthetic, \"quoted\" "
                            "[CPU], engine 0.1.0 (x86_64)")
    no_slo = run_script("--input", str(big_run))
    assert no_slo.rc == 0
    assert not [c for c in no_slo.cases if c.name.startswith("slo")]


def test_lava_helpers_receive_exactly_the_printed_lines(big_run: Path, tmp_path: Path) -> None:
    """Outside LAVA the script prints `lava-test-case ARGS`; inside, the helper is called
    with exactly those ARGS (a stand-in helper on PATH records them)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls"
    for helper in ("lava-test-case", "lava-test-reference"):
        (bin_dir / helper).write_text(f'#!/bin/sh\necho "{helper} $*" >>"{calls}"\n')
        (bin_dir / helper).chmod(0o755)
    upload = f'echo uploaded: "$1"; echo "https://artifacts.example/{big_run.name}"'
    args = ["--input", str(big_run), "--slo", "max < 10s and p99.99 < 1us and missed <= 0",
            "--upload-cmd", upload]
    shim = run_script(*args)
    lava = run_script(*args, env={"PATH": f"{bin_dir}:{os.environ['PATH']}"})
    assert shim.rc == lava.rc == 3
    printed = [ln for ln in shim.lines if ln.startswith("lava-test-")]
    assert printed == calls.read_text().splitlines()
    assert printed[-1] == ("lava-test-reference rtlab-raw-output --result pass --reference "
                           f"https://artifacts.example/{big_run.name}")
    assert not [ln for ln in lava.lines if ln.startswith("lava-test-")]
    failed_upload = run_script("--input", str(big_run), "--upload-cmd", "exit 1")
    assert failed_upload.lines[-1] == "lava-test-case rtlab-raw-output-upload --result fail"


def test_few_samples_truncated_and_contradicting_output(tmp_path: Path) -> None:
    few = write_jsonl(tmp_path / "few.jsonl", [channel("cpu3", 3, [5_000, 6_000, 70_000])])
    out = run_script("--input", str(few), "--slo", "p99.99 < 1s and max < 1ms")
    out.check_format()
    assert out.case("cpu3-p99.99") == Case("cpu3-p99.99", "skip", None, None)
    assert out.case("cpu3-max") == Case("cpu3-max", "pass", "70.000", "us")
    # p99.99 of 3 samples: n/a, and no sample bounds it from above: undecided, not met
    assert out.case("slo-cpu3-p99.99-lt-1s") == Case("slo-cpu3-p99.99-lt-1s", "fail", None,
                                                      None)
    assert any("p99.99 < 1s undecided: p99.99 = n/a" in n for n in out.notes)
    assert out.rc == 3

    # killed mid-line: the last complete record (the snapshot) is the partial result
    lines = few.read_text().splitlines(keepends=True)
    cut = tmp_path / "cut.jsonl"
    cut.write_text("".join(lines[:2]) + lines[2][:40])
    out = run_script("--input", str(cut))
    out.check_format()
    assert out.case("engine-run") == Case("engine-run", "fail", "1.000", "s")
    assert out.case("cpu3-max").measurement == "70.000"
    assert out.rc == 1

    # numbers that contradict each other: no verdict from them
    bad = channel("cpu0", 0, [5_000, 6_000, 7_000])
    bad["samples"] = 4
    wrong = write_jsonl(tmp_path / "wrong.jsonl", [bad])
    out = run_script("--input", str(wrong), "--slo", "max < 1s")
    out.check_format()
    assert [(c.name, c.result) for c in out.cases] == [
        ("engine-run", "fail"), ("rt-valid", "pass"), ("cpu0-max", "fail"),
        ("cpu0-p99.99", "skip"), ("cpu0-missed", "fail"), ("slo-cpu0-max-lt-1s", "fail"),
        ("slo", "fail")]
    assert any("contradict" in n for n in out.notes)
    assert out.rc == 1

    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    out = run_script("--input", str(empty))
    assert out.cases == [Case("engine-run", "fail", None, None)]
    assert out.rc == 1
    out = run_script("--input", str(empty), "--slo", "max < 1s")
    assert out.cases == [Case("engine-run", "fail", None, None), Case("slo", "fail", None, None)]
    assert out.rc == 1


@pytest.mark.parametrize(("args", "message"), [
    (["--slo", "max < 50"], "SLO bound needs a unit"),
    (["--slo", "p99.99 << 5us"], "cannot parse SLO clause"),
    (["--slo", "p100 < 5us"], "unknown SLO metric"),
    (["--slo", "missed < 1.5"], "missed is a count"),
    (["--slo", "max < 5 parsecs"], "unknown unit"),
    (["--slo", "max > 50us and max < 10us"], "can never be met"),  # as rtlab.analysis.slo
    (["--slo", "p99 > 20us and p99.9 < 10us"], "can never be met"),
    (["--slo", "max < 0ns"], "can never be met"),
    (["--cpus"], "--cpus needs a value"),
    (["--bogus"], "unknown option --bogus"),
])
def test_usage_errors_are_one_line_before_anything_runs(args: list[str], message: str,
                                                        tmp_path: Path) -> None:
    out = run_script("--output-dir", str(tmp_path / "out"), "--engine", "/nonexistent", *args)
    assert out.rc == 2
    assert out.stdout == ""
    (line,) = out.stderr.splitlines()
    assert line.startswith("rtlab-lava: error: ") and message in line, line
    assert not (tmp_path / "out").exists()


def test_missing_engine_is_an_error(tmp_path: Path) -> None:
    out = run_script("--engine", str(tmp_path / "nope"), "--output-dir", str(tmp_path))
    assert out.rc == 1
    assert out.stderr.strip() == (f"rtlab-lava: error: engine {tmp_path / 'nope'} not found "
                                  "or not executable")
    out = run_script("--engine", "rtlab-probe-not-installed", "--output-dir", str(tmp_path))
    assert out.rc == 1 and "not on PATH" in out.stderr


def fake_engine(tmp: Path, code: int, records: int | None, source: Path) -> Path:
    """A stand-in rtlab-probe: answers --version, writes the first `records` lines of
    `source` to its --output (all of them: None) and exits with `code`."""
    keep = "cat" if records is None else f"head -n {records}"
    path = tmp / "fake-probe"
    path.write_text(f"""#!/bin/sh
if [ "$1" = --version ]; then echo '{{"type":"version","engine_version":"0.0.0"}}'; exit 0; fi
out=
while [ $# -gt 0 ]; do
    case "$1" in --output) out=$2; shift 2 ;; *) shift ;; esac
done
{keep} "{source}" >"$out"
exit {code}
""")
    path.chmod(0o755)
    return path


@pytest.mark.parametrize(("code", "records", "why", "slo"), [
    # the OOM killer's SIGKILL mid-run: a snapshot is left
    (137, 2, "killed by signal 9", "max < 1s"),
    # a crash after its complete result; an error outranks the SLO not met (as in rtlab)
    (139, None, "killed by signal 11", "max < 1us"),
    (255, 0, None, "max < 1s"),  # exit(-1) before it wrote anything
    (5, None, None, "max < 1s"),
])
def test_undocumented_engine_exit_code_is_an_error(tmp_path: Path, code: int,
                                                   records: int | None, why: str | None,
                                                   slo: str) -> None:
    """An engine exit code outside 0/1/2/3/4/130 (killed by a signal, a crash) is not
    passed through: the script exits 1 (error), with a failed `engine-exit-code` case
    whose measurement is the engine's code and a log line saying what it was."""
    few = write_jsonl(tmp_path / "few.jsonl", [channel("cpu3", 3, [5_000, 6_000, 70_000])])
    engine = fake_engine(tmp_path, code, records, few)
    out = run_script("--engine", str(engine), "--output-dir", str(tmp_path / "out"),
                     "--slo", slo)
    out.check_format()
    assert out.rc == 1, out.stdout + out.stderr
    assert out.case("engine-exit-code") == Case("engine-exit-code", "fail", str(code), "code")
    (note,) = [n for n in out.notes if n.startswith(f"the engine's exit code {code} ")]
    assert "not one of its documented codes" in note and "reported as an error (1)" in note
    assert (why in note) if why else ("killed by" not in note)
    run = out.case("engine-run")
    assert run.result == ("pass" if records is None else "fail")


@pytest.mark.parametrize(("code", "records", "rc"), [
    (0, None, 0), (1, 2, 1), (2, 0, 2), (3, None, 3), (4, 0, 4), (130, 2, 130)])
def test_documented_engine_exit_codes_are_kept(tmp_path: Path, code: int, records: int | None,
                                               rc: int) -> None:
    few = write_jsonl(tmp_path / "few.jsonl", [channel("cpu3", 3, [5_000, 6_000, 70_000])])
    engine = fake_engine(tmp_path, code, records, few)
    out = run_script("--engine", str(engine), "--output-dir", str(tmp_path / "out"))
    out.check_format()
    assert out.rc == rc, out.stdout + out.stderr
    assert not [c for c in out.cases if c.name == "engine-exit-code"]
    assert f"engine exit code {code}" in out.notes


# --- the test definition -----------------------------------------------------------------


def read_definition() -> tuple[dict[str, str], dict[str, str], list[str]]:
    """metadata, params and run steps of docs/lava/rtlab-latency.yaml (the small part of
    YAML it uses: two-space indents, double-quoted or plain scalars, `- ` list items)."""
    metadata: dict[str, str] = {}
    params: dict[str, str] = {}
    steps: list[str] = []
    section = sub = ""
    for raw in DEFINITION.read_text().splitlines():
        line = raw.split(" #")[0].rstrip() if not raw.lstrip().startswith("- ") else raw
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        indent = len(line) - len(line.lstrip())
        text = line.strip()
        if indent == 0:
            section, sub = text.rstrip(":"), ""
            continue
        if text.startswith("- "):
            if section == "run" and sub == "steps":
                steps.append(text[2:])
            continue
        key, _, value = text.partition(":")
        value = value.strip()
        if value.startswith('"') and value.endswith('"'):
            value = value[1:-1]
        if section == "metadata" and indent == 2 and value:
            metadata[key] = value
        elif section == "params":
            params[key] = value
        elif section == "run":
            sub = key
    return metadata, params, steps


def test_definition_format_and_parameters() -> None:
    metadata, params, steps = read_definition()
    assert metadata["format"] == "Lava-Test Test Definition 1.0"
    assert re.fullmatch(r"[A-Za-z0-9._-]+", metadata["name"])  # no space or $&"'`()<>/\|;
    assert metadata["description"]
    assert params == {"ENGINE": "rtlab-probe", "ENGINE_URL": "", "ENGINE_SHA256": "",
                      "CPUS": "all", "INTERVAL": "1ms", "DURATION": "60s", "PRIORITY": "99",
                      "ENGINE_ARGS": "", "SLO": "", "OUTPUT_DIR": "/tmp/rtlab-lava",
                      "UPLOAD_CMD": ""}
    (step,) = steps
    words = shlex.split(step)
    assert words[:2] == ["sh", "./scripts/lava/rtlab-lava.sh"]
    # every parameter reaches the script as its option (params are not exported by LAVA)
    for name in params:
        option = "--" + name.lower().replace("_", "-")
        assert words[words.index(option) + 1] == f"${name}", option
    # under LAVA's `set -e` a failed check must not end the remaining steps
    assert words[-6:-4] == ["||", "echo"]


def test_definition_parses_as_yaml() -> None:
    """The hand reader above and a real YAML parser (PyYAML, a test dependency: rtlab
    itself does not read YAML) see the same document."""
    import yaml

    doc = yaml.safe_load(DEFINITION.read_text())
    metadata, params, steps = read_definition()
    assert {k: doc["metadata"][k] for k in metadata} == metadata
    assert doc["params"] == params
    assert doc["run"]["steps"] == steps


def lava_rendered(tmp: Path, overrides: dict[str, str], after: str = "echo after") -> Path:
    """The shell script LAVA builds from the definition: the default parameters, the job's
    parameters, `set -e`, the steps (run from the repository's checkout)."""
    _, params, steps = read_definition()
    lines = ["###default parameters from test definition###"]
    lines += [f"{k}={shlex.quote(v)}" for k, v in params.items()]
    lines += ["######", "###test parameters from job submission###"]
    lines += [f"{k}={shlex.quote(v)}" for k, v in overrides.items()]
    lines += ["######", "set -e", *steps, after]
    path = tmp / "lava-run.sh"
    path.write_text("\n".join(lines) + "\n")
    return path


# --- with the native engine on this machine (root: SCHED_FIFO) -----------------------------


def test_native_run_as_a_lava_job(require_root: None, probe_bin: str, tmp_path: Path) -> None:
    """The definition's step, rendered as LAVA renders it, with the native engine: a met
    SLO, then a forced failure that must not end the job's later steps; the artifact
    imports with this machine's facts and the printed values are rtlab's."""
    job = {"ENGINE": probe_bin, "CPUS": "0", "INTERVAL": "100us", "DURATION": "1500ms",
           "SLO": "max < 60s and missed >= 0", "OUTPUT_DIR": str(tmp_path / "out")}
    t0 = time.monotonic()
    p = subprocess.run(["sh", str(lava_rendered(tmp_path, job))], capture_output=True,
                       text=True, cwd=REPO, timeout=120, check=False)
    took = time.monotonic() - t0
    out = Out(p.returncode, p.stdout, p.stderr)
    assert p.returncode == 0, p.stdout + p.stderr
    assert out.lines[-1] == "after"  # nothing printed `exited with`: the script exited 0
    assert not [ln for ln in out.lines if "exited with" in ln]
    out = Out(0, "\n".join(out.lines[:-1]), "")
    out.check_format()
    assert took < 30
    imp = rtlab(tmp_path, "results", "import", out.raw)
    assert imp.returncode == 0, imp.stderr
    (result,) = stored_runs(tmp_path / "store.db")
    (ch,) = [c for _, c in result.channels()]
    assert ch.name == "cpu0" and ch.samples + ch.missed == 15_000
    elapsed = result.phases[0].elapsed_ns / 1e9
    assert out.cases == [Case("engine-run", "pass", f"{elapsed:.3f}", "s"),
                         Case("rt-valid", "pass", None, None),
                         *expected_channel_cases(ch),
                         Case("slo-cpu0-max-lt-60s", "pass", us(ch.max_ns), "us"),
                         Case("slo-cpu0-missed-ge-0", "pass", str(ch.missed), "periods"),
                         Case("slo", "pass", "0", "checks")]
    assert result.system["hostname"] == os.uname().nodename
    assert result.system["release"] == os.uname().release

    job |= {"SLO": "max < 1ns", "DURATION": "200ms"}
    p = subprocess.run(["sh", str(lava_rendered(tmp_path, job))], capture_output=True,
                       text=True, cwd=REPO, timeout=120, check=False)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[-2:] == ["rtlab-lava.sh exited with 3", "after"]
    failed = Out(3, "\n".join(lines[:-2]), "")
    assert failed.case("slo-cpu0-max-lt-1ns").result == "fail"
    assert failed.case("slo") == Case("slo", "fail", "1", "checks")


def test_sigterm_keeps_the_partial_run(require_root: None, probe_bin: str,
                                       tmp_path: Path) -> None:
    """LAVA's timeout (or anyone) stops the script with SIGTERM: the engine is stopped,
    what it measured is reported, the raw output is kept, the exit code is 130."""
    proc = subprocess.Popen(["sh", str(SCRIPT), "--engine", probe_bin, "--cpus", "0",
                             "--duration", "60s", "--output-dir", str(tmp_path / "out")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            files = list((tmp_path / "out").glob("*.jsonl"))
            if files and files[0].read_text().count('"type":"snapshot"') >= 1:
                break
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    out = Out(proc.returncode, stdout, stderr)
    out.check_format()
    assert out.rc == 130, stdout + stderr
    assert out.case("engine-run").result == "fail"
    assert out.case("cpu0-max").result == "pass"
    assert any("status interrupted" in n for n in out.notes)
    imp = rtlab(tmp_path, "results", "import", out.raw)
    assert imp.returncode == 0, imp.stderr
    (result,) = stored_runs(tmp_path / "store.db")
    assert result.partial and result.status == "partial"


def test_engine_downloaded_and_checked(require_root: None, probe_bin: str,
                                      tmp_path: Path) -> None:
    """ENGINE_URL: the engine comes from a web server (here one on 127.0.0.1) with wget or
    curl; ENGINE_SHA256 refuses another file before it runs."""
    import hashlib
    import shutil
    import threading
    from functools import partial
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    served = tmp_path / "served"
    served.mkdir()
    shutil.copy(probe_bin, served / "rtlab-probe")
    digest = hashlib.sha256((served / "rtlab-probe").read_bytes()).hexdigest()

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(Quiet, directory=str(served)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/rtlab-probe"
        wrong = run_script("--engine-url", url, "--engine-sha256", "0" * 64, "--cpus", "0",
                           "--duration", "100ms", "--output-dir", str(tmp_path / "wrong"))
        assert wrong.rc == 1
        assert wrong.stderr.strip() == (f"rtlab-lava: error: engine {tmp_path}/wrong/rtlab-probe "
                                        f"has SHA-256 {digest}, expected {'0' * 64}")
        assert not list((tmp_path / "wrong").glob("*.jsonl"))
        right = run_script("--engine-url", url, "--engine-sha256", digest, "--cpus", "0",
                           "--duration", "100ms", "--output-dir", str(tmp_path / "right"))
        right.check_format()
        assert right.rc == 0, right.stdout + right.stderr
        assert right.notes[0] == f"downloading the engine from {url}"
        assert right.notes[2].startswith(f"running: {tmp_path}/right/rtlab-probe timer ")
        assert right.case("engine-run").result == "pass"
        missing = run_script("--engine-url", url + "-gone", "--output-dir", str(tmp_path))
        assert missing.rc == 1
        assert missing.stderr.strip().endswith(f"cannot download {url}-gone")
    finally:
        server.shutdown()
        server.server_close()


# --- on emulated PREEMPT_RT boards (busybox sh and awk, no Python) ------------------------


def test_aarch64_board(fresh_board: Callable[..., Board], tmp_path: Path) -> None:
    """The same job on an emulated Cortex-A53 PREEMPT_RT board: its aarch64 engine and
    busybox; the artifact imports with that board's machine, host name and kernel."""
    from rtlab.analysis.stats import percentile_intervals
    from rtlab.engine.builds import engine_for
    from rtlab.results.summary import percentile

    board = fresh_board("aarch64-rt")
    board.sh("mkdir -p /tmp/bin /tmp/lava/scripts/lava", check=True)
    board.copy_to(engine_for("aarch64"), "/tmp/bin/rtlab-probe")
    board.copy_to(SCRIPT, "/tmp/lava/scripts/lava/rtlab-lava.sh")
    hostname = board.ssh("uname", "-n", check=True).stdout.strip()
    release = board.ssh("uname", "-r", check=True).stdout.strip()
    out = board_run(board, "--cpus", "1", "--duration", "2s", "--slo", "max < 60s and p99 < 60s")
    print("\n".join(out.lines))
    out.check_format()
    assert out.rc == 0, out.stdout + out.stderr
    assert '"arch":"aarch64"' in out.notes[0]
    assert out.notes[3].startswith(f"board {hostname}, kernel {release} (")
    assert [c.name for c in out.cases] == [
        "engine-run", "rt-valid", "cpu1-max", "cpu1-p99.99", "cpu1-missed",
        "slo-cpu1-max-lt-60s", "slo-cpu1-p99-lt-60s", "slo"]
    raw = tmp_path / Path(out.raw).name
    raw.write_text(board.ssh("cat", out.raw, check=True).stdout)
    imp = rtlab(tmp_path, "results", "import", str(raw))
    assert imp.returncode == 0, imp.stderr
    (result,) = stored_runs(tmp_path / "store.db")
    assert (result.system["hostname"], result.system["release"], result.system["machine"],
            result.system["preempt"]) == (hostname, release, "aarch64", "rt")
    (ch,) = [c for _, c in result.channels()]
    assert out.cases[2:5] == expected_channel_cases(ch)
    p99 = percentile(ch.hist, 99.0, ch.min_ns, ch.max_ns)
    assert p99 is not None
    assert out.case("slo-cpu1-p99-lt-60s") == Case("slo-cpu1-p99-lt-60s", "pass", us(p99), "us")
    iv = percentile_intervals(ch.hist, [99.0], min_ns=ch.min_ns, max_ns=ch.max_ns)[99.0]
    assert iv.high_ns is not None
    assert any(f"95 % interval [{us(iv.low_ns or 0)}, {us(iv.high_ns)}] us" in n
               for n in out.notes), out.notes


@pytest.fixture(scope="module")
def lava_board(lab_note: Callable[[str], None]) -> Iterator[Board]:
    """An x86_64-rt board of this module's own (the lab's session boards come in a linked
    pair; this needs one) with the static engine and the script in /tmp."""
    from rtlab.engine.builds import engine_for

    board = Board.boot("lab-lava", "x86_64-rt")
    lab_note(board.describe())
    try:
        board.sh("mkdir -p /tmp/bin /tmp/lava/scripts/lava", check=True)
        board.copy_to(engine_for("x86_64"), "/tmp/bin/rtlab-probe")
        board.copy_to(SCRIPT, "/tmp/lava/scripts/lava/rtlab-lava.sh")
        yield board
    finally:
        board.stop()


def board_run(board: Board, *args: str, env: str = "", timeout: float = 600) -> Out:
    cmd = (f"cd /tmp/lava && PATH=/tmp/bin:$PATH {env} sh ./scripts/lava/rtlab-lava.sh "
           + " ".join(shlex.quote(a) for a in args))
    p = board.sh(cmd, timeout=timeout)
    return Out(p.returncode, p.stdout, p.stderr)


def test_board_lines_slo_and_artifact(lava_board: Board, tmp_path: Path) -> None:
    board = lava_board
    hostname = board.ssh("uname", "-n", check=True).stdout.strip()
    release = board.ssh("uname", "-r", check=True).stdout.strip()
    assert board.sh("command -v python3 python; true").stdout.strip() == ""

    met = board_run(board, "--cpus", "0-1", "--interval", "1ms", "--duration", "4s",
                    "--slo", "max < 60s and missed >= 0 and avg < 60s")
    print("\n".join(met.lines))
    met.check_format()
    assert met.rc == 0, met.stdout + met.stderr
    assert met.notes[0].startswith("engine: {\"type\":\"version\"")
    assert met.notes[1] == ("running: rtlab-probe timer --interval 1ms --duration 4s "
                            f"--output {met.raw} --cpus 0-1 --priority 99")
    assert re.fullmatch(rf"/tmp/rtlab-lava/rtlab-{hostname}-\d{{8}}T\d{{6}}Z\.jsonl", met.raw)
    assert met.notes[3].startswith(f"board {hostname}, kernel {release} (#1 SMP PREEMPT_RT")
    assert ", preemption rt, " in met.notes[3]
    names = [c.name for c in met.cases]
    assert names == ["engine-run", "rt-valid",
                     "cpu0-max", "cpu0-p99.99", "cpu0-missed",
                     "cpu1-max", "cpu1-p99.99", "cpu1-missed",
                     "slo-cpu0-max-lt-60s", "slo-cpu0-missed-ge-0", "slo-cpu0-avg-lt-60s",
                     "slo-cpu1-max-lt-60s", "slo-cpu1-missed-ge-0", "slo-cpu1-avg-lt-60s",
                     "slo"]
    assert all(c.result == "pass" for c in met.cases if c.name != "cpu0-p99.99"
               and c.name != "cpu1-p99.99")
    assert met.case("slo") == Case("slo", "pass", "0", "checks")
    run_s = float(met.case("engine-run").measurement or 0)
    assert 4.0 <= run_s < 64  # the run's own elapsed time: its duration and a late end

    # the artifact, imported: the board's provenance, and the script's numbers are rtlab's
    raw = tmp_path / Path(met.raw).name
    raw.write_text(board.ssh("cat", met.raw, check=True).stdout)
    imp = rtlab(tmp_path, "results", "import", str(raw))
    assert imp.returncode == 0, imp.stderr
    (result,) = stored_runs(tmp_path / "store.db")
    assert result.status == "completed" and result.probe == "timer"
    assert result.system["hostname"] == hostname
    assert result.system["release"] == release
    assert result.system["preempt"] == "rt"
    assert result.provenance["host"]["hostname"] == hostname
    show = rtlab(tmp_path, "results", "show", "last", "--json")
    doc = json.loads(show.stdout)
    assert (doc["host"], doc["kernel"]) == (hostname, release)
    chans = [ch for _, ch in result.channels()]
    assert [ch.name for ch in chans] == ["cpu0", "cpu1"]
    for ch in chans:
        # exactly 4000 periods, also under emulation (regression: reading the system's
        # facts for the header took longer than the 20-ms start lead there, so threads
        # were released after their first deadlines, which were neither measured nor
        # counted: 3,963-3,994; now the facts are read before the start is decided)
        assert ch.samples > 0 and ch.samples + ch.missed == 4000
        assert [c for c in met.cases if c.name.startswith(ch.name + "-")] == \
            expected_channel_cases(ch)
        assert 1 <= ch.min_ns <= ch.max_ns < 60_000_000_000  # plausible, not judged

    # a forced SLO failure: fail lines and exit code 3; the met clause still passes
    failed = board_run(board, "--cpus", "1", "--duration", "1s",
                       "--slo", "max < 1ns and missed >= 0", "--output-dir", "/tmp/forced")
    print("\n".join(failed.lines))
    failed.check_format()
    assert failed.rc == 3, failed.stdout + failed.stderr
    assert [(c.name, c.result) for c in failed.cases] == [
        ("engine-run", "pass"), ("rt-valid", "pass"), ("cpu1-max", "pass"),
        ("cpu1-p99.99", "skip"), ("cpu1-missed", "pass"), ("slo-cpu1-max-lt-1ns", "fail"),
        ("slo-cpu1-missed-ge-0", "pass"), ("slo", "fail")]
    assert failed.case("slo") == Case("slo", "fail", "1", "checks")
    assert failed.case("slo-cpu1-max-lt-1ns").measurement == \
        failed.case("cpu1-max").measurement

    # inside LAVA: the helpers get the very lines printed outside (busybox sh)
    board.sh("mkdir -p /tmp/fake-lava && for h in lava-test-case lava-test-reference; do "
             "printf '#!/bin/sh\\necho \"%s $*\" >>/tmp/fake-lava/calls\\n' $h "
             ">/tmp/fake-lava/$h; chmod 755 /tmp/fake-lava/$h; done", check=True)
    shim = board_run(board, "--input", met.raw, "--slo", "p99 < 1s")
    lava = board_run(board, "--input", met.raw, "--slo", "p99 < 1s",
                     env="PATH=/tmp/fake-lava:/tmp/bin:$PATH")
    calls = board.ssh("cat", "/tmp/fake-lava/calls", check=True).stdout.splitlines()
    assert shim.rc == lava.rc
    assert [ln for ln in shim.lines if ln.startswith("lava-test-")] == calls


def test_board_usage_error_and_non_root(lava_board: Board) -> None:
    """busybox awk without math functions parses the SLO like rtlab; as a user without
    SCHED_FIFO the engine skips (exit 4) and the script says so as a skipped case."""
    bad = board_run(lava_board, "--slo", "p99.99 < 20")
    assert bad.rc == 2 and bad.stdout == ""
    assert bad.stderr.strip() == ("rtlab-lava: error: SLO bound needs a unit (ns, us, ms, "
                                  "s): p99.99 < 20")
    p = lava_board.ssh("sh", "-c", "cd /tmp/lava && PATH=/tmp/bin:$PATH sh "
                       "./scripts/lava/rtlab-lava.sh --cpus 0 --duration 1s --output-dir "
                       "/tmp/lab-user-out", user="lab")
    out = Out(p.returncode, p.stdout, p.stderr)
    assert out.rc == 4, out.stdout + out.stderr
    assert out.cases == [Case("engine-run", "skip", None, None)]
    assert "rtlab-lava: engine exit code 4" in out.lines


def test_board_awk_computes_what_rtlab_computes(lava_board: Board, big_run: Path) -> None:
    """busybox awk (no math functions, the board's) prints the same values and verdicts
    for 10^6-sample channels as this machine's awk, whose output equals rtlab's
    (test_values_and_slo_verdicts_are_rtlabs)."""
    lava_board.copy_to(big_run, "/tmp/big.jsonl", mode=0o644)
    slo = ("max < 1s and p50 > 20us and p99 < 60us and p99.9 < 80us and p99.99 < 100us "
           "and p99.9999 >= 50us and mode < 30us and avg < 40us and missed <= 2")
    here = run_script("--input", str(big_run), "--slo", slo)
    there = board_run(lava_board, "--input", "/tmp/big.jsonl", "--slo", slo)
    there.check_format()
    assert there.rc == here.rc
    assert there.cases == here.cases
    assert [n for n in there.notes if "interval" in n] == \
        [n for n in here.notes if "interval" in n]
    assert {c.result for c in there.cases if c.name.startswith("slo-")} == {"pass", "fail"}

