# SPDX-License-Identifier: MIT
"""Boot parameters in effect (rtlab.tune.bootcheck) from synthetic board files: each
check says yes from the kernel's own state, no when the state contradicts the
command line, and "cannot tell" where nothing can be read. On a real kernel:
tests/lab/test_reboot_on_board.py."""

from __future__ import annotations

import pytest

from rtlab.tune.bootcheck import BootFiles, tasks_on, verify_boot

CMD = ("console=ttyS0 isolcpus=nohz,domain,1-2 nohz_full=1-2 rcu_nocbs=1-2 irqaffinity=0 "
       "idle=poll processor.max_cstate=1 nosmt nowatchdog mitigations=off skew_tick=1")


def stat(pid: int, comm: str, cpu: int, flags: int = 0x400000) -> str:
    # fields 3.. of /proc/PID/stat: state ppid pgrp session tty tpgid flags(9) ... cpu(39)
    rest = ["S", "1", str(pid), str(pid), "0", "-1", str(flags)] + ["0"] * 29 + [str(cpu)]
    return f"{pid} ({comm}) " + " ".join(rest + ["0"] * 13)


def files(**over: str | None) -> BootFiles:
    base: dict[str, str | None] = {
        "/proc/cmdline": CMD,
        "/sys/devices/system/cpu/isolated": "1-2",
        "/sys/devices/system/cpu/nohz_full": "1-2",
        "/proc/irq/default_smp_affinity": "1",
        "/sys/devices/system/cpu/cpuidle/current_driver": "none",
        "/sys/module/processor/parameters/max_cstate": "1",
        "/sys/devices/system/cpu/smt/control": "off",
        "/proc/sys/kernel/watchdog": "0",
        "/sys/devices/system/cpu/vulnerabilities/spectre_v2": "Vulnerable",
        "/sys/devices/system/cpu/vulnerabilities/meltdown": "Not affected",
        "/proc/20/task/20/stat": stat(20, "rcuop/1", 0, 0x00208040),
        "/proc/21/task/21/stat": stat(21, "rcuop/2", 0, 0x00208040),
    }
    base.update(over)
    return BootFiles({k: v for k, v in base.items() if v is not None},
                     {k: "ENOENT" for k, v in base.items() if v is None})


PARAMS = {"isolcpus": "nohz,domain,1-2", "nohz_full": "1-2", "rcu_nocbs": "1-2",
          "irqaffinity": "0", "idle": "poll", "processor.max_cstate": "1", "nosmt": None,
          "nowatchdog": None, "mitigations": "off", "skew_tick": "1"}


def test_every_parameter_in_effect_with_its_evidence() -> None:
    checks = {c.param: c for c in verify_boot(PARAMS, files())}
    assert {p: c.in_effect for p, c in checks.items()} == dict.fromkeys(PARAMS, True)
    assert checks["isolcpus"].evidence == "/sys/devices/system/cpu/isolated = 1-2"
    assert checks["irqaffinity"].evidence.endswith("= 1 (CPUs 0)")
    assert checks["rcu_nocbs"].source == "state" and "1-2" in checks["rcu_nocbs"].evidence
    assert checks["skew_tick"].source == "cmdline"  # nothing to read but the cmdline
    assert checks["mitigations"].evidence == "no mitigation active; vulnerable: spectre_v2"


@pytest.mark.parametrize(("param", "over", "evidence"), [
    ("isolcpus", {"/sys/devices/system/cpu/isolated": "1"}, "CPUs 2 missing"),
    ("nohz_full", {"/sys/devices/system/cpu/nohz_full": None}, "CONFIG_NO_HZ_FULL"),
    ("nohz_full", {"/sys/devices/system/cpu/nohz_full": "(null)"}, "= none: CPUs 1-2 missing"),
    ("rcu_nocbs", {"/proc/21/task/21/stat": stat(21, "kworker/2", 0, 0x00208040)},
     "no rcuop kthread for CPUs 2"),
    ("irqaffinity", {"/proc/irq/default_smp_affinity": "7"}, "CPUs 0-2"),
    ("idle", {"/sys/devices/system/cpu/cpuidle/current_driver": "intel_idle"},
     "cpuidle driver intel_idle is in use"),
    ("processor.max_cstate", {"/sys/module/processor/parameters/max_cstate": "9"}, "= 9"),
    ("nosmt", {"/sys/devices/system/cpu/smt/control": "on"}, "control = on"),
    ("nowatchdog", {"/proc/sys/kernel/watchdog": "1"}, "watchdog = 1"),
    ("mitigations", {"/sys/devices/system/cpu/vulnerabilities/spectre_v2": "Mitigation: IBRS"},
     "still mitigated: spectre_v2"),
    ("skew_tick", {"/proc/cmdline": "console=ttyS0 skew_tick=0"}, "skew_tick=0"),
])
def test_not_in_effect(param: str, over: dict[str, str | None], evidence: str) -> None:
    (check,) = verify_boot({param: PARAMS[param]}, files(**over))
    assert check.in_effect is False, check
    assert evidence in check.evidence, check


@pytest.mark.parametrize(("param", "over"), [
    ("nosmt", {"/sys/devices/system/cpu/smt/control": "notsupported"}),
    ("rcu_nocbs", {"/proc/20/task/20/stat": None, "/proc/21/task/21/stat": None}),
    ("processor.max_cstate", {"/sys/module/processor/parameters/max_cstate": None}),
    ("isolcpus", {"/proc/cmdline": None}),
])
def test_cannot_tell_is_not_yes(param: str, over: dict[str, str | None]) -> None:
    (check,) = verify_boot({param: PARAMS[param]}, files(**over))
    assert check.in_effect is None, check


def test_a_parameter_missing_from_the_cmdline_is_not_in_effect_whatever_the_state() -> None:
    (check,) = verify_boot({"isolcpus": "1-2"},
                           files(**{"/proc/cmdline": "console=ttyS0 quiet"}))
    assert (check.in_effect, check.evidence) == (False, "not on /proc/cmdline (absent)")


def test_tasks_on_isolated_cpus_are_the_ordinary_unpinned_ones() -> None:
    f = files(**{
        "/proc/1/task/1/stat": stat(1, "init", 1),
        "/proc/1/task/1/status": "Name:\tinit\nCpus_allowed_list:\t0-3\n",
        "/proc/9/task/9/stat": stat(9, "sh", 0),  # ran on a housekeeping CPU
        "/proc/9/task/9/status": "Cpus_allowed_list:\t0-3\n",
        "/proc/30/task/31/stat": stat(30, "rt-worker", 2),  # pinned there on purpose
        "/proc/30/task/31/status": "Cpus_allowed_list:\t2\n",
        "/proc/40/task/40/stat": stat(40, "ksoftirqd/1", 1, 0x04208040),  # a kthread
        "/proc/40/task/40/status": "Cpus_allowed_list:\t1\n",
        "/proc/50/task/52/stat": stat(50, "a thread", 2),
        "/proc/50/task/52/status": "Cpus_allowed_list:\t1-3\n",
    })
    found = tasks_on([1, 2], f)
    assert [(t.pid, t.tid, t.comm, t.cpu, t.allowed) for t in found] == [
        (1, 1, "init", 1, "0-3"), (50, 52, "a thread", 2, "1-3")]
    assert found[1].describe() == "a thread (pid 50, tid 52) on CPU 2, allowed 1-3"
    assert tasks_on([3], f) == []
