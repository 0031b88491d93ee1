# SPDX-License-Identifier: MIT
"""The option table of the hostile suite covers the CLI as it is: a new option fails
here until its kind of input is known (tests/hostile/options.py CLASSES), and from then
on gets that kind's hostile cases without being listed."""

from __future__ import annotations

from tests.hostile.cases import BASES, LEFT_OUT, NEEDS, VALUES, cases
from tests.hostile.options import CLASSES, classify, walk


def test_every_option_is_classified() -> None:
    unknown = [o.key for o in walk() if classify(o) is None]
    assert not unknown, ("options the hostile suite does not know: add a rule to "
                         f"tests/hostile/options.py CLASSES: {unknown}")


def test_every_command_has_a_base_and_every_kind_has_values() -> None:
    commands = {o.command for o in walk()}
    assert commands - set(BASES) == set(), "commands without a base call in cases.py"
    assert set(BASES) - commands == set(), "base calls of commands that are gone"
    assert set(CLASSES) - set(VALUES) == {"flag"}, "kinds without hostile values"


def test_the_tables_name_only_options_that_exist() -> None:
    keys = {o.key for o in walk()}
    assert set(LEFT_OUT) - keys == set() and set(NEEDS) - keys == set()


def test_each_kind_is_exercised() -> None:
    """Every kind of input has cases (a rule that matches nothing is a stale rule)."""
    kinds = {c.kind for c in cases()}
    assert kinds == set(CLASSES)


def test_a_new_option_is_found_and_classified() -> None:
    """The discovery reads the parser itself: an option added to a command appears, and
    one that matches no rule is reported."""
    import argparse

    from rtlab.cli import build_parser
    from tests.hostile.options import Option

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    doctor = sub.choices["doctor"]
    doctor.add_argument("--new-thing", metavar="WIDGET")
    doctor.add_argument("--new-cpus", metavar="LIST")
    found = {o.key: classify(o) for o in walk(parser)}
    assert found["doctor --new-thing"] is None
    assert found["doctor --new-cpus"] == "cpus"
    assert all(isinstance(o, Option) for o in walk(parser))
