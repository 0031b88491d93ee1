# SPDX-License-Identifier: MIT
"""`rtlab restore`: undo the system changes left by a crashed or killed run."""

from __future__ import annotations

import argparse
from pathlib import Path

from rtlab.exitcodes import ExitCode


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "restore",
        help="undo system changes left behind (stale journals in /run/rtlab)",
        description="Restore every journal in /run/rtlab (or $RTLAB_JOURNAL_DIR) that no live "
        "rtlab process holds: changes left by `kill -9`, a crash, or a persistent "
        "`rtlab shield`.",
    )
    p.add_argument("--journal-dir", type=Path, default=None, help=argparse.SUPPRESS)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from rtlab.engine.locate import find_probe
    from rtlab.system import journal as jr

    directory = args.journal_dir or jr.journal_dir()
    stale = jr.stale_journals(directory)
    live = [j for j in jr.journals(directory) if j.held]
    for j in live:
        print(f"{j.path}: held by a running session (pid {j.pid}); it restores by itself")
    if not stale:
        print("nothing to restore")
        return int(ExitCode.OK)
    probe = [str(find_probe())]
    code = ExitCode.OK
    for j in stale:
        what = "persistent shield" if j.detached else f"session of pid {j.pid}"
        rep = jr.restore_journal(probe, j.path)
        print(f"restored {what}: {rep.summary()}")
        if not rep.ok:
            code = ExitCode.ERROR
    return int(code)
