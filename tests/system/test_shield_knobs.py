# SPDX-License-Identifier: MIT
"""Runtime knobs of a [shield] (no root): checked at scenario load with file and line,
written back as TOML that loads into the same shield, planned from a target's files
(any machine's, given here) as journaled writes whose restore puts back what was there,
skipped and named where the target lacks them, and refused with one line where the
target cannot take the value."""

from __future__ import annotations

import dataclasses
import itertools
import json
from pathlib import Path

import pytest

from rtlab.errors import UsageError
from rtlab.scenario import parse_text
from rtlab.scenario.model import ShieldSpec
from rtlab.scenario.shield_toml import shield_toml
from rtlab.system.facts import parse_facts
from rtlab.system.shield_knobs import (
    KNOB_NAMES,
    KNOBS,
    KnobState,
    RuntimeKnobs,
    knob_path,
    knobs_in_effect,
    plan_knobs,
)
from rtlab.system.shield_plan import ShieldRequest, plan_affinity, plan_shield

C = "/sys/devices/system/cpu"
ALL = dict(timer_migration=False, watchdogs=False, vm_stat_interval=10,
           idle_max_latency_us=0, governor="performance", min_freq="max", smt=False,
           thp="never", numa_balancing=False)

HEAD = """\
[scenario]
name = "k"
[shield]
user = "1"
cpuset = false
tasks = false
"""


def _load(body: str, online: list[int] | None = None) -> ShieldSpec:
    (sc,) = parse_text(HEAD + body, "k.toml", online or [0, 1, 2, 3]).variants
    assert sc.shield is not None
    return sc.shield


def test_names_are_the_lead_catalogues() -> None:
    assert KNOB_NAMES == ("timer_migration", "watchdogs", "vm_stat_interval",
                          "idle_max_latency_us", "governor", "min_freq", "smt", "thp",
                          "numa_balancing")
    fields = {f.name for f in dataclasses.fields(ShieldSpec)}
    assert set(KNOB_NAMES) <= fields
    assert len({k.option for k in KNOBS}) == len(KNOBS)


def test_every_knob_loads_and_round_trips_through_toml() -> None:
    body = "\n".join(f"{k} = {json.dumps(v)}" for k, v in ALL.items()) + "\n"
    spec = _load(body)
    assert spec.knobs() == ALL
    assert {k: spec.to_dict()[k] for k in ALL} == ALL  # stored with each run
    text = shield_toml(spec, comment="exported")
    assert text.startswith("# exported\n[shield]\n")
    (again,) = parse_text(text, "profile.toml", [0, 1, 2, 3]).variants
    assert again.shield == spec
    # a shield with thread priorities (a regex with backslashes) and a cpuset
    rich = dataclasses.replace(spec, cpuset=True, tasks=True, irqs=True, min_freq=1_200_000,
                               thread_priorities=(("irq/\\d+-eth\"0", "fifo", 99),),
                               sched_rt_runtime_us=-1, dma_latency=0)
    (back,) = parse_text(shield_toml(rich), "p.toml", [0, 1, 2, 3]).variants
    assert back.shield == rich


def test_a_shield_without_knobs_keeps_its_stored_form() -> None:
    spec = _load("")
    assert not set(KNOB_NAMES) & set(spec.to_dict())  # the scenario hash of old runs holds
    assert "timer_migration" not in shield_toml(spec)


@pytest.mark.parametrize(("key", "value", "allowed"), [
    ("timer_migration", "0", "true or false"),
    ("watchdogs", "1", "true or false"),
    ("vm_stat_interval", "0", "1..3600"),
    ("vm_stat_interval", "3601", "1..3600"),
    ("vm_stat_interval", '"10s"', "1..3600"),
    ("idle_max_latency_us", "-1", "0.."),
    ("governor", '"Perf ormance"', "governor"),
    ("min_freq", '"min"', '"max"'),
    ("min_freq", "0", "kHz"),
    ("smt", '"off"', "true or false"),
    ("thp", '"sometimes"', '"never", "madvise", "always"'),
    ("numa_balancing", "2", "true or false"),
])
def test_bad_values_name_file_line_and_what_is_allowed(key: str, value: str,
                                                      allowed: str) -> None:
    with pytest.raises(UsageError) as info:
        _load(f"{key} = {value}\n")
    msg = info.value.message
    assert msg.startswith(f"k.toml:7: shield.{key}: ") and allowed in msg
    assert "\n" not in msg


