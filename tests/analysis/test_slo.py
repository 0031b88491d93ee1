# SPDX-License-Identifier: MIT
from __future__ import annotations

import pytest

from rtlab.analysis.slo import evaluate_slo, parse_slo
from rtlab.errors import UsageError
from rtlab.exitcodes import ExitCode
from tests.support.synth import synthetic_result


def test_parse_grammar() -> None:
    slo = parse_slo("max < 50us and p99.99<=20.5us AND missed <= 0 and avg > 1ns and mode>=0.01ms")
    assert [(c.metric, c.op, c.bound) for c in slo.clauses] == [
        ("max", "<", 50_000), ("p99.99", "<=", 20_500), ("missed", "<=", 0),
        ("avg", ">", 1), ("mode", ">=", 10_000)]
    assert parse_slo("p50 < 1s").clauses[0].percentile == 50.0


@pytest.mark.parametrize("text", ["", "max", "max < 50", "max < 50 parsecs", "p100 < 1us",
                                  "p0 < 1us", "jitter < 5us", "max = 5us", "missed < 2us",
                                  "max < 5us or p99 < 1us", "max < 5us and"])
def test_parse_errors_are_usage_errors(text: str) -> None:
    with pytest.raises(UsageError) as exc:
        parse_slo(text)
    assert exc.value.code == ExitCode.USAGE
    assert "\n" not in exc.value.one_line()


def test_evaluate_per_channel() -> None:
    r = synthetic_result(windows=20, median_ns=10_000, sigma=0.1)
    ok = evaluate_slo(parse_slo("max < 1ms and p99 < 100us and missed <= 0"), r)
    assert ok.passed and len(ok.outcomes) == 6
    bad = evaluate_slo(parse_slo("p50 < 5us"), r)
    assert not bad.passed and len(bad.failures) == 2
    assert "violated" in bad.summary()


def test_unsupported_percentile_fails() -> None:
    r = synthetic_result(windows=2, per_window=1000)  # 2000 samples per channel
    rep = evaluate_slo(parse_slo("p99.99 < 1s"), r)
    assert not rep.passed
    assert "cannot support p99.99" in rep.outcomes[0].reason
