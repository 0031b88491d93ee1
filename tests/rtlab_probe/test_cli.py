# SPDX-License-Identifier: MIT
"""rtlab-probe command line: version, list, help, usage errors (exit 2). No root needed."""

from __future__ import annotations

import os

import pytest

from .helpers import option_of, probe_list, run_probe


def test_version(probe_bin: str) -> None:
    r = run_probe(probe_bin, "--version")
    assert r.returncode == 0
    assert r.stdout.startswith("rtlab-probe ")
    assert r.stdout.split()[1][0].isdigit()


def test_list(probe_bin: str) -> None:
    r = run_probe(probe_bin, "list")
    assert r.returncode == 0
    names = [line.split()[0] for line in r.stdout.splitlines()]
    assert "timer" in names


def test_timer_help_from_table(probe_bin: str) -> None:
    r = run_probe(probe_bin, "timer", "--help")
    assert r.returncode == 0
    for opt in ("--cpus", "--policy", "--priority", "--interval", "--duration", "--loops",
                "--clock", "--mlock, --no-mlock", "--dma-latency", "--housekeeping",
                "--snapshot-interval", "--window", "--stop-threshold", "also --threshold",
                "--samples", "--output",
                "--allow-non-rt"):
        assert opt in r.stdout, opt
    assert "1us..10s; default 1ms" in r.stdout  # --interval: type, range, default
    assert "fifo|rr|other|deadline; default fifo" in r.stdout


def _last_cpu() -> int:
    return max(os.sched_getaffinity(0))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--interval", "5x"], "--interval: '5x' is not a duration"),
        (["--interval", "100"], "--interval: '100' is not a duration"),
        (["--interval", "20s"], "--interval: 20s is out of range; allowed range 1us..10s"),
        (["--priority", "100"], "--priority: 100 is out of range; allowed range 0..99"),
        (["--policy", "other", "--priority", "5"],
         "--priority: 5 is out of range for --policy other; allowed range 0..0"),
        (["--policy", "fifo", "--priority", "0"],
         "--priority: 0 is out of range for --policy fifo; allowed range 1..99"),
        (["--policy", "batch"], "--policy: 'batch' is not one of fifo|rr|other|deadline"),
        (["--cpus", "4096"], "--cpus: '4096' is not a CPU list"),
        (["--cpus", "999"], "--cpus: CPU 999 is not online"),
        (["--cpus", "1-0"], "--cpus: '1-0' is not a CPU list"),
        (["--housekeeping", "999"], "--housekeeping: CPU 999 is not online"),
        (["--duration", "1s", "--loops", "5"], "--duration and --loops cannot be combined"),
        (["--loops", "0"], "--loops: 0 is out of range"),
        (["--clock", "boottime"], "--clock: 'boottime' is not one of monotonic|realtime"),
        (["--mlock=yes"], "--mlock takes no value"),
        (["--bogus"], "unknown option '--bogus'"),
        (["--window"], "--window: missing value DUR"),
        (["--duration", "1s", "--duration", "2s"], "--duration: given more than once"),
    ],
)
def test_usage_errors(probe_bin: str, args: list[str], message: str) -> None:
    r = run_probe(probe_bin, "timer", *args)
    assert r.returncode == 2, r.stderr
    assert r.stdout == ""
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr
    assert message in lines[0], lines[0]


def test_unknown_probe(probe_bin: str) -> None:
    r = run_probe(probe_bin, "nope")
    assert r.returncode == 2
    assert "unknown probe or command 'nope'" in r.stderr


def test_no_arguments(probe_bin: str) -> None:
    assert run_probe(probe_bin).returncode == 2


def test_output_unwritable(probe_bin: str) -> None:
    # checked before anything is done: bad input (exit 2), not a failure
    r = run_probe(probe_bin, "timer", "--loops", "1", "--output", "/nonexistent-dir/x.jsonl")
    assert r.returncode == 2
    assert "--output '/nonexistent-dir/x.jsonl': its directory does not exist" in r.stderr


# what a probe needs besides the option under test to get past its own checks
NEEDS = {"event": ["--source", "soft"],
         "udp": ["ping", "--peer", "127.0.0.1:7000", "--session", "x"]}


def test_housekeeping_must_be_online(probe_bin: str) -> None:
    """Every probe with --housekeeping (from `list --json`) refuses an offline CPU."""
    probes = [p["name"] for p in probe_list(probe_bin) if option_of(p, "housekeeping")]
    assert len(probes) >= 5, probes  # regression: event accepted an offline CPU silently
    for probe in probes:
        r = run_probe(probe_bin, probe, *NEEDS.get(probe, []), "--housekeeping", "999")
        assert r.returncode == 2, (probe, r.stderr)
        assert "--housekeeping: CPU 999 is not online" in r.stderr, probe
        assert len(r.stderr.strip().splitlines()) == 1, probe


