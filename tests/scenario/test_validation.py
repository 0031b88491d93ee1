# SPDX-License-Identifier: MIT
"""Bad scenario files are refused before anything starts, with file:line, key and what
is allowed; the built-in scenarios all validate on this machine."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from rtlab.cli import main
from rtlab.errors import UsageError
from rtlab.scenario import builtins, load_file, parse_text, scale_durations

GOOD = """\
[scenario]
name = "t"

[shield]
user = "last"
system = "first"

[[load]]
name = "hog"
kind = "stress"
cpu = 1
cpus = "system"

[[probe]]
cpus = "user"
priority = 99

[[phase]]
name = "idle"
duration = "1s"

[[phase]]
name = "load"
duration = "1s"
loads = ["hog"]
"""


def bad(old: str, new: str) -> str:
    assert old in GOOD
    return GOOD.replace(old, new, 1)


CASES = [
    # (text, line, needle)
    (GOOD + "\n[extra]\nx = 1\n", 27, "extra: unknown key; allowed: scenario, shield, load"),
    (bad("priority = 99", "priority = 99\nprio = 1"), 17, "probe[0].prio: unknown key; "
     "allowed: name, probe, cpus"),
    (bad('system = "first"', 'system = "0-1"'), 6, "shield.system: system CPUs and user "
     "CPUs overlap on CPU 1"),
    (bad('cpus = "user"', 'cpus = "7"'), 15, "probe[0].cpus: CPU 7 is not online on this "
     "machine (online CPUs: 0-1)"),
    (bad('user = "last"', 'user = "5"'), 5, "shield.user: CPU 5 is not online"),
    (bad("priority = 99", "priority = 150"), 16, "probe[0].priority: 150 is out of range; "
     "allowed: an integer 1..99"),
    (bad("priority = 99", 'policy = "other"\npriority = 5'), 17, "allowed: an integer 0..0"),
    (bad('duration = "1s"', 'duration = "10"'), 20, "phase[0].duration: invalid duration "
     "'10'; allowed: a number with a unit"),
    (bad('duration = "1s"', 'duration = 10'), 20, "is not a duration"),
    (bad('loads = ["hog"]', 'loads = ["nosuch"]'), 25, "phase[1].loads: no load named "
     "'nosuch'; defined: hog"),
    (bad('kind = "stress"', 'kind = "burn"'), 10, "load[0].kind: 'burn' is not a load kind; "
     "allowed: stress, rt-competitor"),
    (bad("cpu = 1", "cpu = -1"), 11, "load[0].cpu: -1 is out of range"),
    (bad("cpu = 1", "cpu = 1\nwobble = 3"), 12, "load[0].wobble"),
    (bad('cpus = "system"', 'cpus = "system"\npolicy = "fifo"\npriority = 0'), 14,
     "load[0].priority: 0 is out of range for policy 'fifo'"),
    (bad('name = "t"', 'name = "t"\ncolour = "red"'), 3, "scenario.colour: unknown key"),
    (GOOD + '\n[[matrix.variant]]\nname = "a"\nloads = ["x"]\n', 29,
     "matrix.variant[0].loads: no load named 'x'"),
    (GOOD + '\n[[matrix.variant]]\nname = "a"\nshield = 3\n', 29,
     "matrix.variant[0].shield: 3 is not allowed"),
    (bad('name = "idle"', 'name = "load"'), 23, "phase[1].name: duplicate phase name"),
    (bad("[scenario]", "[scenario"), 1, "not valid TOML"),
    (bad("priority = 99", 'priority = 99\nprobe = "udp"\noptions = { path = "dpdk" }'), 18,
     "probe[0].options.path: 'dpdk' is not allowed; allowed: socket, xdp"),
    (bad("priority = 99", 'priority = 99\nprobe = "udp"\noptions = { xdp-mode = "hw" }'), 18,
     "probe[0].options.xdp-mode: 'hw' is not allowed; allowed: auto, native, generic"),
]


@pytest.mark.parametrize(("text", "line", "needle"), CASES)
def test_bad_scenario_names_line_key_and_allowed(text: str, line: int, needle: str) -> None:
    with pytest.raises(UsageError) as info:
        parse_text(text, "bad.toml", online=[0, 1])
    msg = info.value.one_line()
    assert "\n" not in msg
    assert msg.startswith(f"bad.toml:{line}: "), msg
    assert needle in msg, msg


def test_good_scenario_resolves() -> None:
    sf = parse_text(GOOD, "good.toml", online=[0, 1])
    (sc,) = sf.variants
    assert sc.shield is not None and sc.shield.user == (1,) and sc.shield.system == (0,)
    assert [p.name for p in sc.phases] == ["idle", "load"]
    assert sc.phases[0].probe.cpus == [1] and sc.phases[1].loads == ("hog",)
    assert sc.load("hog").cpus == (0,)
    assert [p.duration_ns for p in scale_durations(sc, 4 * 10**9).phases] == [2 * 10**9] * 2
    with pytest.raises(UsageError, match="too short"):
        scale_durations(sc, 1_000_000)


def test_udp_path_option() -> None:
    text = bad("priority = 99", 'priority = 99\nprobe = "udp"\noptions = { path = "xdp", '
               'xdp-mode = "generic" }')
    (sc,) = parse_text(text, "udp.toml", online=[0, 1]).variants
    o = sc.phases[0].probe.options
    assert o["path"] == "xdp" and o["xdp_mode"] == "generic"
    # another probe's option of that name is the engine's to check
    (sc,) = parse_text(bad("priority = 99", 'priority = 99\noptions = { path = "x" }'),
                       "t.toml", online=[0, 1]).variants
    assert sc.phases[0].probe.options["path"] == "x"


def test_one_cpu_machine_cannot_shield() -> None:
    with pytest.raises(UsageError, match="overlap on CPU 0"):
        parse_text(GOOD, "g.toml", online=[0])


@pytest.mark.parametrize("online", [[0], [0, 1], list(range(8))])
def test_quick_fits_any_machine(online: list[int]) -> None:
    (sc,) = load_file(builtins()["quick"], online=online).variants
    assert sc.phases[0].probe.cpus == online
    want = online[:-1] or online  # the other CPUs, or the only one
    assert sc.load("stress").cpus == tuple(want)
    assert sc.load("stress").params["cpu"] == len(want)


def test_builtins_validate_here() -> None:
    names = builtins()
    assert {"quick", "seed-shielded-cyclic", "multicore-migration", "osadl-style"} <= set(names)
    for path in names.values():
        sf = load_file(path)
        assert sf.variants and all(sc.phases for sc in sf.variants)
    mbda = load_file(names["multicore-migration"])
    assert [v.variant for v in mbda.variants] == ["smp", "tasks-cpu0", "irqs-cpu0", "shielded"]
    assert mbda.variants[0].shield is None
    assert [v.shield.irqs for v in mbda.variants[1:] if v.shield] == [False, True, True]
    assert [v.shield.cpuset for v in mbda.variants[1:] if v.shield] == [False, False, True]
    seed = load_file(names["seed-shielded-cyclic"]).variants[0]
    assert seed.phases[0].probe.options["priority"] == 99
    assert seed.load("competitors").priority == 98
    assert seed.load("stress").params == {"preset": "seed"}


def test_cli_bad_file_exit_2_nothing_started(
    fake_probe: Callable[..., Path], store_path: Path, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv_file = tmp_path / "argv.json"
    fake_probe("normal", argv_out=argv_file)
    f = tmp_path / "bad.toml"
    f.write_text(bad("priority = 99", "priority = 150"))
    code = main(["run", str(f), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.strip().splitlines() == [
        f"rtlab: error: {f}:16: probe[0].priority: 150 is out of range; allowed: an "
        "integer 1..99"]
    assert not argv_file.exists()  # no engine was spawned
    runs = store_path.parent / "runs"
    assert not runs.exists() or not any(runs.iterdir())


def test_cli_scenarios_list_show_check(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["scenarios", "list"]) == 0
    out = capsys.readouterr().out
    assert "quick " in out and "seed-shielded-cyclic" in out and "MBDA" in out
    assert main(["scenarios", "show", "quick"]) == 0
    assert "[[phase]]" in capsys.readouterr().out
    assert main(["scenarios", "check", "multicore-migration"]) == 0
    assert "variant shielded" in capsys.readouterr().out
    assert main(["scenarios", "show", "nosuch"]) == 2
    assert "unknown scenario 'nosuch'" in capsys.readouterr().err
