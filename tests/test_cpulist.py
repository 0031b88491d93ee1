# SPDX-License-Identifier: MIT
"""The one CPU-list and CPU-mask parser (rtlab/cpulist.py) and how each caller words
its errors from it."""

from __future__ import annotations

import pytest

from rtlab.cpulist import (
    CpuListError,
    format_cpulist,
    format_cpumask,
    parse_cpulist,
    parse_cpumask,
)
from rtlab.errors import UsageError
from rtlab.loads.params import parse_cpulist as load_cpulist
from rtlab.scenario.cpus import CpuExprError, expand
from rtlab.scenario.units import parse_cpu_list


def test_lists() -> None:
    assert parse_cpulist("0-3,8,10-11") == [0, 1, 2, 3, 8, 10, 11]
    assert parse_cpulist(" 3 , 1 - 2 ,1") == [1, 2, 3]  # blanks, repeats, any order
    assert parse_cpulist("") == [] and parse_cpulist("  \n") == []
    assert parse_cpulist("0-7:2", strides=True) == [0, 2, 4, 6]
    assert format_cpulist(parse_cpulist("6,0-3")) == "0-3,6"


@pytest.mark.parametrize("text,reason,item", [
    ("a", "bad_item", "a"), ("1-", "bad_item", "1-"), ("-1", "negative", "-1"),
    ("0, -3", "negative", "-3"), ("1,", "empty_item", ""),
    ("1,,2", "empty_item", ""), ("0,3-1", "reversed", "3-1"),
    ("0-7:2", "bad_item", "0-7:2"),  # strides only when asked for
    ("0,9000", "too_big", "9000"),
])
def test_errors_name_the_item(text: str, reason: str, item: str) -> None:
    with pytest.raises(CpuListError) as exc:
        parse_cpulist(text, limit=8192)
    assert (exc.value.reason, exc.value.item) == (reason, item)


def test_strides_need_a_positive_step() -> None:
    with pytest.raises(CpuListError):
        parse_cpulist("0-7:0", strides=True)


def test_kernel_wording() -> None:
    assert str(CpuListError("reversed", " 3-1 ", "0,3-1")) == "descending CPU range '3-1'"
    assert str(CpuListError("too_big", "9000", "9000", 9000)) == \
        "CPU 9000 is out of range in CPU list '9000' (CPUs are 0-8191)"


def test_huge_lists_are_refused_short() -> None:
    """A range up to a huge CPU is refused before its set is built, and a 1-MB list is
    quoted cut (one short line)."""
    with pytest.raises(CpuListError) as exc:
        parse_cpulist("0-99999999999999999999", strides=True)
    assert exc.value.reason == "too_big"
    with pytest.raises(CpuListError) as exc:
        parse_cpulist("1," * 500_000 + "x")
    assert exc.value.reason == "bad_item" and len(str(exc.value)) < 200


def test_masks() -> None:
    assert parse_cpumask("f") == [0, 1, 2, 3]
    assert parse_cpumask("00000008,00000001") == [0, 35]
    assert format_cpumask({0, 1}) == "3" and format_cpumask(set()) == "0"
    assert format_cpumask({35}) == "00000008,00000000"
    assert format_cpumask([1], full_words=True) == "00000002"
    for cpus in ([0], [5, 31, 32, 63, 64, 200], []):
        assert parse_cpumask(format_cpumask(cpus)) == cpus


def test_each_caller_keeps_its_wording() -> None:
    """Load parameters, scenario CPU expressions and the CLI's --cpus word their errors
    as before the parsers became one."""
    with pytest.raises(ValueError, match=r"'3-1' is not a CPU list \(range 3-1 goes back"):
        load_cpulist("3-1")
    with pytest.raises(ValueError, match=r"'x' is not a CPU list \(e.g. 0-3,6\)"):
        load_cpulist("x")
    assert load_cpulist("0-1") == (0, 1)
    with pytest.raises(CpuExprError, match=r"'3-1': range '3-1' is reversed"):
        expand("3-1", [0, 1, 2, 3])
    with pytest.raises(CpuExprError, match="is not a CPU expression"):
        expand("1;2", [0, 1, 2, 3])
    with pytest.raises(UsageError, match=r"invalid CPU list '1-': bad item '1-'"):
        parse_cpu_list("1-")
    with pytest.raises(UsageError, match="CPU 9000 is out of range"):
        parse_cpu_list("0,9000")
    with pytest.raises(UsageError, match="empty CPU list"):
        parse_cpu_list("")
    with pytest.raises(UsageError, match="CPU 3 is not online"):
        parse_cpu_list("0,3", [0, 1])
