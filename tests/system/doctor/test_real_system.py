# SPDX-License-Identifier: MIT
"""Every check against the machine running the tests: no crash, facts that match."""

from __future__ import annotations

import json
from pathlib import Path

from rtlab.system.doctor import CHECKS, Severity, run_checks, top_findings


def _by_id() -> dict:
    return {f.check: f for f in run_checks("/")}


def test_all_checks_run_and_serialize() -> None:
    findings = run_checks("/")
    assert findings, "no findings"
    for f in findings:
        assert "check failed" not in f.summary, f.to_dict()
        if f.severity in (Severity.WARNING, Severity.CRITICAL):
            assert f.advice, f.check
        assert f.why
    json.dumps([f.to_dict() for f in findings])
    ids = {c.id for c in CHECKS}
    assert {f.check for f in findings} <= ids


def test_known_facts_of_this_machine() -> None:
    got = _by_id()
    if not Path("/sys/kernel/realtime").exists():
        assert got["preempt"].severity in (Severity.WARNING, Severity.CRITICAL)
        assert got["preempt"].facts["model"] != "rt"
    if "hypervisor" in Path("/proc/cpuinfo").read_text():
        assert got["virt"].severity is Severity.WARNING
    runtime = int(Path("/proc/sys/kernel/sched_rt_runtime_us").read_text())
    assert got["rt-throttle"].facts["runtime_us"] == runtime
    if runtime == 950000:
        assert got["rt-throttle"].severity is Severity.INFO
    has_swap = len(Path("/proc/swaps").read_text().strip().splitlines()) > 1
    assert got["swap"].severity is (Severity.WARNING if has_swap else Severity.OK)


def test_cpus_narrowing_and_top_findings() -> None:
    findings = run_checks("/", cpus=[0])
    assert findings
    top = top_findings(findings, 2)
    assert len(top) <= 2
    assert all(f.severity.rank >= Severity.WARNING.rank for f in top)
    ranks = [f.severity.rank for f in top]
    assert ranks == sorted(ranks, reverse=True)
