# SPDX-License-Identifier: MIT
"""`rtlab scenarios list --json` and `scenarios check --json` (docs/vocabulary.md: every
listing has a --json); the stop threshold's range error names `--stop-threshold`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rtlab.cli import main
from rtlab.errors import UsageError
from rtlab.scenario import builtins, load_file
from rtlab.scenario.builtin import describe

MATRIX = """\
[scenario]
name = "m"
description = "two variants"

[[load]]
name = "hog"
kind = "stress"
cpu = 1
cpus = "0"

[[probe]]
cpus = "0"

[[phase]]
name = "idle"
duration = "1s"
loads = ["hog"]

[[matrix.variant]]
name = "plain"
loads = []

[[matrix.variant]]
name = "loaded"
"""

PLAIN = """\
[scenario]
name = "p"

[[probe]]
cpus = "0"
"""

BAD = """\
[scenario]
name = "b"

[[probe]]
cpus = "0"
priority = 150
"""


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_list_json_lists_every_builtin_as_its_file_writes_it(
        capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(capsys, "scenarios", "list", "--json")
    doc = json.loads(out)
    assert code == 0 and doc["schema"] == 1 and doc["dirs"]
    items = builtins()
    assert [s["name"] for s in doc["scenarios"]] == list(items)
    for s in doc["scenarios"]:
        assert s["source"] == str(items[s["name"]]) and Path(s["source"]).is_file()
        assert s["description"] == describe(items[s["name"]])
        assert s["probes"] and s["phases"] and "error" not in s
        assert all(p["probe"] and p["name"] for p in s["probes"])
    quick = next(s for s in doc["scenarios"] if s["name"] == "quick")
    assert [p["name"] for p in quick["phases"]] == ["idle", "load"]
    assert quick["phases"][1] == {"name": "load", "duration": "25s", "loads": ["stress"]}
    assert quick["probes"] == [{"name": "timer", "probe": "timer", "cpus": "all"}]
    assert quick["variants"] is None and quick["shield"] is False
    mbda = next(s for s in doc["scenarios"] if s["name"] == "multicore-migration")
    assert mbda["variants"] == ["smp", "tasks-cpu0", "irqs-cpu0", "shielded"]
    # the text is unchanged: one line per scenario, its name first
    code, out, _ = run_cli(capsys, "scenarios", "list")
    assert code == 0 and [ln.split()[0] for ln in out.splitlines()] == list(items)


def test_check_json_valid_files_and_matrices(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    m, p = tmp_path / "m.toml", tmp_path / "p.toml"
    m.write_text(MATRIX)
    p.write_text(PLAIN)
    code, out, err = run_cli(capsys, "scenarios", "check", "--json", str(m), str(p))
    doc = json.loads(out)
    assert code == 0 and err == "" and doc["ok"] is True
    fm, fp = doc["files"]
    assert fm["ok"] and fm["file"] == str(m) and fm["scenario"] == "m" and fm["matrix"]
    assert fm["variants"] == 2 and [v["variant"] for v in fm["resolved"]] == ["plain", "loaded"]
    sf = load_file(m)
    assert [v["hash"] for v in fm["resolved"]] == [sc.hash for sc in sf.variants]
    assert "loads" not in fm["resolved"][0] and fm["resolved"][0]["phases"][0]["load"] == "idle"
    assert fm["resolved"][1]["loads"][0]["name"] == "hog"
    ph = fm["resolved"][0]["phases"][0]
    assert ph["name"] == "idle" and ph["duration_ns"] == 1_000_000_000
    assert ph["probe"]["name"] == "timer" and ph["probe"]["options"]["cpus"] == [0]
    assert fp["ok"] and not fp["matrix"] and fp["variants"] == 1
    assert fp["resolved"][0]["phases"][0]["name"] == "main"
    # a built-in by name
    code, out, _ = run_cli(capsys, "scenarios", "check", "--json", "quick")
    doc = json.loads(out)
    assert code == 0 and doc["files"][0]["name"] == "quick"
    assert doc["files"][0]["file"] == str(builtins()["quick"])


def test_check_json_invalid_file_exit_2_with_file_line_message(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good, bad = tmp_path / "good.toml", tmp_path / "bad.toml"
    good.write_text(PLAIN)
    bad.write_text(BAD)
    code, out, err = run_cli(capsys, "scenarios", "check", "--json", str(bad))
    assert code == 2
    line = f"{bad}:6: probe[0].priority: 150 is out of range; allowed: an integer 1..99"
    assert err == f"rtlab: error: {line}\n"  # the one line, as without --json
    doc = json.loads(out)
    assert doc["ok"] is False
    assert doc["files"] == [{"name": str(bad), "file": str(bad), "ok": False, "error": {
        "file": str(bad), "line": 6,
        "message": "probe[0].priority: 150 is out of range; allowed: an integer 1..99"}}]
    # several: each checked, the valid one still resolved, exit 2
    missing = tmp_path / "missing.toml"
    code, out, err = run_cli(capsys, "scenarios", "check", "--json", str(good), str(bad),
                             "nosuch", str(missing))
    doc = json.loads(out)
    assert code == 2 and [f["ok"] for f in doc["files"]] == [True, False, False, False]
    assert len(err.splitlines()) == 3 and all(ln.startswith("rtlab: error: ")
                                             for ln in err.splitlines())
    unknown, gone = doc["files"][2], doc["files"][3]
    assert unknown["file"] is None and unknown["error"]["line"] is None
    assert "unknown scenario 'nosuch'" in unknown["error"]["message"]
    assert "built-in scenarios: " in unknown["error"]["message"]  # the hint too
    assert gone["file"] == str(missing) and "does not exist" in gone["error"]["message"]
    # TOML syntax errors carry their line
    broken = tmp_path / "broken.toml"
    broken.write_text('[scenario]\nname = "x"\nname2 = \n')
    code, out, _ = run_cli(capsys, "scenarios", "check", "--json", str(broken))
    err_doc = json.loads(out)["files"][0]["error"]
    assert code == 2 and err_doc["line"] == 3
    assert err_doc["message"].startswith("not valid TOML: ")
    # text mode: unchanged exit code and line; the valid one still printed
    code, out, err = run_cli(capsys, "scenarios", "check", str(bad))
    assert code == 2 and out == "" and err == f"rtlab: error: {line}\n"
    code, out, err = run_cli(capsys, "scenarios", "check", str(good), str(bad))
    assert code == 2 and "p: valid on this machine" in out and line in err


def test_scenarios_help_names_json(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["scenarios", "list", "--help"], ["scenarios", "check", "--help"]):
        code, out, _ = run_cli(capsys, *argv)
        assert code == 0 and "--json" in out, argv


def test_stop_threshold_range_error_names_the_current_option(
        store_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from dataclasses import replace

    from rtlab.scenario import quick
    from rtlab.scenario.overrides import validate_probes, with_options

    sc = quick(cpus=[0], duration_ns=1_000_000_000)
    big = replace(sc, phases=tuple(replace(p, probe=with_options(p.probe,
                                                                 threshold_ns=7200 * 10**9))
                                   for p in sc.phases))
    with pytest.raises(UsageError, match=r"^--stop-threshold 2h is out of range"):
        validate_probes(big)
    with pytest.raises(UsageError, match=r"^--stop-threshold 2h is out of range"):
        quick(cpus=[0], threshold_ns=7200 * 10**9)
    for flag in ("--stop-threshold", "--threshold"):  # the old spelling: the same message
        code, _, err = run_cli(capsys, "run", "--cpus", "0", "--duration", "1s", flag, "2h",
                               "--no-progress", "--no-report")
        assert code == 2 and "--stop-threshold 2h is out of range" in err, err
