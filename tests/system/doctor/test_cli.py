# SPDX-License-Identifier: MIT
"""`rtlab doctor` on the command line: table, JSON, --strict, bad input."""

from __future__ import annotations

import json

from .conftest import FIXTURES

RT = str(FIXTURES / "rt-isolated")
BAD = str(FIXTURES / "untuned-desktop")


def test_table(doctor_main, capsys) -> None:
    assert doctor_main(["doctor", "--root", BAD]) == 0
    out = capsys.readouterr().out
    assert "rtlab doctor" in out and "critical" in out and "rt-group" in out


def test_json(doctor_main, capsys) -> None:
    assert doctor_main(["doctor", "--json", "--root", RT, "--cpus", "2-3"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == 1 and doc["cpus"] == [2, 3]
    assert doc["summary"]["worst"] == "warning"
    checks = {f["check"]: f for f in doc["findings"]}
    assert checks["preempt"]["severity"] == "ok"


def test_strict(doctor_main, capsys) -> None:
    assert doctor_main(["doctor", "--strict", "--json", "--root", BAD]) == 3
    tree = str(FIXTURES / "rt-isolated")
    # only warnings there come from IRQ 11 and the workqueue mask: still 3
    assert doctor_main(["doctor", "--strict", "--json", "--root", tree]) == 3
    capsys.readouterr()


def test_strict_clean(doctor_main, capsys, tmp_path) -> None:
    (tmp_path / "proc").mkdir()  # nothing readable: all unknown -> 0 even with --strict
    assert doctor_main(["doctor", "--strict", "--root", str(tmp_path)]) == 0
    capsys.readouterr()


def test_bad_cpus(doctor_main, capsys) -> None:
    assert doctor_main(["doctor", "--root", RT, "--cpus", "7"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not online" in err and "0-3" in err
    assert doctor_main(["doctor", "--root", RT, "--cpus", "x-"]) == 2
    assert capsys.readouterr().err.startswith("rtlab: error: --cpus")


def test_bad_root(doctor_main, capsys, tmp_path) -> None:
    assert doctor_main(["doctor", "--root", str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rtlab: error: --root") and err.count("\n") == 1