def _state(*, smt: bool = False, cpufreq: bool = True, idle: bool = True,
           thp: bool = True, watchdog: bool = True) -> KnobState:
    """A 4-CPU machine's knob files: CPU 0/2 and 1/3 SMT siblings (when `smt`)."""
    f = {"/proc/sys/kernel/timer_migration": "1", "/proc/sys/vm/stat_interval": "1",
         "/proc/sys/kernel/numa_balancing": "1", f"{C}/online": "0-3"}
    if watchdog:
        f["/proc/sys/kernel/watchdog"] = "1"
    else:
        f["/proc/sys/kernel/nmi_watchdog"] = "1"
        f["/proc/sys/kernel/soft_watchdog"] = "0"
    if thp:
        f["/sys/kernel/mm/transparent_hugepage/enabled"] = "always [madvise] never"
    for cpu in range(4):
        if cpu:
            f[f"{C}/cpu{cpu}/online"] = "1"
        f[f"{C}/cpu{cpu}/topology/thread_siblings_list"] = (
            f"{cpu % 2},{cpu % 2 + 2}" if smt else str(cpu))
        if idle:
            for i, (name, lat) in enumerate((("POLL", 0), ("C1", 2), ("C6", 133))):
                f[f"{C}/cpu{cpu}/cpuidle/state{i}/name"] = name
                f[f"{C}/cpu{cpu}/cpuidle/state{i}/latency"] = str(lat)
                f[f"{C}/cpu{cpu}/cpuidle/state{i}/disable"] = "0"
        if cpufreq:
            for k, v in (("scaling_governor", "powersave"),
                         ("scaling_available_governors", "performance powersave"),
                         ("scaling_min_freq", "800000"), ("cpuinfo_min_freq", "800000"),
                         ("cpuinfo_max_freq", "3600000"), ("affected_cpus", str(cpu))):
                f[f"{C}/cpu{cpu}/cpufreq/{k}"] = v
    return KnobState(f)


def _apply(state: KnobState, ops: list[dict]) -> dict[str, str]:
    """The files after the ops, as the engine writes them (a journal of old contents)."""
    files = dict(state.files)
    journal = []
    for op in ops:
        if op["op"] == "write":
            journal.append((op["path"], files[op["path"]], op.get("undo")))
            if op["path"].endswith("transparent_hugepage/enabled"):
                files[op["path"]] = " ".join(f"[{m}]" if m == op["value"] else m
                                             for m in ("always", "madvise", "never"))
            else:
                files[op["path"]] = op["value"]
    files["__journal__"] = json.dumps(journal)
    return files


def _restore(files: dict[str, str]) -> dict[str, str]:
    out = dict(files)
    for path, old, undo in reversed(json.loads(out.pop("__journal__"))):
        value = undo if undo is not None else old
        if path.endswith("transparent_hugepage/enabled"):
            value = " ".join(f"[{m}]" if m == value else m for m in ("always", "madvise",
                                                                     "never"))
        out[path] = value
    return out


def test_every_knob_planned_in_effect_and_restored() -> None:
    state = _state(smt=True)
    kp = plan_knobs(state, RuntimeKnobs(**ALL), [1], [0])
    paths = [op["path"] for op in kp.first + kp.ops]
    assert "/proc/sys/kernel/numa_balancing" in paths
    assert f"{C}/cpu3/online" in [op["path"] for op in kp.first]  # SMT first
    assert kp.offline == frozenset({3}) and not kp.skipped
    # only the deep states of the user CPU: C1 (2 µs) and C6 (133 µs), not POLL, not CPU 0
    assert [p for p in paths if "cpuidle" in p] == [f"{C}/cpu1/cpuidle/state1/disable",
                                                   f"{C}/cpu1/cpuidle/state2/disable"]
    thp = next(op for op in kp.ops if op["path"].endswith("enabled"))
    assert thp == {"op": "write", "path": "/sys/kernel/mm/transparent_hugepage/enabled",
                   "value": "never", "undo": "madvise"}
    assert all(knob_path(p) is not None for p in paths)
    after = _apply(state, kp.first + kp.ops)
    effect, problems = knobs_in_effect(KnobState(after), kp)
    assert problems == [] and all(e["ok"] for e in effect.values())
    assert effect["min_freq"]["in_effect"] == 3_600_000 and effect["smt"]["in_effect"] is False
    assert _restore(after) == dict(state.files)  # the journal's reverse order puts it back