def test_list_json_matches_the_option_tables(probe_bin: str) -> None:
    """`list --json` is what the host reads (never --help); both come from the same tables."""
    import json
    import re

    r = run_probe(probe_bin, "list", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["type"] == "probes" and doc["schema"] == 1
    text_names = [ln.split()[0] for ln in run_probe(probe_bin, "list").stdout.splitlines()
                  if ln.strip() and not ln.startswith(" ")]
    assert [p["name"] for p in doc["probes"]] == text_names
    for p in doc["probes"]:
        help_text = run_probe(probe_bin, p["name"], "--help").stdout
        in_help = {m.group(1): m.group(2) is not None for m in re.finditer(
            r"^  --([a-z][a-z0-9-]*)(, --no-[a-z0-9-]+)?", help_text, re.M)}
        in_help.pop("help")
        current = [o for o in p["options"] if "alias_of" not in o]
        assert {o["name"]: o["type"] == "bool" for o in current} == in_help, p["name"]
        for o in p["options"]:
            if "alias_of" in o:  # an old spelling: listed like its option, named in its help
                target = next(t for t in current if t["name"] == o["alias_of"])
                assert o["type"] == target["type"] and o["name"] in target["aliases"]
                assert f"also --{o['name']}" in help_text
            else:
                assert all(any(a["name"] == x for a in p["options"]) for x in o["aliases"])
            if o["type"] in ("int", "duration"):
                assert o["min"] <= o["max"]
            if o["type"] == "enum":
                assert o["choices"]


def test_list_rejects_unknown_arguments(probe_bin: str) -> None:
    r = run_probe(probe_bin, "list", "--yaml")
    assert r.returncode == 2
    assert r.stderr.strip() == "rtlab-probe list: unknown argument '--yaml' (only --json)"


# --- one vocabulary (docs/vocabulary.md): every old spelling means what the new one does ---

def _config(probe_bin: str, probe: str, *args: str) -> dict[str, object]:
    """The header `config` of a short run (measured without RT rights if need be)."""
    import json

    r = run_probe(probe_bin, probe, *args, "--allow-non-rt", "--snapshot-interval", "50ms")
    assert r.returncode in (0, 3), r.stderr
    return dict(json.loads(r.stdout.splitlines()[0])["config"])


def _two_cpus() -> tuple[int, int]:
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("needs two CPUs")
    return cpus[-1], cpus[0]


SPELLINGS = [  # (probe, common args, old spelling, new spelling, value, config key)
    ("timer", ["--duration", "20ms"], "--threshold", "--stop-threshold", "1h", "threshold_ns"),
    ("noise", ["--duration", "20ms"], "--threshold", "--stop-threshold", "1h", "threshold_ns"),
    ("switch", ["--loops", "3", "--no-order-check", "--no-pi-check"], "--cpu", "--cpus",
     "LAST", "cpu"),
    ("event", ["--source", "soft", "--count", "3"], "--cpu", "--cpus", "LAST", "cpu"),
    ("overhead", ["--loops", "3"], "--cpu", "--cpus", "LAST", "cpu"),
    ("overhead", ["--loops", "3", "--cpus", "LAST"], "--other-cpu", "--waker-cpu", "FIRST",
     "other_cpu"),
]


@pytest.mark.parametrize(("probe", "common", "old", "new", "value", "key"), SPELLINGS)
def test_old_and_new_spelling_mean_the_same(probe_bin: str, probe: str, common: list[str],
                                            old: str, new: str, value: str, key: str) -> None:
    last, first = _two_cpus()

    def sub(a: str) -> str:
        return {"LAST": str(last), "FIRST": str(first)}.get(a, a)

    common = [sub(a) for a in common]
    a = _config(probe_bin, probe, *common, old, sub(value))
    b = _config(probe_bin, probe, *common, new, sub(value))
    assert a[key] == b[key] and a[key] is not None
    assert {k: v for k, v in a.items() if k != "output"} == \
        {k: v for k, v in b.items() if k != "output"}


@pytest.mark.parametrize(("probe", "old", "new"), [
    ("timer", "--threshold", "--stop-threshold"), ("switch", "--cpu", "--cpus"),
    ("overhead", "--other-cpu", "--waker-cpu"),
])
def test_old_and_new_spelling_together_is_given_twice(probe_bin: str, probe: str, old: str,
                                                      new: str) -> None:
    value = "1ms" if "threshold" in old else "0"
    r = run_probe(probe_bin, probe, new, value, old, value)
    assert r.returncode == 2
    assert r.stderr.strip().endswith(f"{old}: given more than once (it is {new})"), r.stderr


def test_single_cpu_probes_take_one_cpu(probe_bin: str) -> None:
    """Every probe whose --cpus takes one CPU (max 1 in `list --json`) says so."""
    last, first = _two_cpus()
    probes = [p["name"] for p in probe_list(probe_bin)
              if (o := option_of(p, "cpus")) and o.get("max") == 1]
    assert len(probes) >= 3, probes
    for probe in probes:
        r = run_probe(probe_bin, probe, "--cpus", f"{first},{last}")
        assert r.returncode == 2 and r.stdout == "", probe
        assert f"--cpus: '{first},{last}' names 2 CPUs; this probe runs on one CPU" in r.stderr
        assert len(r.stderr.strip().splitlines()) == 1, probe


def test_overhead_duration_is_the_whole_run(probe_bin: str) -> None:
    """--duration is the total in every probe; overhead's tests share it (--test-duration:
    each test)."""
    whole = _config(probe_bin, "overhead", "--duration", "400ms")
    tests = len(whole["tests"])  # type: ignore[arg-type]
    assert whole["duration_ns"] == 400_000_000
    assert whole["test_duration_ns"] == 400_000_000 // tests
    each = _config(probe_bin, "overhead", "--test-duration", f"{400 // tests}ms")
    assert each["duration_ns"] == (400 // tests) * tests * 1_000_000
    r = run_probe(probe_bin, "overhead", "--duration", "1s", "--test-duration", "100ms")
    assert r.returncode == 2 and "cannot be combined" in r.stderr
