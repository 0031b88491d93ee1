# SPDX-License-Identifier: MIT
"""Putting the right engine on a board, once.

The board's `uname -m` picks the static build (`rtlab.engine.builds`); the binary is
stored content-addressed as `DIR/rtlab-probe-<sha256 prefix>` (DIR: `--engine-dir`,
`$RTLAB_ENGINE_DIR`, else `/tmp/rtlab.<uid>`), so a board that has it already is
not copied to again, and an interrupted copy never leaves a half file under that
name (it is written beside it and renamed). Before it is used, the engine on the
board is asked for its version (`rtlab-probe --version --json`): an engine of
another architecture or version is refused with one line. Nothing is written
outside DIR; `rtlab board clean` removes what was written (`clean`).

The remote commands below are fixed scripts; the directory is passed to them as a
positional parameter ("$1"), never pasted into the script text.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rtlab import __version__
from rtlab.engine.builds import check_engine, engine_for, parse_version
from rtlab.errors import RtlabError, SkippedError, UsageError

if TYPE_CHECKING:
    from rtlab.engine.builds import EngineVersion
    from rtlab.engine.ssh import SshConnection

DIR_ENV = "RTLAB_ENGINE_DIR"

_FACTS = "uname -m; id -u; uname -r"
_UPLOAD = ('umask 077 && mkdir -p "$1/runs" && cat > "$1/.upload.$$" && '
           'chmod 0755 "$1/.upload.$$" && mv -f "$1/.upload.$$" "$2"')
_CLEAN = ('rm -f "$1"/rtlab-probe-* "$1"/.upload.* "$1"/runs/*.jsonl; '
          'rmdir "$1/runs" 2>/dev/null; rmdir "$1"')


@dataclass(frozen=True)
class Board:
    """What the host learnt about a board while putting its engine there."""

    target: str
    machine: str  # uname -m
    uid: int
    release: str  # uname -r
    engine_dir: str
    engine: str  # path of the engine on the board
    version: EngineVersion
    copied: bool  # False: the engine was already there

    @property
    def runs_dir(self) -> str:
        return f"{self.engine_dir}/runs"

    def describe(self) -> dict[str, object]:
        return {"target": self.target, "machine": self.machine, "uid": self.uid,
                "release": self.release, "engine": self.engine, "copied": self.copied,
                "engine_arch": self.version.arch, "engine_version": self.version.engine_version}


def _fail(conn: SshConnection, proc: object, what: str) -> RtlabError:
    """A remote command that ran and failed (ssh's own failures raise in conn.run)."""
    code = getattr(proc, "returncode", None)
    err = str(getattr(proc, "stderr", "") or "")
    if isinstance(getattr(proc, "stderr", None), bytes):
        err = proc.stderr.decode(errors="replace")  # type: ignore[attr-defined]
    lines = [ln.strip() for ln in err.splitlines() if ln.strip()]
    return RtlabError(f"{what} on {conn.target} failed: {lines[-1] if lines else f'exit {code}'}")


def board_facts(conn: SshConnection) -> tuple[str, int, str]:
    """(uname -m, uid, uname -r) of the board."""
    proc = conn.run(["sh", "-c", _FACTS], what="uname -m; id -u; uname -r")
    words = proc.stdout.split("\n")
    if proc.returncode != 0 or len(words) < 3 or not words[1].strip().isdigit():
        raise _fail(conn, proc, "reading uname -m, id -u")
    return words[0].strip(), int(words[1]), words[2].strip()


def engine_dir_for(uid: int, chosen: str | None) -> str:
    d = chosen or os.environ.get(DIR_ENV) or f"/tmp/rtlab.{uid}"
    if not d.startswith("/") or "\n" in d or "\0" in d:

        raise UsageError(f"--engine-dir {d!r}: give an absolute directory on the board")
    return d.rstrip("/") or "/"


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def remote_version(conn: SshConnection, engine: str) -> EngineVersion | None:
    """The version of the engine at `engine` on the board, None if it is not there or
    does not run (another architecture: exec format error)."""

    proc = conn.run([engine, "--version", "--json"], what="rtlab-probe --version")
    if proc.returncode != 0:
        return None
    try:
        return parse_version(proc.stdout)
    except RtlabError:
        return None


def provision(conn: SshConnection, engine_dir: str | None = None) -> Board:
    """Make sure the board has the engine for its architecture; return what it is."""

    machine, uid, release = board_facts(conn)
    local = engine_for(machine)
    d = engine_dir_for(uid, engine_dir)
    remote = f"{d}/rtlab-probe-{_digest(local)[:16]}"
    found = remote_version(conn, remote)
    copied = False
    if found is None:
        proc = conn.run(["sh", "-c", _UPLOAD, "rtlab-upload", d, remote],
                        input=local.read_bytes(), text=False, timeout_s=300.0,
                        what=f"copying the engine to {d}")
        if proc.returncode != 0:
            raise _fail(conn, proc, f"copying the engine to {d}")
        copied = True
        found = remote_version(conn, remote)
        if found is None:
            raise SkippedError(
                f"the engine copied to {conn.target}:{remote} does not run there "
                f"(board architecture {machine})",
                hint="the directory may be mounted noexec: choose another with --engine-dir")
    else:
        # the runs directory may have been removed since (a cleaned /tmp)
        conn.run(["mkdir", "-p", f"{d}/runs"])
    check_engine(found, machine=machine, want_version=__version__)
    return Board(target=str(conn.target), machine=machine, uid=uid, release=release,
                 engine_dir=d, engine=remote, version=found, copied=copied)


def clean(conn: SshConnection, engine_dir: str | None = None) -> str:
    """Remove the engines and kept raw files rtlab wrote on the board; the directory."""
    _, uid, _ = board_facts(conn)
    d = engine_dir_for(uid, engine_dir)
    conn.run(["sh", "-c", _CLEAN, "rtlab-clean", d], what="removing the engine")
    return d
