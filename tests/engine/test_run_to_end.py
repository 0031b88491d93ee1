# SPDX-License-Identifier: MIT
"""run_to_end: the output of a command is text even when it is not UTF-8 (regression: a
board's shell echoed an x86_64 engine run on an aarch64 board as a script, and the
decoding raised UnicodeDecodeError: a traceback instead of the one-line refusal)."""

from __future__ import annotations

from rtlab.engine.transport import run_to_end


def test_bytes_that_are_not_utf8_are_replaced_not_raised() -> None:
    p = run_to_end(["sh", "-c", r"printf 'a\220b\n' >&2; printf 'x\377\n'"], timeout_s=30,
                   late="the test command", cannot="cannot start sh")
    assert p.returncode == 0
    assert p.stdout == "x\ufffd\n" and p.stderr == "a\ufffdb\n"


def test_bytes_stay_bytes() -> None:
    p = run_to_end(["sh", "-c", r"printf 'x\377'"], timeout_s=30, late="t", cannot="c",
                   text=False)
    assert p.stdout == b"x\xff"
