# SPDX-License-Identifier: MIT
"""Scenario matrices (issue 12, item 5): a size cap refused with one line (exit 2) before
the checks start, and checks whose work grows linearly with the number of variants.

Wall time is not asserted here (bench/scenario_matrix.py measures it): the linearity
test counts the Python function calls that parsing makes, which does not depend on how
busy the machine is.
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

from scenario_matrix import matrix_text

from rtlab.cli import main
from rtlab.errors import UsageError
from rtlab.scenario import parse_text, sections

HEAD = """\
[scenario]
name = "big"

[shield]
user = "last"
system = "first"

[[load]]
name = "hog"
kind = "stress"
cpu = 1
cpus = "system"

[[phase]]
name = "idle"
duration = "1s"
loads = ["hog"]
"""
HEAD_LINES = HEAD.count("\n")


def matrix(n: int) -> str:
    """n variants, the four kinds in turn (bench/scenario_matrix.py's writer): each
    variant starts with a blank line and its header, so variant i's header is on line
    HEAD_LINES + 2 + 3*i (+1 per extra key)."""
    return matrix_text(n, HEAD)


def header_line(text: str, index: int) -> int:
    lines = text.splitlines()
    found = [i + 1 for i, ln in enumerate(lines) if ln == "[[matrix.variant]]"]
    return found[index]


def test_matrix_at_the_cap_resolves_every_variant() -> None:
    n = sections.MAX_VARIANTS
    sf = parse_text(matrix(n), "big.toml", online=[0, 1])
    assert [sc.variant for sc in sf.variants] == [f"v{i}" for i in range(n)]
    assert sf.has_matrix
    kinds = [sf.variants[i] for i in range(4)]
    assert kinds[0].shield is not None and not kinds[0].shield.irqs
    assert kinds[1].shield is None
    assert [ld.name for ld in kinds[2].loads] == [] and kinds[2].phases[0].load == "idle"
    assert kinds[3].shield is not None and kinds[3].shield.irqs
    last = sf.variants[-1]  # n - 1 = 999: kind 3
    assert last.variant == f"v{n - 1}" and last.shield is not None and last.shield.irqs


def test_matrix_over_the_cap_is_one_line_naming_the_first_extra_variant() -> None:
    n = sections.MAX_VARIANTS + 1
    text = matrix(n)
    with pytest.raises(UsageError) as info:
        parse_text(text, "big.toml", online=[0, 1])
    line = header_line(text, sections.MAX_VARIANTS)
    assert info.value.one_line() == (
        f"big.toml:{line}: matrix.variant: {n} variants; allowed: at most "
        f"{sections.MAX_VARIANTS} per file (split the matrix into several files)")


def test_inline_variants_over_the_cap_are_refused_too() -> None:
    """Variants given as an inline array have no [[matrix.variant]] headers to count
    before the TOML parse; the count after it still refuses them."""
    n = sections.MAX_VARIANTS + 5
    inline = ", ".join(f'{{ name = "v{i}" }}' for i in range(n))
    with pytest.raises(UsageError, match=rf"^big.toml: matrix.variant: {n} variants; "):
        parse_text(HEAD + f"\n[matrix]\nvariant = [{inline}]\n", "big.toml", online=[0, 1])


def test_cli_check_over_the_cap_exit_2_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    f = tmp_path / "big.toml"
    text = matrix(20_000)  # never parsed as TOML: refused from its headers
    f.write_text(text)
    code = main(["scenarios", "check", str(f)])
    out, err = capsys.readouterr()
    assert code == 2
    assert out == ""
    assert err.strip().splitlines() == [
        f"rtlab: error: {f}:{header_line(text, sections.MAX_VARIANTS)}: matrix.variant: 20000 "
        f"variants; allowed: at most {sections.MAX_VARIANTS} per file (split the matrix into "
        "several files)"]


def test_duplicate_variant_name_names_both() -> None:
    text = matrix(6).replace('name = "v4"', 'name = "v1"')
    with pytest.raises(UsageError) as info:
        parse_text(text, "dup.toml", online=[0, 1])
    assert info.value.one_line() == (
        f"dup.toml:{header_line(text, 4) + 1}: matrix.variant[4].name: duplicate variant "
        "name 'v1' (also matrix.variant[1])")


def _calls(text: str) -> int:
    """Python function calls made while parsing `text` (deterministic, unlike time)."""
    count = 0

    def profile(_frame: FrameType, event: str, _arg: Any) -> None:
        nonlocal count
        if event == "call":
            count += 1

    sys.setprofile(profile)
    try:
        parse_text(text, "big.toml", online=[0, 1])
    finally:
        sys.setprofile(None)
    return count


def test_checks_grow_linearly_with_the_variants() -> None:
    """Twice the variants, about twice the work: a check comparing every variant with
    every other one (the pairwise duplicate-name check that made 200,000 variants run
    for minutes) would make the larger file cost ~3.4 times the smaller one here."""
    parse_text(matrix(4), "warm.toml", online=[0, 1])  # imports, regex caches
    half = sections.MAX_VARIANTS // 2
    small, large = _calls(matrix(half)), _calls(matrix(2 * half))
    assert large <= 2.1 * small, (small, large)
