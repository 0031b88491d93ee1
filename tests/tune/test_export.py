# SPDX-License-Identifier: MIT
"""The files a tune exports (rtlab.tune.export), from ledgers of simulated tunes whose
effects are known by construction (rtlab.tune.simulate): the scenario loads and sets
exactly the recommended runtime fields, the command line composes, the tuned profile
reads as INI, the sysctl snippet holds the sysctl knobs, every file names its tune, and
the directory rules hold (re-export yes, someone else's file or an unwritable place no,
nothing written then)."""

from __future__ import annotations

import configparser
import copy
import functools
import json
import os
from pathlib import Path
from typing import Any

import pytest

from rtlab.errors import RtlabError, UsageError
from rtlab.scenario.loader import parse_text
from rtlab.tune import knobs as catalogue
from rtlab.tune import ledger as ledger_mod
from rtlab.tune import state as st
from rtlab.tune.export import write_exports
from rtlab.tune.search import Tuner
from rtlab.tune.simulate import SimBench

ONLINE = [0, 1, 2, 3]
USER, SYSTEM = [3], [0, 1, 2]

# helps by construction: shield, timer migration, RT throttling, isolcpus; inert:
# nohz_full, governor; hurts: watchdogs-off
EFFECTS = {"cpuset-shield": 0.7, "timer-migration-off": 0.8, "rt-throttling-off": 0.85,
           "isolcpus": 0.8, "watchdogs-off": 1.3}
CANDIDATES = ["cpuset-shield", "rt-throttling-off", "timer-migration-off", "watchdogs-off",
              "governor", "isolcpus", "nohz_full"]

SCENARIO = """\
# a scenario of the user's own
[scenario]
name = "mine"
description = \"\"\"the user's workload; the line below is text, not a table
[shield]
\"\"\"

[shield]
user = "last"
system = "others"
cpuset = false
tasks = false
vm_stat_interval = 5   # the user's own setting: kept

[[probe]]
probe = "timer"
cpus = "user"
interval = "1ms"

[[phase]]
name = "loaded"
duration = "10s"
"""

ORIGINAL = "BOOT_IMAGE=/vmlinuz-6.1 root=/dev/vda1 ro isolcpus=2 quiet -- single"


