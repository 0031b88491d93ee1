# SPDX-License-Identifier: MIT
"""Options that contradict each other, and journals that cannot be restored: refused in
one line, before anything is measured, created or changed."""

from __future__ import annotations

import pytest

from tests.conftest import machine_lock
from tests.hostile.conftest import Hostile, check
from tests.hostile.xfails import marks

# (id, argv, words of the one line); {NAME} are the case's paths and seeded runs
CONFLICTS: list[tuple[str, list[str], str]] = [
    ("run-no-report-and-report",
     ["run", "--no-report", "--report", "{HOME}/r.html", "--no-shield", "--duration", "1s",
      "--cpus", "{CPU}"], "--report"),
    ("run-two-durations",
     ["run", "--probe", "timer", "--probe-opt", "duration=1h", "--duration", "1s",
      "--no-shield", "--cpus", "{CPU}", "--no-report"], "duration"),
    ("run-scenario-and-probe", ["run", "quick", "--probe", "timer", "--no-report"], "--probe"),
    ("run-report-and-junit-one-file",
     ["run", "--report", "{HOME}/same", "--junit", "{HOME}/same", "--no-shield",
      "--duration", "1s", "--cpus", "{CPU}"], "same"),
    ("run-trace-on-a-board-that-is-not-there",
     ["run", "--trace", "--target", "a b", "--duration", "1s", "--no-report"], "--target"),
    ("shield-reset-with-exclude", ["shield", "--reset", "--exclude", "5",
                                   "--journal-dir", "{JOURNAL}"], "--exclude"),
    ("shield-cpus-and-status", ["shield", "--cpus", "1", "--status",
                                "--journal-dir", "{JOURNAL}"], "--status"),
    ("monitor-noise-with-priority",
     ["monitor", "--probe", "noise", "--priority", "90", "--quiet", "--duration", "1s",
      "--state-dir", "{HOME}/state"], "--priority"),
    ("report-output-and-junit-one-file",
     ["report", "{RUN}", "-o", "{HOME}/same", "--junit", "{HOME}/same"], "same"),
    ("compare-timer-with-udp", ["compare", "{RUN}", "{UDP}"], "udp"),
    ("report-impossible-slo", ["report", "{RUN}", "--slo", "max > 50us and max < 10us"],
     "SLO"),
]
SYSTEM = ("shield", "restore")


@pytest.mark.parametrize(("argv", "words"), [
    pytest.param(a, w, id=i, marks=marks(f"combination {i}")) for i, a, w in CONFLICTS])
def test_contradicting_options_are_refused(hostile: Hostile, argv: list[str],
                                           words: str) -> None:
    from tests.hostile.conftest import resolve

    values = hostile.values()
    argv = [resolve(a, values) for a in argv]
    if argv[0] in SYSTEM:
        with machine_lock():
            out = hostile.run(argv, [hostile.store])
    else:
        out = hostile.run(argv, [hostile.store])
    check(out, 2, words)


@pytest.mark.parametrize("content", [b"garbage\n\x00\xff\n", b'{"type":"journal","pid":"x"}\n',
                                     b'{"type":"journal","schema":99,"pid":1}\n'],
                         ids=["garbage", "pid-not-a-number", "unknown-schema"])
def test_a_journal_that_cannot_be_restored_is_an_error_not_restored(
        hostile: Hostile, content: bytes) -> None:
    """`rtlab restore` of a corrupt journal: exit 1, one line on stderr that says it was
    not restored (never "restored session of pid None" on stdout), the journal kept as it
    was for a human to look at."""
    hostile.journal.mkdir()
    bad = hostile.journal / "broken.journal"
    bad.write_bytes(content)
    with machine_lock():
        out = hostile.run(["restore"], [bad])
    assert out.code == 1, out.err
    (line,) = out.err.strip().splitlines()
    assert "not restored" in line and str(bad) in line and "None" not in line, line
    assert "restored" not in out.out, out.out
    assert bad.read_bytes() == content
    # the private journal directory holds the journal (kept) and the target's lock file
    assert sorted(p.name for p in hostile.journal.iterdir()) <= ["broken.journal",
                                                                 "target.lock"]


def test_an_empty_journal_is_not_called_restored(hostile: Hostile) -> None:
    hostile.journal.mkdir()
    (hostile.journal / "empty.journal").write_bytes(b"")
    with machine_lock():
        out = hostile.run(["restore"])
    assert out.code == 0, out.err
    assert "restored" not in out.out and "nothing to undo" in out.out, out.out
    assert not list(hostile.journal.glob("*.journal"))
