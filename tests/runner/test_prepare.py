# SPDX-License-Identifier: MIT
"""rtlab.runner.prepare: the run decided before anything starts (the CLI only builds
the RunRequest)."""

from __future__ import annotations

import pytest

from rtlab.errors import UsageError
from rtlab.runner.prepare import RunRequest, prepare, resolve_priority


def test_priority_rules() -> None:
    assert resolve_priority(None, "fifo") == 99 and resolve_priority(None, "rr") == 99
    assert resolve_priority(None, "other") == 0 and resolve_priority(None, None) is None
    assert resolve_priority(50, "fifo") == 50
    with pytest.raises(UsageError, match="--priority 120 out of range"):
        resolve_priority(120, None)


def test_quick_scenario_with_overrides() -> None:
    sfile, variants = prepare(RunRequest(duration="2s", cpus="0", policy="fifo",
                                         trace_threshold="50us"), [0, 1])
    assert not sfile.has_matrix and len(variants) == 1
    sc = variants[0]
    assert sum(p.duration_ns for p in sc.phases) == 2_000_000_000
    assert all(p.probe.cpus == [0] for p in sc.phases)
    assert all(p.probe.options.get("priority") == 99 for p in sc.phases)
    assert sc.trace is not None and sc.trace.threshold_ns == 50_000


def test_probe_requests_refuse_scenario_things() -> None:
    with pytest.raises(UsageError, match="either a SCENARIO"):
        prepare(RunRequest(scenario="quick", probe="timer"), [0, 1])
    with pytest.raises(UsageError, match="--probe-opt needs --probe"):
        prepare(RunRequest(probe_opts=("x=1",)), [0, 1])
    with pytest.raises(UsageError, match="--variant nope: no such variant"):
        prepare(RunRequest(variants=("nope",)), [0, 1])
    _, [sc] = prepare(RunRequest(probe="timer", cpus="1", duration="1s"), [0, 1])
    assert [p.probe.name for p in sc.phases] == ["timer"]
