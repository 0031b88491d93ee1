# SPDX-License-Identifier: MIT
from __future__ import annotations

from pathlib import Path

import pytest

from rtlab.analysis.slo import evaluate_slo, parse_slo
from rtlab.errors import UsageError
from rtlab.exitcodes import ExitCode
from rtlab.probes.registry import shape as probe_shape
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
    ok = evaluate_slo(parse_slo("max < 1ms and p99 < 100us and missed <= 0"), r,
                      shape_of=probe_shape)
    assert ok.passed and len(ok.outcomes) == 6
    bad = evaluate_slo(parse_slo("p50 < 5us"), r, shape_of=probe_shape)
    assert not bad.passed and len(bad.failures) == 2
    assert "violated" in bad.summary()


def test_unsupported_percentile_fails() -> None:
    r = synthetic_result(windows=2, per_window=1000)  # 2000 samples per channel
    rep = evaluate_slo(parse_slo("p99.99 < 1s"), r, shape_of=probe_shape)
    assert not rep.passed
    assert "cannot support p99.99" in rep.outcomes[0].reason


@pytest.mark.parametrize(("text", "words"), [
    ("max > 50us and max < 10us", ["max > 50us and max < 10us cannot both hold"]),
    ("p99 < 5us and p99 > 10us", ["p99 > 10us and p99 < 5us"]),
    ("p99.9 < 10us and p99 > 20us", ["p99 > 20us and p99.9 < 10us", "p99 <= p99.9"]),
    ("min > 5us and max < 5us", ["min <= max"]),
    ("min >= 5us and p50 < 5us", ["min <= p50"]),
    ("avg >= 1ms and max <= 999us", ["avg <= max"]),
    ("max < 0ns", ["never negative"]),
    ("missed < 0", ["count is never negative"]),
    ("MAX>=2us and max<2us", ["max >= 2us and max < 2us"]),
])
def test_slo_that_can_never_be_met_is_a_usage_error(text: str, words: list[str]) -> None:
    with pytest.raises(UsageError) as exc:
        parse_slo(text)
    line = exc.value.one_line()
    assert exc.value.code == ExitCode.USAGE and "\n" not in line
    assert "can never be met" in line and all(w in line for w in words), line


@pytest.mark.parametrize("text", [
    "min >= 5us and max <= 5us",  # every sample exactly 5 us
    "p99 < 5us and p99.9 > 10us",  # a long tail
    "mode > 10us and max < 5us",  # the mode is a bucket midpoint: not bounded by max
    "avg > 10us and p50 < 5us",
    "max <= 0ns and missed <= 0",
    "missed > 3 and max < 1us",
])
def test_slo_that_some_run_can_meet_is_accepted(text: str) -> None:
    assert len(parse_slo(text).clauses) == 2


def test_never_met_slo_is_refused_by_the_cli_before_any_work(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from rtlab.cli import main

    store = tmp_path / "s.db"
    for cmd in (["report", "nosuchrun"], ["compare", "nosuchrun", "other"]):
        assert main([*cmd, "--store", str(store), "--slo", "p99.9 < 10us and p99 > 20us"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "can never be met" in err and "Traceback" not in err
    assert not store.exists() and list(tmp_path.iterdir()) == []