def simulated_tune(effects: dict[str, float], candidates: list[str], *,
                   tune_id: str = "tune-20261128-120000-ab12", target: str | None = "board-1",
                   skipped: dict[str, str] | None = None,
                   not_tested: list[str] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """(ledger, state) of a finished simulated tune (a copy of its own: the same tune is
    simulated once per test session)."""
    return copy.deepcopy(_simulated(tuple(sorted(effects.items())), tuple(candidates),
                                    tune_id, target, tuple(sorted((skipped or {}).items())),
                                    tuple(not_tested or ())))


@functools.cache
def _simulated(effects: tuple[tuple[str, float], ...], candidates: tuple[str, ...],
               tune_id: str, target: str | None, skipped: tuple[tuple[str, str], ...],
               not_tested: tuple[str, ...]) -> tuple[dict[str, Any], dict[str, Any]]:
    s = st.new(tune_id=tune_id, target=target, scenario="mine", stats=("p99.99", "max"),
               budget_s=1e9, block_s=10, block_cost_s=10, pairs=3, confirm_pairs=4,
               candidates=list(candidates), skipped=dict(skipped), proposed={},
               not_tested=list(not_tested), user=USER, system=SYSTEM, slo=None, store=None,
               reboot=None, command_line=[])
    state = Tuner(s, SimBench(dict(effects), seconds=10)).run()
    return ledger_mod.build(state), state


@pytest.fixture(scope="module")
def tuned() -> tuple[dict[str, Any], dict[str, Any]]:
    return simulated_tune(EFFECTS, CANDIDATES, skipped={"smt-off": "no SMT siblings"},
                          not_tested=["stat-interval"])


@pytest.fixture(scope="module")
def baseline_only() -> tuple[dict[str, Any], dict[str, Any]]:
    return simulated_tune({}, ["governor", "nohz_full"], tune_id="tune-inert", target=None)


def _export(ledger: dict[str, Any], state: dict[str, Any], d: Path,
            scenario: str | None = SCENARIO, original: str | None = ORIGINAL) -> list[Path]:
    return write_exports(ledger, state, scenario, original, d, online=ONLINE)


def _body(path: Path) -> list[str]:
    return [ln for ln in path.read_text().splitlines() if ln.strip() and not ln.startswith("#")]


def test_the_simulated_tune_recommends_what_helps(tuned: tuple[dict[str, Any], dict[str, Any]]
                                                  ) -> None:
    ledger, _ = tuned
    assert set(ledger["recommended"]["knobs"]) == {"cpuset-shield", "timer-migration-off",
                                                   "rt-throttling-off", "isolcpus"}


def test_scenario_loads_with_exactly_the_recommended_fields(
        tuned: tuple[dict[str, Any], dict[str, Any]], tmp_path: Path) -> None:
    ledger, state = tuned
    _export(ledger, state, tmp_path)
    text = (tmp_path / "scenario.toml").read_text()
    (sc,) = parse_text(text, "scenario.toml", ONLINE).variants
    (orig,) = parse_text(SCENARIO, "mine.toml", ONLINE).variants
    shield = sc.shield
    assert shield is not None and orig.shield is not None
    assert shield.user == tuple(USER) and shield.system == tuple(SYSTEM)
    # every field a recommended runtime knob sets, and nothing else changed
    want: dict[str, Any] = {}
    for name in ledger["recommended"]["knobs"]:
        want.update(catalogue.BY_NAME[name].shield)
    assert want == {"cpuset": True, "tasks": True, "sched_rt_runtime_us": -1,
                    "timer_migration": False}
    for field, value in orig.shield.to_dict().items():
        assert shield.to_dict()[field] == want.get(field, value), field
    assert shield.vm_stat_interval == 5  # the scenario's own setting stays
    assert shield.knobs() == {"timer_migration": False, "vm_stat_interval": 5}
    # the rest of the scenario is the user's
    assert sc.name == "mine" and sc.phases == orig.phases and sc.description == orig.description
    assert text.splitlines()[0].startswith("# rtlab tune tune-20261128-120000-ab12,")
    assert text.splitlines().count("[shield]") == 2  # the table, and the description's


def test_cmdline_composes_over_the_original(tuned: tuple[dict[str, Any], dict[str, Any]],
                                            tmp_path: Path) -> None:
    ledger, state = tuned
    _export(ledger, state, tmp_path)
    (line,) = _body(tmp_path / "cmdline.txt")
    words = line.split()
    assert words == ["root=/dev/vda1", "ro", "isolcpus=managed_irq,domain,3", "quiet", "--",
                     "single"]
    assert (tmp_path / "cmdline-added.txt").read_text() == "isolcpus=managed_irq,domain,3\n"
    assert "BOOT_IMAGE" in (tmp_path / "cmdline.txt").read_text()  # named as left out


def test_unknown_original_cmdline_says_so(tuned: tuple[dict[str, Any], dict[str, Any]],
                                          tmp_path: Path) -> None:
    ledger, state = tuned
    _export(ledger, state, tmp_path, original=None)
    assert _body(tmp_path / "cmdline.txt") == []
    assert "not known" in (tmp_path / "cmdline.txt").read_text()
    assert (tmp_path / "cmdline-added.txt").read_text() == "isolcpus=managed_irq,domain,3\n"


def test_tuned_profile_is_ini(tuned: tuple[dict[str, Any], dict[str, Any]],
                              tmp_path: Path) -> None:
    ledger, state = tuned
    files = _export(ledger, state, tmp_path)
    conf = tmp_path / "tuned" / f"rtlab-{ledger['tune']}" / "tuned.conf"
    assert conf.resolve() in files
    ini = configparser.ConfigParser(interpolation=None)
    ini.read_string(conf.read_text())
    assert "include" not in ini["main"]
    assert ledger["tune"] in ini["main"]["summary"]
    assert dict(ini["sysctl"]) == {"kernel.sched_rt_runtime_us": "-1",
                                   "kernel.timer_migration": "0", "vm.stat_interval": "5"}
    assert ini["bootloader"]["cmdline"] == "isolcpus=managed_irq,domain,3"
    assert ini["scheduler"]["isolated_cores"] == "3"
    assert "cpu" not in ini and "vm" not in ini  # governor is inert: not recommended
    assert "exclusive cpuset" in conf.read_text()  # what tuned cannot express, named


def test_sysctl_snippet(tuned: tuple[dict[str, Any], dict[str, Any]], tmp_path: Path) -> None:
    ledger, state = tuned
    _export(ledger, state, tmp_path)
    path = tmp_path / "sysctl.conf"
    settings = dict(ln.replace(" ", "").split("=", 1) for ln in _body(path))
    assert settings == {"kernel.sched_rt_runtime_us": "-1", "kernel.timer_migration": "0",
                        "vm.stat_interval": "5"}
    text = path.read_text()
    # each says what it bought, from the ledger
    assert "# rt-throttling-off: helps" in text and "# timer-migration-off: helps" in text
    assert "scenario's own [shield]" in text


def test_every_file_names_the_tune(tuned: tuple[dict[str, Any], dict[str, Any]],
                                   tmp_path: Path) -> None:
    ledger, state = tuned
    files = _export(ledger, state, tmp_path)
    names = sorted(str(p.relative_to(tmp_path.resolve())) for p in files)
    assert names == sorted(["cmdline.txt", "cmdline-added.txt", "scenario.toml", "sysctl.conf",
                            "ledger.json", "ledger.txt",
                            f"tuned/rtlab-{ledger['tune']}/tuned.conf"])
    for p in files:
        if p.name == "ledger.json":
            assert json.loads(p.read_text()) == json.loads(json.dumps(ledger))
        elif p.name != "cmdline-added.txt":
            first = p.read_text().splitlines()[0]
            assert first.startswith(f"# rtlab tune {ledger['tune']}, target board-1, tuned ")
    assert ledger_mod.text(ledger)[0] in (tmp_path / "ledger.txt").read_text()


def test_baseline_recommended(baseline_only: tuple[dict[str, Any], dict[str, Any]],
                              tmp_path: Path) -> None:
    ledger, state = baseline_only
    assert ledger["recommended"]["knobs"] == []
    files = _export(ledger, state, tmp_path)
    assert not (tmp_path / "cmdline-added.txt").exists()
    text = (tmp_path / "cmdline.txt").read_text()
    assert "No boot knob was recommended" in text
    assert _body(tmp_path / "cmdline.txt") == ["root=/dev/vda1 ro isolcpus=2 quiet -- single"]
    # the scenario's own setting is part of the configuration measured
    assert _body(tmp_path / "sysctl.conf") == ["vm.stat_interval = 5"]
    (sc,) = parse_text((tmp_path / "scenario.toml").read_text(), "s", ONLINE).variants
    (orig,) = parse_text(SCENARIO, "s", ONLINE).variants
    assert sc.shield == orig.shield
    assert all("target this machine" in p.read_text().splitlines()[0]
               for p in files if p.suffix in (".txt", ".conf", ".toml"))


def test_reexport_yes_foreign_file_no(tuned: tuple[dict[str, Any], dict[str, Any]],
                                      baseline_only: tuple[dict[str, Any], dict[str, Any]],
                                      tmp_path: Path) -> None:
    ledger, state = tuned
    _export(ledger, state, tmp_path)
    _export(ledger, state, tmp_path)  # this tune's own files: replaced
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    other, other_state = baseline_only
    with pytest.raises(UsageError, match="not an export of tune tune-inert"):
        _export(other, other_state, tmp_path)
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before

    d = tmp_path / "mixed"
    d.mkdir()
    (d / "sysctl.conf").write_text("kernel.foo = 1\n")
    with pytest.raises(UsageError, match=r"sysctl\.conf exists"):
        _export(ledger, state, d)
    assert sorted(os.listdir(d)) == ["sysctl.conf"]


def test_no_boot_knob_on_reexport_removes_own_stale_added_line(
        baseline_only: tuple[dict[str, Any], dict[str, Any]], tmp_path: Path) -> None:
    ledger, state = baseline_only
    _export(ledger, state, tmp_path)
    (tmp_path / "cmdline-added.txt").write_text("nohz_full=3\n")  # as an older export left it
    _export(ledger, state, tmp_path)
    assert not (tmp_path / "cmdline-added.txt").exists()


def test_unwritable_places_are_one_line(tuned: tuple[dict[str, Any], dict[str, Any]],
                                        tmp_path: Path) -> None:
    ledger, state = tuned
    f = tmp_path / "a-file"
    f.write_text("x")
    with pytest.raises(UsageError, match="not a directory"):
        _export(ledger, state, f)
    with pytest.raises(UsageError, match="proc"):
        _export(ledger, state, Path("/proc/self/rtlab-export"))
    # a link inside the directory would write elsewhere
    d = tmp_path / "d"
    d.mkdir()
    (d / "sysctl.conf").symlink_to(tmp_path / "elsewhere.conf")
    with pytest.raises(UsageError, match="symbolic link"):
        _export(ledger, state, d)
    assert not (tmp_path / "elsewhere.conf").exists()
    assert sorted(os.listdir(d)) == ["sysctl.conf"]


def test_bad_tune_id_and_new_directories(tuned: tuple[dict[str, Any], dict[str, Any]],
                                         tmp_path: Path) -> None:
    ledger, state = tuned
    bad = {**ledger, "tune": "../../etc"}
    with pytest.raises(UsageError, match="cannot name"):
        write_exports(bad, {**state, "id": "../../etc"}, SCENARIO, None, tmp_path / "x",
                      online=ONLINE)
    assert not (tmp_path / "x").exists()
    deep = tmp_path / "new" / "exports"
    files = _export(ledger, state, deep)
    assert all(p.is_relative_to(deep.resolve()) for p in files)


def test_hostile_names_stay_in_comments(tmp_path: Path) -> None:
    ledger, state = simulated_tune(EFFECTS, ["timer-migration-off"], tune_id="tune-h",
                                   target="evil\n[sysctl]\nkernel.panic=1")
    _export(ledger, state, tmp_path)
    for p in (tmp_path / "sysctl.conf", tmp_path / "tuned" / "rtlab-tune-h" / "tuned.conf",
              tmp_path / "cmdline.txt", tmp_path / "scenario.toml"):
        lines = p.read_text().splitlines()
        assert lines[0].startswith("# rtlab tune tune-h, target evil\\x0a[sysctl]\\x0akernel")
        assert not any(ln.startswith("kernel.panic") for ln in lines)
    ini = configparser.ConfigParser(interpolation=None)
    ini.read_string((tmp_path / "tuned" / "rtlab-tune-h" / "tuned.conf").read_text())
    assert dict(ini["sysctl"]) == {"kernel.timer_migration": "0", "vm.stat_interval": "5"}


def test_scenario_without_text_or_shield(tmp_path: Path) -> None:
    ledger, state = simulated_tune(EFFECTS, ["timer-migration-off"], tune_id="tune-n")
    _export(ledger, state, tmp_path / "a", scenario=None)  # "mine": no such scenario
    text = (tmp_path / "a" / "scenario.toml").read_text()
    assert "scenario text is not known" in text
    (sc,) = parse_text(text, "s", ONLINE).variants
    assert sc.shield is not None and sc.shield.knobs() == {"timer_migration": False}
    assert not sc.shield.cpuset and not sc.shield.tasks  # a shield that moves nothing
    # the built-in scenario the tune was given (`rtlab tune` without SCENARIO: "tune")
    _export(ledger, {**state, "scenario_ref": "tune"}, tmp_path / "t", scenario=None)
    f = parse_text((tmp_path / "t" / "scenario.toml").read_text(), "s", ONLINE)
    (sc,) = f.variants
    assert f.name == "tune" and [ld.name for ld in sc.loads] == ["seed"]
    assert sc.phases[0].probe.cpus == USER
    assert sc.shield is not None and sc.shield.knobs() == {"timer_migration": False}
    # a scenario file gone since the tune: named, the shield alone
    _export(ledger, {**state, "scenario_ref": str(tmp_path / "gone.toml")}, tmp_path / "g",
            scenario=None)
    text = (tmp_path / "g" / "scenario.toml").read_text()
    assert "cannot be read now" in text and "gone.toml" in text
    plain = SCENARIO.split("[shield]\nuser")[0] + "[[probe]]\nprobe = \"timer\"\ncpus = \"3\"\n"
    _export(ledger, state, tmp_path / "b", scenario=plain)
    (sc,) = parse_text((tmp_path / "b" / "scenario.toml").read_text(), "s", ONLINE).variants
    assert sc.shield is not None and sc.shield.knobs() == {"timer_migration": False}
    assert sc.phases[0].probe.cpus == [3]


def test_matrix_scenario_exports_one_configuration(tmp_path: Path) -> None:
    ledger, state = simulated_tune(EFFECTS, ["timer-migration-off"], tune_id="tune-m")
    text = SCENARIO + "\n[[matrix.variant]]\nname = \"a\"\nshield = false\n" \
        "[[matrix.variant]]\nname = \"b\"\n"
    _export(ledger, state, tmp_path, scenario=text)
    f = parse_text((tmp_path / "scenario.toml").read_text(), "s", ONLINE)
    assert not f.has_matrix
    (sc,) = f.variants
    assert sc.shield is not None and sc.shield.knobs() == {"timer_migration": False,
                                                           "vm_stat_interval": 5}


def test_a_shield_the_text_cannot_show_is_refused(tmp_path: Path) -> None:
    ledger, state = simulated_tune(EFFECTS, ["timer-migration-off"], tune_id="tune-d")
    dotted = 'shield.user = "3"\nshield.system = "0"\n[scenario]\nname = "d"\n'
    with pytest.raises(RtlabError, match="cannot replace the \\[shield\\]"):
        _export(ledger, state, tmp_path / "d", scenario=dotted)
    assert not (tmp_path / "d").exists()


def test_rtlab_checks_the_exported_scenario_here(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """`rtlab scenarios check` (this machine's online CPUs: CPU 0 is always one; other
    tests may take the others offline for a moment) takes the file as it is exported."""
    from rtlab.cli import main

    s = st.new(tune_id="tune-here", target=None, scenario="tune", stats=("p99",),
               budget_s=1e9, block_s=10, block_cost_s=10, pairs=2, confirm_pairs=2,
               candidates=["rt-throttling-off", "timer-migration-off"], skipped={},
               proposed={}, not_tested=[], user=[0], system=[0], slo=None, store=None,
               reboot=None, command_line=[])
    state = Tuner(s, SimBench({"rt-throttling-off": 0.7, "timer-migration-off": 0.8},
                              seconds=10)).run()
    ledger = ledger_mod.build(state)
    assert ledger["recommended"]["knobs"] == ["rt-throttling-off", "timer-migration-off"]
    write_exports(ledger, state, None, None, tmp_path, online=[0])
    capsys.readouterr()
    code = main(["scenarios", "check", "--json", str(tmp_path / "scenario.toml")])
    out = capsys.readouterr().out
    assert code == 0, out
    text = json.dumps(json.loads(out))
    assert '"timer_migration": false' in text and '"sched_rt_runtime_us": -1' in text