def test_a_target_without_the_knobs_skips_and_names_them() -> None:
    state = _state(cpufreq=False, idle=False, thp=False)
    kp = plan_knobs(state, RuntimeKnobs(**ALL), [1], [0])
    assert set(kp.skipped) == {"idle_max_latency_us", "governor", "min_freq", "smt", "thp"}
    assert "no cpufreq on CPU 1" in kp.skipped["governor"]
    assert "no SMT" in kp.skipped["smt"] and "no cpuidle states" in kp.skipped[
        "idle_max_latency_us"]
    effect, problems = knobs_in_effect(KnobState(_apply(state, kp.ops)), kp)
    assert problems == []
    assert {k for k, e in effect.items() if e["skipped"]} == set(kp.skipped)
    assert all(e["ok"] for k, e in effect.items() if k not in kp.skipped)


def test_settings_already_in_place_are_not_written() -> None:
    state = _state()
    kp = plan_knobs(state, RuntimeKnobs(timer_migration=True, numa_balancing=True,
                                        thp="madvise", idle_max_latency_us=1000), [1], [0])
    assert kp.ops == [] and set(kp.already) == {"timer_migration", "numa_balancing", "thp",
                                                "idle_max_latency_us"}


def test_watchdogs_without_the_master_switch() -> None:
    kp = plan_knobs(_state(watchdog=False), RuntimeKnobs(watchdogs=False), [1], [0])
    assert kp.ops == [{"op": "write", "path": "/proc/sys/kernel/nmi_watchdog", "value": "0"}]


def test_what_the_target_cannot_take_is_one_line() -> None:
    with pytest.raises(UsageError, match=r"governor = 'schedutil': CPU 1 does not offer it; "
                                         r"allowed: performance, powersave$"):
        plan_knobs(_state(), RuntimeKnobs(governor="schedutil"), [1], [0])
    with pytest.raises(UsageError, match=r"min_freq = 5000000: out of range for CPU 1; "
                                         r"allowed: 800000\.\.3600000 kHz"):
        plan_knobs(_state(), RuntimeKnobs(min_freq=5_000_000), [1], [0])
    with pytest.raises(UsageError, match="CPU 3 is an SMT sibling of user CPU 1 and a "
                                         "system CPU"):
        plan_knobs(_state(smt=True), RuntimeKnobs(smt=False), [1], [0, 3])
    with pytest.raises(UsageError, match="CPU 3 is an SMT sibling of user CPU 1 and a "
                                         "user CPU"):
        plan_knobs(_state(smt=True), RuntimeKnobs(smt=False), [1, 3], [0])


def _facts() -> object:
    tasks = [{"pid": p, "tid": p, "comm": c, "kthread": False, "per_cpu": False,
              "affinity": aff, "policy": "other", "priority": 0, "starttime": 1,
              "cgroups": {"cpuset": "/"}}
             for p, c, aff in ((100, "pinned3", [3]), (101, "any", [0, 1, 2, 3]))]
    return parse_facts({"type": "facts", "schema": 1, "cpus_online": [0, 1, 2, 3],
                        "cpus_possible": [0, 1, 2, 3], "tasks": tasks,
                        "irqs": [{"irq": 30, "name": "x", "affinity": [3], "effective": [3],
                                  "managed": None, "threaded_pid": None}],
                        "default_smp_affinity": "f",
                        "cgroup": {"v1_cpuset": "/sys/fs/cgroup/cpuset", "v1_mems": "0"},
                        "sysctl": {}})


