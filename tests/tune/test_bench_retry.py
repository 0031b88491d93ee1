# SPDX-License-Identifier: MIT
"""The runner's bench measures a failed block again, but never one the user stopped:
Ctrl-C before the block measured anything (the runner's "interrupted before anything
was measured", exit 130) stops the tune; an engine killed under load is retried
(regression: the retry swallowed Ctrl-C and the tune went on, exit 0)."""

from __future__ import annotations

from typing import Any

import pytest

from rtlab.errors import RtlabError
from rtlab.exitcodes import ExitCode
from rtlab.tune import bench as tbench
from rtlab.tune.search import Interrupted


def _bench() -> tbench.RunnerBench:
    return tbench.RunnerBench(target=None, scenario="tune", block_s=2, store=None,
                              tune_id="tune-x", user=[1], system=[0], base_shield=None)


def test_ctrl_c_before_anything_measured_stops_the_tune(monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    calls: list[Any] = []

    def run_job(job: Any, watch: Any) -> Any:
        calls.append(job)
        raise RtlabError("interrupted before anything was measured",
                         code=ExitCode.INTERRUPTED)

    monkeypatch.setattr(tbench, "run_job", run_job)
    monkeypatch.setattr(tbench.RunnerBench, "_energy", lambda self: {})
    with pytest.raises(Interrupted):
        _bench().measure([], "baseline")
    assert len(calls) == 1


def test_a_failed_block_is_measured_again_then_fails_with_why(
        monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[Any] = []

    def run_job(job: Any, watch: Any) -> Any:
        calls.append(job)
        raise RtlabError("the engine failed before measuring anything: killed by SIGKILL")

    monkeypatch.setattr(tbench, "run_job", run_job)
    monkeypatch.setattr(tbench.RunnerBench, "_energy", lambda self: {})
    with pytest.raises(RtlabError, match=r"failed 3 times .*killed by SIGKILL"):
        _bench().measure([], "baseline")
    assert len(calls) == tbench.ATTEMPTS


def test_a_block_error_caused_by_the_users_stop_is_not_retried(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C inside a block can surface as another error (e.g. the shield's applier,
    in the same process group, restored and exited): the run's control saw the signal,
    so the tune stops instead of measuring the block again."""
    import signal

    calls: list[Any] = []

    def run_job(job: Any, watch: Any) -> Any:
        calls.append(job)
        job.control.request(signal.SIGINT)
        raise RtlabError("applying the shield failed: the applier exited")

    monkeypatch.setattr(tbench, "run_job", run_job)
    monkeypatch.setattr(tbench.RunnerBench, "_energy", lambda self: {})
    with pytest.raises(Interrupted):
        _bench().measure([], "baseline")
    assert len(calls) == 1
