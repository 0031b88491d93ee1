# SPDX-License-Identifier: MIT
"""What does `rtlab tune` cost on this machine, against measuring one knob at a time with
the same statistical confidence, on causes whose answer is known by construction?

The injected cause is the one of tests/tune/test_tune_local.py: a SCHED_FIFO 99 thread
busy 2 ms every 20 ms (tests/tune/spinner.py).

* **helps**: the cause on the measured (last) CPU, the built-in scenario `tune`, knobs
  `cpuset-shield` (moves the cause off: helps) and `stat-interval` (inert);
* **hurts**: the cause on the first CPU and a scenario whose shield puts the measured
  thread on the housekeeping side (last CPU): `cpuset-shield` moves the cause ONTO the
  measured CPU (hurts); `timer-migration-off` (inert).

For each case, with the cause running:

A. `rtlab tune --knobs K1,K2 --stats max --block B --pairs P --json` as one process:
   its wall time to the screening verdicts (up to its first `[combine]` or `[confirm]`
   progress line) and to the end (combination and confirmation included), the blocks it
   measured, its verdicts;
B. one knob at a time: for each knob, `rtlab run` of the scenario as baseline, then of
   the scenario with that knob's [shield] fields (rtlab.tune.knobs.runtime_shield,
   written with rtlab.scenario.shield_toml), back to back (not interleaved), each run as
   long as the tune's first look per side (P x B), judged with the comparison behind
   `rtlab compare` at the tune's screening alpha for that family
   (rtlab.tune.design.screening_alpha(k, statistics); `rtlab compare` itself tests at
   1 %), doubling both runs' length while a statistic is inconclusive, at most as many
   looks as the tune (rtlab.tune.design.MAX_LOOKS): its total wall time, runs and
   verdicts.

Each verdict is graded against the truth: right, undecided ("inconclusive"; for an inert
knob an allowed answer) or wrong. After each case the cause is stopped and no rtlab
cpuset may be left. Needs root and two CPUs (exit 4 otherwise). It changes the system
(journaled and restored by every run): run it under the test machine's lock, not nice'd
(the measurement is real-time):

    flock /run/rtlab-test-machine.lock .venv/bin/python bench/tune_cost.py \\
        --out /tmp/tune_cost.md
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchlib import lacks, write_report

from rtlab.probes.registry import shape as probe_shape
from rtlab.results.model import RunResult
from rtlab.results.store import Store
from rtlab.runner.prepare import RunRequest, prepare
from rtlab.scenario.builtin import find
from rtlab.scenario.loader import read_scenario_text
from rtlab.scenario.shield_toml import shield_toml
from rtlab.tune.design import MAX_LOOKS, judge, knob_verdict, parse_stats, screening_alpha
from rtlab.tune.export import replace_shield
from rtlab.tune.knobs import runtime_shield

REPO = Path(__file__).resolve().parent.parent
SPINNER = REPO / "tests" / "tune" / "spinner.py"
CPUSET_ROOT = Path("/sys/fs/cgroup/cpuset")
ATTEMPTS = 3  # a run of the one-at-a-time procedure that fails is measured again


class Failed(Exception):
    """A procedure could not finish (its reason)."""

# The measured thread on the housekeeping side of a shield (the "hurts" construction),
# shared with tests/tune/test_tune_local.py.
SWAPPED = (Path(__file__).resolve().parent.parent / "tests" / "tune" / "swapped.toml").read_text()


@dataclass(frozen=True)
class Case:
    name: str
    cause_cpu: str  # "first" or "last"
    scenario: str | None  # TOML text; None: the built-in scenario `tune`
    knobs: tuple[str, ...]
    truth: dict[str, str]  # knob -> helps | hurts | no effect
    what: str


CASES = {
    "helps": Case("helps", "last", None, ("cpuset-shield", "stat-interval"),
                  {"cpuset-shield": "helps", "stat-interval": "no effect"},
                  "FIFO 99 burst on the measured CPU, built-in scenario `tune`"),
    "hurts": Case("hurts", "first", SWAPPED, ("cpuset-shield", "timer-migration-off"),
                  {"cpuset-shield": "hurts", "timer-migration-off": "no effect"},
                  "FIFO 99 burst on the first CPU, measured thread on the shield's "
                  "housekeeping (last) CPU"),
}


def grade(verdict: str, truth: str) -> str:
    """right, undecided or wrong (an inert knob: "no effect" is right, "inconclusive"
    undecided and allowed, any effect wrong)."""
    if verdict == truth:
        return "right"
    if verdict == "failed":
        return "not measured"
    if verdict == "inconclusive":
        return "undecided"
    return "wrong"


def _env(work: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "200",
            "XDG_DATA_HOME": str(work / "xdg"), "XDG_STATE_HOME": str(work / "state")}


def _rtlab_cpusets() -> list[str]:
    return sorted(p.name for p in CPUSET_ROOT.glob("rtlab*")) if CPUSET_ROOT.is_dir() else []


@contextmanager
def cause(cpu: int, life_s: int) -> Iterator[None]:
    """The injected burst task on `cpu`, stopped (its stdin closed) at the end."""
    proc = subprocess.Popen([sys.executable, str(SPINNER), "rtlab-burst", str(cpu), "fifo",
                             "99", "2", "20", str(life_s)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    if proc.stdout.readline().strip() != "ready":
        proc.kill()
        raise SystemExit("the injected burst task did not start (root and SCHED_FIFO needed)")
    try:
        yield
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=30)


# ---- A: the tune -----------------------------------------------------------------------------
def run_tune(case: Case, work: Path, args: argparse.Namespace) -> dict[str, Any]:
    scen: list[str] = []
    if case.scenario is not None:
        path = work / "scenario.toml"
        path.write_text(case.scenario)
        scen = [str(path)]
    cmd = [sys.executable, "-m", "rtlab", "tune", *scen, "--knobs", ",".join(case.knobs),
           "--stats", args.stats, "--block", f"{args.block:g}s", "--pairs", str(args.pairs),
           "--budget", args.budget, "--store", str(work / "tune.db"),
           "--dir", str(work / "tunes"), "--json"]
    errf = (work / "tune.stderr").open("w")
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=errf, text=True,
                            env=_env(work))
    assert proc.stdout is not None
    lines: list[str] = []
    screened: float | None = None
    for line in proc.stdout:
        if screened is None and line.startswith(("[combine]", "[confirm]")):
            screened = time.monotonic() - t0
        lines.append(line)
    rc = proc.wait()
    wall = time.monotonic() - t0
    errf.close()
    if rc != 0:
        err = (work / "tune.stderr").read_text().strip().splitlines() or ["(nothing)"]
        raise Failed(f"rtlab tune exited {rc} after {wall:.0f} s: {err[-1]}")
    start = next(i for i, line in enumerate(lines) if line.startswith("{"))
    ledger = json.loads("".join(lines[start:]))
    (tdir,) = list((work / "tunes").iterdir())
    state = json.loads((tdir / "state.json").read_text())
    blocks: dict[str, int] = {}
    for e in state["experiments"]:
        blocks[e["purpose"]] = blocks.get(e["purpose"], 0) + len(e["blocks"])
    rows = {r["knob"]: r for r in ledger["knobs"]}
    return {"wall_s": wall, "screen_s": screened if screened is not None else wall,
            "blocks": blocks, "verdicts": {k: rows[k]["verdict"] for k in case.knobs},
            "ratios": {k: _ratio(rows[k].get("stats"), args) for k in case.knobs},
            "looks": {k: len(next(e["looks"] for e in state["experiments"]
                                  if e["name"] == f"screen:{k}")) for k in case.knobs},
            "recommended": (ledger.get("recommended") or {}).get("knobs", []),
            "confirmation": (ledger.get("confirmation") or {}).get("verdict"),
            "tune_id": state["id"],
            "failed": {e["name"]: e.get("error") for e in state["experiments"]
                       if e.get("stopped") == "error"}}


def _ratio(stats: dict[str, Any] | None, args: argparse.Namespace) -> float | None:
    first = parse_stats(args.stats)[0]
    st = (stats or {}).get(first) or {}
    r = st.get("ratio")
    return float(r) if r is not None else None


def _tune_or_failure(case: Case, work: Path, args: argparse.Namespace) -> dict[str, Any]:
    try:
        return run_tune(case, work, args)
    except Failed as exc:
        return {"error": str(exc)}


# ---- B: one knob at a time -------------------------------------------------------------------
class Runner:
    """`rtlab run FILE --duration D` as a process; the run it stored."""

    def __init__(self, work: Path) -> None:
        self.work = work
        self.store = work / "oat.db"
        self.runs = 0
        self.run_s = 0.0
        self.failures: list[str] = []

    def _ids(self) -> set[str]:
        if not self.store.exists():
            return set()
        st = Store.open(str(self.store), create=False)
        try:
            return {r.id for r in st.list(limit=None)}
        finally:
            st.close()

    def run(self, scenario: Path, seconds: float) -> RunResult:
        """One run; one that fails is measured again, up to ATTEMPTS times in all (as the
        tune's blocks are), its time counted and its failure kept in `failures`."""
        for _attempt in range(ATTEMPTS):
            before = self._ids()
            cmd = [sys.executable, "-m", "rtlab", "run", str(scenario), "--duration",
                   f"{seconds:g}s", "--store", str(self.store), "--no-progress",
                   "--no-report"]
            t0 = time.monotonic()
            p = subprocess.run(cmd, capture_output=True, text=True, env=_env(self.work))
            self.run_s += time.monotonic() - t0
            self.runs += 1
            new = self._ids() - before
            if p.returncode in (0, 3) and len(new) == 1:
                st = Store.open(str(self.store), create=False)
                try:
                    return st.get(new.pop())
                finally:
                    st.close()
            last = (p.stderr.strip().splitlines() or ["(nothing on stderr)"])[-1]
            self.failures.append(f"rtlab run {scenario.name} exited {p.returncode}: {last}")
        raise Failed(f"rtlab run {scenario.name} failed {ATTEMPTS} times: "
                     f"{self.failures[-1]}")


def scenario_files(case: Case, work: Path) -> tuple[Path, dict[str, Path]]:
    """The baseline scenario file and one per knob (the knob's [shield] fields set on the
    scenario's shield, as the tune's blocks set them)."""
    text = case.scenario if case.scenario is not None else read_scenario_text(find("tune"))
    base = work / "baseline.toml"
    base.write_text(text)
    _, variants = prepare(RunRequest(scenario=str(base)))
    sc = variants[0]
    online = sorted(os.sched_getaffinity(0))
    if sc.shield is not None:
        user, system = list(sc.shield.user), list(sc.shield.system)
    else:
        user = sorted(sc.measured_cpus)
        system = [c for c in online if c not in user]
    files: dict[str, Path] = {}
    for knob in case.knobs:
        spec = runtime_shield(sc.shield, [knob], user, system)
        assert spec is not None
        path = work / f"{knob}.toml"
        path.write_text(replace_shield(text, shield_toml(spec), str(base)))
        files[knob] = path
    return base, files


def one_at_a_time(case: Case, work: Path, args: argparse.Namespace) -> dict[str, Any]:
    stats = parse_stats(args.stats)
    alpha = screening_alpha(len(case.knobs), len(stats))
    t0 = time.monotonic()
    base, files = scenario_files(case, work)
    runner = Runner(work)
    verdicts: dict[str, str] = {}
    ratios: dict[str, float | None] = {}
    looks: dict[str, int] = {}
    measured = 0.0
    for knob in case.knobs:
        length = args.pairs * args.block  # the tune's first look per side
        looks[knob] = 0
        for look in range(MAX_LOOKS):
            try:
                ra = runner.run(base, length)
                rb = runner.run(files[knob], length)
            except Failed:  # the knob failed, with why (as the tune's _fail): the next
                verdicts[knob] = "failed"
                ratios[knob] = None
                break
            measured += 2 * length
            res = judge([ra], [rb], stats, alpha, probe_shape)
            verdicts[knob] = knob_verdict([r.verdict for r in res.values()])
            ratios[knob] = res[stats[0]].ratio
            looks[knob] = look + 1
            if all(r.verdict != "inconclusive" for r in res.values()):
                break
            length *= 2
    return {"wall_s": time.monotonic() - t0, "runs": runner.runs, "measured_s": measured,
            "verdicts": verdicts, "ratios": ratios, "looks": looks, "alpha": alpha,
            "failures": runner.failures}


# ---- the report ------------------------------------------------------------------------------
def _verdicts(case: Case, verdicts: dict[str, str], ratios: dict[str, float | None],
              looks: dict[str, int]) -> str:
    out = []
    for k in case.knobs:
        r = ratios.get(k)
        rr = f" ×{r:.2f}" if r is not None else ""
        out.append(f"{k}: {verdicts[k]}{rr}, {looks.get(k, 0)} look(s) "
                   f"({grade(verdicts[k], case.truth[k])})")
    return "; ".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", default="helps,hurts", help=f"of {', '.join(CASES)}")
    ap.add_argument("--repeat", type=int, default=1, help="rounds of every case")
    ap.add_argument("--block", type=float, default=4.0, help="the tune's block, seconds")
    ap.add_argument("--pairs", type=int, default=2, help="the tune's --pairs")
    ap.add_argument("--stats", default="max", help="the tune's --stats")
    ap.add_argument("--budget", default="30m", help="the tune's --budget")
    ap.add_argument("--order", choices=("alternate", "tune-first", "oat-first"),
                    default="alternate", help="which procedure runs first in a case "
                    "(alternate: the tune first in odd rounds, the one-at-a-time procedure "
                    "first in even ones)")
    ap.add_argument("--out", help="also write the Markdown report here")
    args = ap.parse_args(argv)
    names = [n.strip() for n in args.cases.split(",") if n.strip()]
    for n in names:
        if n not in CASES:
            ap.error(f"--cases: unknown case {n!r} (allowed: {', '.join(CASES)})")
    if lacks(root="tune_cost.py changes the system and runs SCHED_FIFO: run it as root"):
        return 4
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        print("tune_cost.py needs two CPUs (a measured one and another)", file=sys.stderr)
        return 4
    if _rtlab_cpusets():
        print(f"an rtlab cpuset is in place already ({', '.join(_rtlab_cpusets())}): "
              "run `rtlab restore` first", file=sys.stderr)
        return 1
    t_all = time.monotonic()
    head = [f"# rtlab tune: time to its verdicts against one knob at a time "
            f"(--stats {args.stats} --block {args.block:g}s --pairs {args.pairs})", "",
            "| case | round | procedure | wall time | screening only | blocks / runs | "
            "measured | verdicts (first statistic's ratio; graded) | tune / one-at-a-time |",
            "|---|---|---|---|---|---|---|---|---|"]
    rows: list[str] = []
    notes: list[str] = []
    for rnd in range(1, args.repeat + 1):
        for n in names:
            case = CASES[n]
            cpu = cpus[-1] if case.cause_cpu == "last" else cpus[0]
            with tempfile.TemporaryDirectory(prefix=f"rtlab-tune-cost-{n}-") as tmp:
                work = Path(tmp)
                (work / "tune").mkdir()
                (work / "oat").mkdir()
                tune_first = args.order == "tune-first" or (
                    args.order == "alternate" and rnd % 2 == 1)
                with cause(cpu, 3600):
                    if tune_first:
                        a = _tune_or_failure(case, work / "tune", args)
                        b = one_at_a_time(case, work / "oat", args)
                    else:
                        b = one_at_a_time(case, work / "oat", args)
                        a = _tune_or_failure(case, work / "tune", args)
                left = _rtlab_cpusets()
            first = "tune first" if tune_first else "one-at-a-time first"
            oat = (f"| {n} | {rnd} | one at a time (alpha {b['alpha']:.2g}) | "
                   f"{b['wall_s']:.0f} s | {b['wall_s']:.0f} s | {b['runs']} runs | "
                   f"{b['measured_s']:g} s | "
                   f"{_verdicts(case, b['verdicts'], b['ratios'], b['looks'])} | |")
            failed = "".join(f"; one at a time: {why}" for why in b["failures"])
            if "error" in a:
                rows += [f"| {n} | {rnd} ({first}) | tune | - | - | - | - | failed: "
                         f"{a['error']} | |", oat]
                notes.append(f"- {n}, round {rnd}: {case.what}; rtlab cpusets left after "
                             f"the case: {', '.join(left) if left else 'none'}{failed}")
                print(*rows[-2:], sep="\n", flush=True)
                continue
            blocks = a["blocks"]
            bl = ", ".join(f"{v} {k}" for k, v in blocks.items())
            tv = _verdicts(case, a["verdicts"], a["ratios"], a["looks"])
            if a["recommended"]:
                tv += (f"; recommended {'+'.join(a['recommended'])}, confirmation "
                       f"{a['confirmation']}")
            else:
                tv += "; recommended: nothing"
            rows.append(f"| {n} | {rnd} ({first}) | tune | {a['wall_s']:.0f} s | "
                        f"{a['screen_s']:.0f} s | {sum(blocks.values())} blocks ({bl}) | "
                        f"{sum(blocks.values()) * args.block:g} s | {tv} | "
                        f"{a['wall_s'] / b['wall_s']:.2f} (screening "
                        f"{a['screen_s'] / b['wall_s']:.2f}) |")
            rows.append(oat)
            failed = "".join(f"; the tune's {name} failed: {why}"
                             for name, why in a["failed"].items()) + failed
            notes.append(f"- {n}, round {rnd}: {case.what}; rtlab cpusets left after the "
                         f"case: {', '.join(left) if left else 'none'}{failed}")
            print(rows[-2], rows[-1], sep="\n", flush=True)
    text = "\n".join([*head, *rows, "", *notes, "",
                      f"({time.monotonic() - t_all:.0f} s in all)"])
    if args.out:
        return write_report(text, args.out)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
