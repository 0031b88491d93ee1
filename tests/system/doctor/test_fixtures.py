# SPDX-License-Identifier: MIT
"""Checks against fixture trees of systems this machine is not."""

from __future__ import annotations

import pytest

from rtlab.system.doctor import Code, Severity, run_checks

from .conftest import FIXTURES

CASES = [
    # fixture, cpus, check, severity, code
    ("rt-isolated", None, "preempt", Severity.OK, Code.PREEMPT_RT),
    ("rt-isolated", [2, 3], "isolation", Severity.OK, None),
    ("rt-isolated", [0, 2], "isolation", Severity.WARNING, Code.CPUS_NOT_ISOLATED),
    ("rt-isolated", None, "cpufreq", Severity.OK, None),
    ("rt-isolated", None, "rt-throttle", Severity.INFO, Code.RT_THROTTLING_OFF),
    ("rt-isolated", [2, 3], "irq-affinity", Severity.WARNING, Code.IRQ_ON_ISOLATED),
    ("rt-isolated", None, "workqueue", Severity.WARNING, Code.WORKQUEUE_ON_ISOLATED),
    ("rt-isolated", None, "thp", Severity.OK, None),
    ("rt-isolated", None, "clocksource", Severity.OK, None),
    ("isol-not-in-effect", None, "isolation", Severity.CRITICAL, Code.ISOLATION_NOT_IN_EFFECT),
    ("isol-not-in-effect", None, "hz-tick", Severity.WARNING, Code.NOHZ_FULL_NOT_BUILT),
    ("isol-not-in-effect", None, "preempt", Severity.WARNING, Code.PREEMPT_FULL),
    ("untuned-desktop", None, "preempt", Severity.CRITICAL, Code.PREEMPT_NONE),
    ("untuned-desktop", [2], "smt", Severity.WARNING, Code.SMT_SIBLING_BUSY),
    ("untuned-desktop", [2], "cache", Severity.INFO, Code.CACHE_SHARED),
    ("untuned-desktop", None, "idle", Severity.WARNING, Code.DEEP_IDLE_STATES),
    ("untuned-desktop", None, "cpufreq", Severity.WARNING, Code.CPUFREQ_GOVERNOR),
    ("untuned-desktop", None, "rt-group", Severity.CRITICAL, Code.RT_GROUP_ZERO),
    ("untuned-desktop", None, "rt-privileges", Severity.WARNING, Code.NO_RT_PRIORITY),
    ("untuned-desktop", None, "thp", Severity.WARNING, Code.THP_ALWAYS),
    ("untuned-desktop", None, "swap", Severity.WARNING, Code.SWAP_ON),
    ("untuned-desktop", None, "irqbalance", Severity.WARNING, Code.IRQBALANCE_RUNNING),
    ("untuned-desktop", None, "clocksource", Severity.WARNING, Code.TSC_UNSTABLE),
    ("untuned-desktop", None, "watchdog", Severity.WARNING, Code.NMI_WATCHDOG),
]


@pytest.mark.parametrize(
    ("tree", "cpus", "check", "severity", "code"),
    CASES,
    ids=[f"{c[0]}-{c[2]}-{c[3].value}" for c in CASES],
)
def test_fixture_case(tree: str, cpus, check: str, severity: Severity, code) -> None:
    found = {f.check: f for f in run_checks(str(FIXTURES / tree), cpus)}
    f = found[check]
    assert f.severity is severity, f.to_dict()
    if code is not None:
        assert code in f.codes
    if severity in (Severity.WARNING, Severity.CRITICAL):
        assert f.advice, f.to_dict()


def test_missing_files_are_unknown_not_errors() -> None:
    for f in run_checks(str(FIXTURES / "isol-not-in-effect")):
        assert "check failed" not in f.summary, f.to_dict()
    found = {f.check: f for f in run_checks(str(FIXTURES / "isol-not-in-effect"))}
    assert found["clocksource"].severity is Severity.UNKNOWN


def test_rt_group_advice_names_the_group() -> None:
    f = {f.check: f for f in run_checks(str(FIXTURES / "untuned-desktop"))}["rt-group"]
    assert f.facts["rt_runtime_us"]["/user.slice/user-1000.slice"] == 0
    assert "cpu.rt_runtime_us" in (f.advice or "")


def test_isolation_advice_keeps_a_housekeeping_cpu() -> None:
    """Regression: measuring every CPU suggested isolcpus=0-3 together with irqaffinity=0."""
    f = {f.check: f for f in run_checks(str(FIXTURES / "untuned-desktop"), [0, 1, 2, 3])}
    advice = f["isolation"].advice or ""
    assert "isolcpus=nohz,domain,managed_irq,1-3 " in advice
    assert "nohz_full=1-3 rcu_nocbs=1-3 irqaffinity=0" in advice
