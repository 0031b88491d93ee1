# SPDX-License-Identifier: MIT
"""`rtlab board`: what rtlab keeps on a board (its engine), shown or removed."""

from __future__ import annotations

import argparse
import json

from rtlab.cli.options import add_target_args
from rtlab.engine.board import SshTransport, connection
from rtlab.engine.provision import clean
from rtlab.engine.ssh import SshTarget
from rtlab.errors import RtlabError, SkippedError, UsageError
from rtlab.exitcodes import ExitCode
from rtlab.system.journal_files import journal_dir
from rtlab.system.lock_cleanup import clean_lock


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "board",
        help="a board reached over SSH: copy/check its engine (info) or remove it (clean)",
        description="`rtlab board info --target B` connects, puts the static engine for B's "
        "architecture in place (only when it is not there yet) and shows what it found. "
        "`rtlab board clean --target B` removes every engine and kept raw file rtlab wrote "
        "on B (its --engine-dir, default /tmp/rtlab.UID), and the directory, and the "
        "target lock /run/rtlab/target.lock with its directory when nothing holds it and "
        "no journal of system changes is pending there (pending journals are kept: "
        "`rtlab restore --target B` applies them). While a run or shield holds B, it "
        "refuses and removes nothing. Exit codes: 0 ok, 1 error (B in use, unreachable, "
        "login refused, unknown host key), 2 usage, 4 no engine for the board's "
        "architecture or it does not run there.",
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
        return _clean(args)
    transport = SshTransport(args.target, engine_dir=args.engine_dir)
    try:
        from rtlab.system.facts import read_preemption

        board = transport.board
        info = board.describe()
        # which binary runs there: the local build it was copied from (libc, toolchain,
        # size, digest; the board's copy is named by the digest's first 16 digits)
        info["engine_libc"] = board.version.libc
        info["engine_build"] = _local_build(board.machine)
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
    print(f"  engine {info['engine']} ({info['engine_arch']}, {info['engine_version']}, "
          f"{info['engine_libc'] or 'libc not reported'}; "
          + ("copied now" if info["copied"] else "already there") + ")")
    local = info["engine_build"]
    if isinstance(local, dict):
        made = ", ".join(str(x) for x in (local["libc"], local["toolchain"]) if x)
        print(f"  built {made or '(build not recorded)'}, {local['size']:,} B, "
              f"sha256 {str(local['sha256'])[:16]}, from {local['path']}")
    print(f"  remove it with: rtlab board clean --target {args.target}")
    return int(ExitCode.OK)


def _local_build(machine: str) -> dict[str, object] | None:
    """The local engine file that was (or would be) copied to this board."""
    from rtlab.engine.builds import build_arch, engine_build, engine_for

    arch = build_arch(machine)
    if arch is None:
        return None
    try:
        return engine_build(engine_for(machine), arch).describe()
    except (RtlabError, OSError):
        return None


def _clean(args: argparse.Namespace) -> int:
    """The target lock and its directory first (the board's engine checks that nothing
    holds it: a held board refuses here, before anything is removed), then the files."""
    SshTarget.parse(args.target)
    try:
        transport = SshTransport(args.target, engine_dir=args.engine_dir)
    except SkippedError as exc:  # no engine runs there: rtlab made no lock there either
        transport, skipped = None, exc.message
    else:
        skipped = None
    try:
        if transport is not None:
            lock = clean_lock(transport, journal_dir(transport))
            where = clean(transport.conn, args.engine_dir)
        else:
            lock = None
            with connection(args.target) as conn:
                where = clean(conn, args.engine_dir)
    finally:
        if transport is not None:
            transport.close()
    if args.json:
        print(json.dumps({"schema": 1, "target": args.target, "removed": str(where),
                          "lock": lock.to_dict() if lock is not None else None,
                          "lock_not_checked": skipped}, indent=1))
        return int(ExitCode.OK)
    also = ""
    if lock is not None and (lock.lock_removed or lock.dir_removed):
        gone = [p for p, done in ((lock.lock, lock.lock_removed),
                                  (lock.directory, lock.dir_removed)) if done]
        also = f", and {' and '.join(gone)}"
    print(f"removed rtlab's engine and kept files on {args.target} ({where}){also}")
    if lock is not None and lock.kept:
        print(f"  {lock.kept}")
    if skipped:
        print(f"  the target lock was not checked: {skipped}")
    return int(ExitCode.OK)
