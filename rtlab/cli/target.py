# SPDX-License-Identifier: MIT
"""`--target` and `--engine-dir`: the options of every command that reads or changes a
system (docs/boards.md)."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import contextmanager

from rtlab.engine.board import transport_for
from rtlab.engine.transport import Transport


def add_target_args(p: argparse.ArgumentParser, *, repeat: bool = False) -> None:
    help_ = ("the board to work on: [USER@]HOST[:PORT] or an alias of ~/.ssh/config, reached "
             "with your OpenSSH client (key-based login; nothing is asked for); `local` or none: "
             "this machine")
    if repeat:
        p.add_argument("--target", metavar="TARGET", action="append", default=[],
                       help=help_ + "; repeat it to measure several boards in parallel")
    else:
        p.add_argument("--target", metavar="TARGET", default=None, help=help_)
    p.add_argument("--engine-dir", metavar="DIR", default=None,
                   help="where the engine is kept on the board (default /tmp/rtlab.UID; "
                   "`rtlab board clean` removes it)")


@contextmanager
def open_target(target: str | None, engine_dir: str | None = None) -> Iterator[Transport]:
    """The target as a Transport for the duration of a command (its SSH connection is
    closed at the end, whatever happens)."""

    transport = transport_for(target, engine_dir=engine_dir)
    try:
        yield transport
    finally:
        transport.close()
