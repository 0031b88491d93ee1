# SPDX-License-Identifier: MIT
"""`rtlab board`: what rtlab keeps on a board (its engine), shown or removed."""

from __future__ import annotations

import argparse
import json

from rtlab.cli.target import add_target_args
from rtlab.engine.board import SshTransport
from rtlab.engine.provision import clean
from rtlab.engine.ssh import SshConnection, SshTarget
from rtlab.errors import UsageError
from rtlab.exitcodes import ExitCode


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "board",
        help="a board reached over SSH: copy/check its engine (info) or remove it (clean)",
        description="`rtlab board info --target B` connects, puts the static engine for B's "
        "architecture in place (only when it is not there yet) and shows what it found. "
        "`rtlab board clean --target B` removes every engine and kept raw file rtlab wrote "
        "on B (its --engine-dir, default /tmp/rtlab.UID), and the directory. Journals of "
        "system changes (/run/rtlab) are not touched: `rtlab restore --target B` applies "
        "them. Exit codes: 0 ok, 1 error (unreachable, login refused, unknown host key), "
        "2 usage, 4 no engine for the board's architecture or it does not run there.",
    )
    p.add_argument("action", choices=("info", "clean"), help="what to do")
    p.add_argument("--json", action="store_true", help="print a JSON document (info: what "
                   "was found; clean: what was removed)")
    add_target_args(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:

    if args.target in (None, "local"):
        raise UsageError(f"rtlab board {args.action} needs --target [USER@]HOST[:PORT]")
    if args.action == "clean":

        conn = SshConnection(SshTarget.parse(args.target)).open()
        try:
            where = clean(conn, args.engine_dir)
        finally:
            conn.close()
        if args.json:
            print(json.dumps({"schema": 1, "target": args.target, "removed": str(where)},
                             indent=1))
        else:
            print(f"removed rtlab's engine and kept files on {args.target} ({where})")
        return int(ExitCode.OK)
    transport = SshTransport(args.target, engine_dir=args.engine_dir)
    try:
        from rtlab.system.facts import read_preemption

        info = transport.board.describe()
        pre = read_preemption(transport)
        info["preempt"] = pre.model
        info["preempt_source"] = pre.source
        info["uname_v"] = pre.version
    finally:
        transport.close()
    if args.json:
        print(json.dumps(info, indent=1))
        return int(ExitCode.OK)
    print(f"board {args.target}: {info['machine']}, Linux {info['release']}, "
          f"preemption {info['preempt']}" + (f" ({info['preempt_source']})"
                                              if info['preempt_source'] else ""))
    print(f"  engine {info['engine']} ({info['engine_arch']}, {info['engine_version']}; "
          + ("copied now" if info["copied"] else "already there") + ")")
    print(f"  remove it with: rtlab board clean --target {args.target}")
    return int(ExitCode.OK)
