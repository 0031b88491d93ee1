# SPDX-License-Identifier: MIT
"""`rtlab restore`: undo the system changes left by a crashed or killed run."""

from __future__ import annotations

import argparse
import sys

from rtlab.cli.options import add_target_args
from rtlab.engine.board import open_target
from rtlab.exitcodes import ExitCode
from rtlab.fileio import check_directory
from rtlab.system.applier import hold_target
from rtlab.system.journal_files import (
    JournalInfo,
    RestoreReport,
    journal_dir,
    journals,
    restore_journal,
)
from rtlab.system.target_lock import LockHolder


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "restore",
        help="undo system changes left behind (stale journals in /run/rtlab)",
        description="Restore every journal in /run/rtlab (or $RTLAB_JOURNAL_DIR) that no live "
        "rtlab process holds: changes left by `kill -9`, a crash, or a persistent "
        "`rtlab shield`. With --target, the journals on that board (kept there, in "
        "/run/rtlab) are restored by the board's engine.",
    )
    p.add_argument("--journal-dir", default=None, help=argparse.SUPPRESS)
    add_target_args(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:

    given = (check_directory(args.journal_dir, "--journal-dir")
             if args.journal_dir is not None else None)  # before connecting
    with open_target(args.target, args.engine_dir) as target:
        directory = given or journal_dir(target)
        on = "" if target.is_local else f" on {target.target}"
        found = journals(directory, target)
        for j in found:
            if j.held and (j.entries or j.owner is None):
                who = (LockHolder(str(j.path), True, j.pid, j.owner).who()
                       if j.owner else f"pid {j.pid}")
                print(f"{j.path}{on}: held by a running session ({who}); "
                      "it restores by itself")
        if not any(j.stale for j in found):
            print(f"nothing to restore{on}")
            return int(ExitCode.OK)
        # own the target while restoring: refused (one line naming the holder) while a
        # run or shield owns it; waits for a dead run's applier that is still restoring
        with hold_target(target, directory, "restore"):
            stale = [j for j in journals(directory, target) if j.stale]
            code = ExitCode.OK
            for j in stale:
                rep = restore_journal(target, j.path)
                line = _outcome(j, rep, on)
                print(line, file=sys.stdout if rep.ok else sys.stderr)
                if not rep.ok:
                    code = ExitCode.ERROR
            if not stale:
                print(f"nothing to restore{on}")
        return int(code)


def _outcome(j: JournalInfo, rep: RestoreReport, on: str) -> str:
    """One line per journal: "restored" only when a change was undone; a journal that
    could not be restored (corrupt, foreign, unreadable) is an error line for stderr."""
    if j.detached:
        what = "persistent shield"
    elif j.pid is not None:
        what = f"session of pid {j.pid}"
    else:
        what = "journal"
    if rep.error is not None:
        return f"rtlab: error: {what}{on} not restored: {rep.summary()}"
    if rep.failed:
        return (f"rtlab: error: {what}{on} restored only in part ({rep.restored} of "
                f"{rep.restored + rep.failed} change(s)): {rep.summary()}")
    if rep.restored or rep.gone or rep.skipped:
        return f"restored {what}{on}: {rep.summary()}"
    return f"nothing to undo in {what}{on} ({rep.journal}): no change was recorded"
