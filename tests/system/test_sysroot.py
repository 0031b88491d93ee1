# SPDX-License-Identifier: MIT
from __future__ import annotations

import pytest

from rtlab.cpulist import format_cpulist, parse_cpulist, parse_cpumask
from rtlab.errors import UsageError
from rtlab.system.sysroot import SysRoot, parse_cmdline


def test_cpulist_round_trip() -> None:
    assert parse_cpulist("0-3,8,10-11") == [0, 1, 2, 3, 8, 10, 11]
    assert parse_cpulist("0-7:2", strides=True) == [0, 2, 4, 6]
    assert parse_cpulist("") == []
    assert format_cpulist([11, 0, 1, 2, 8, 10]) == "0-2,8,10-11"


@pytest.mark.parametrize("bad", ["a", "3-1", "1,,2", "-1", "1-"])
def test_cpulist_rejects(bad: str) -> None:
    with pytest.raises(ValueError):
        parse_cpulist(bad, strides=True)


def test_cpumask_and_cmdline() -> None:
    assert parse_cpumask("f") == [0, 1, 2, 3]
    assert parse_cpumask("1,00000000") == [32]
    params = parse_cmdline("quiet isolcpus=2-3 preempt=none preempt=full -- init=x")
    assert params == {"quiet": None, "isolcpus": "2-3", "preempt": "full"}


def test_bad_root(tmp_path) -> None:
    with pytest.raises(UsageError):
        SysRoot(str(tmp_path / "nope"))
    with pytest.raises(UsageError):
        SysRoot(str(tmp_path))  # neither proc/ nor sys/


def test_read_reports_missing(tmp_path) -> None:
    (tmp_path / "proc").mkdir()
    s = SysRoot(str(tmp_path))
    assert s.read("proc/cmdline") is None
    assert s.last_error is not None and s.last_error.reason == "missing"
    assert not s.live