def test_smt_in_the_shield_plans() -> None:
    """The sibling goes offline before the shield moves anything (its restore comes
    last); the shield's sets leave it out; what was bound to it alone is kept."""
    facts = _facts()
    knobs = RuntimeKnobs(smt=False, timer_migration=False)
    req = ShieldRequest(cpus=frozenset({1}), irqs=True, kthreads=False, knobs=knobs)
    plan = plan_shield(facts, req, knob_state=_state(smt=True))  # type: ignore[arg-type]
    first = plan.ops[:3]
    assert first == [{"op": "affinity", "tid": 100, "cpus": [3]},
                     {"op": "write", "path": "/proc/irq/30/smp_affinity_list", "value": "3"},
                     {"op": "write", "path": f"{C}/cpu3/online", "value": "0"}]
    assert plan.housekeeping == frozenset({0, 2})
    assert {"op": "write", "path": "/sys/fs/cgroup/cpuset/rtlab-system/cpuset.cpus",
            "value": "0,2"} in plan.ops
    assert plan.ops[-1]["path"] == "/proc/sys/kernel/timer_migration"
    assert all(plan.ops[i]["op"] in ("mkdir", "write") for i in plan.required)
    aff = plan_affinity(facts, dataclasses.replace(req, tasks=True),  # type: ignore[arg-type]
                        frozenset({0, 2, 3}), knob_state=_state(smt=True))
    assert {"op": "affinity", "tid": 101, "cpus": [0, 2]} in aff.ops
    # a shield that moves nothing: the knobs alone
    only = plan_affinity(facts, ShieldRequest(cpus=frozenset({1}), irqs=False, tasks=False,  # type: ignore[arg-type]
                                              knobs=RuntimeKnobs(vm_stat_interval=5)),
                         frozenset({0}), knob_state=_state())
    assert only.ops == [{"op": "write", "path": "/proc/sys/vm/stat_interval", "value": "5"}]


@pytest.mark.parametrize(("argv", "needle"), [
    (["--cpus", "1", "--governor", "Bad Gov"], "--governor 'Bad Gov': not allowed"),
    (["--cpus", "1", "--timer-migration", "maybe"], "--timer-migration 'maybe': not allowed; "
                                                    "allowed: on or off"),
    (["--cpus", "1", "--vm-stat-interval", "0"], "--vm-stat-interval '0': not allowed"),
    (["--cpus", "1", "--thp", "sometimes"], "allowed: never, madvise, always"),
    (["--reset", "--smt", "off"], "the runtime knobs go with --cpus"),
    (["--scenario", "x.toml", "--smt", "off"], "--scenario applies the file's [shield]"),
])
def test_cli_bad_knob_options_exit_2_with_one_line(argv: list[str], needle: str,
                                                   tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    from rtlab.cli import main

    code = main(["shield", *argv, "--journal-dir", str(tmp_path)])
    out, err = capsys.readouterr()
    assert code == 2 and needle in err and out == ""
    assert len([ln for ln in err.splitlines() if ln.startswith("rtlab: error")]) == 1
    assert list(tmp_path.iterdir()) == []


def test_cli_scenario_without_a_shield_or_missing(tmp_path: Path, probe_bin: str,
                                                  monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    from rtlab.cli import main

    monkeypatch.setenv("RTLAB_PROBE", probe_bin)
    f = tmp_path / "none.toml"
    f.write_text("[scenario]\nname = \"n\"\n")
    j = tmp_path / "j"
    for path, needle in ((f, "has no [shield] table"), (tmp_path / "absent.toml", "absent")):
        code = main(["shield", "--scenario", str(path), "--journal-dir", str(j)])
        _, err = capsys.readouterr()
        assert code == 2 and needle in err, err
    bad = tmp_path / "bad.toml"
    bad.write_text(HEAD + "thp = \"sometimes\"\n")
    code = main(["shield", "--scenario", str(bad), "--journal-dir", str(j)])
    _, err = capsys.readouterr()
    assert code == 2 and f"{bad}:7: shield.thp" in err
    assert not j.exists()


def test_every_combination_of_bools_round_trips() -> None:
    for a, b in itertools.product((None, True, False), repeat=2):
        spec = dataclasses.replace(_load(""), smt=a, watchdogs=b)
        (back,) = parse_text(shield_toml(spec), "p.toml", [0, 1, 2, 3]).variants
        assert back.shield == spec


def test_watchdogs_off_journals_the_detectors_that_are_on() -> None:
    """Their restore, after the master switch's, turns them on again (a kernel that
    clears them when read while the master is off: the 6.1 RT board)."""
    kp = plan_knobs(_state(), RuntimeKnobs(watchdogs=False), [1], [0])
    assert kp.ops == [{"op": "write", "path": "/proc/sys/kernel/watchdog", "value": "0"}]
    state = KnobState({**_state().files, "/proc/sys/kernel/nmi_watchdog": "0",
                       "/proc/sys/kernel/soft_watchdog": "1"})
    kp = plan_knobs(state, RuntimeKnobs(watchdogs=False), [1], [0])
    assert [(op["path"].rsplit("/", 1)[1], op["value"]) for op in kp.ops] == [
        ("soft_watchdog", "1"), ("watchdog", "0")]
