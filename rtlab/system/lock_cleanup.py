# SPDX-License-Identifier: MIT
"""`rtlab board clean`: remove a target's owner lock file and its journal directory
when nothing holds the lock and no journal is pending there."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rtlab.engine.snapshot import snapshot
from rtlab.system.applier import hold_target
from rtlab.system.journal_files import DEFAULT_DIR, journals
from rtlab.system.target_lock import LOCK_NAME, TargetBusyError, lock_info, target_name

if TYPE_CHECKING:
    from rtlab.engine.transport import Transport


@dataclass
class LockCleanup:
    """What `clean_lock` did with a target's journal directory and its lock."""

    directory: str
    lock: str
    existed: bool  # the directory was there
    lock_removed: bool = False
    dir_removed: bool = False
    kept: str | None = None  # why they stay (one line), None when removed or absent

    def to_dict(self) -> dict[str, Any]:
        return {"dir": self.directory, "lock": self.lock, "existed": self.existed,
                "lock_removed": self.lock_removed, "dir_removed": self.dir_removed,
                "kept": self.kept}


def _dir_listing(transport: Transport, directory: Path) -> dict[str, Any] | None:
    """The target's `directory` as its engine lists it (a `dir` or `error` record)."""
    recs = [r for r in snapshot(transport, [f"{directory}/"])
            if r.get("type") in ("dir", "error")]
    return recs[0] if recs else None


def clean_lock(transport: Transport, directory: Path = DEFAULT_DIR) -> LockCleanup:
    """Remove the target's lock file and its journal directory (`rtlab board clean`),
    when nothing holds the lock and no journal is pending there. A held lock (a run or
    shield owns the target) raises TargetBusyError naming the holder; pending journals
    keep both, with the reason. The lock file is unlinked while this process holds it
    (an applier that opened it meanwhile locks the new file instead: the engine checks
    that the file it locked is still the one at its path); the directory goes after,
    when it is empty."""
    directory = Path(directory)
    lock = str(directory / LOCK_NAME)
    out = LockCleanup(str(directory), lock, existed=True)
    where = target_name(transport)
    listing = _dir_listing(transport, directory)
    if listing is None or listing.get("type") == "error":
        code = (listing or {}).get("error")
        out.existed = code != "ENOENT"
        if out.existed:
            out.kept = (f"{directory} cannot be read on {where} ({code}): removing it "
                        "needs root")
        return out
    holder = lock_info(transport, lock)
    if holder.held:
        raise TargetBusyError(
            f"{where} is in use by {holder.who()} since {holder.since} (lock {lock}): "
            "nothing was removed", holder,
            hint="clean again when it has ended; one rtlab run or shield owns a system "
                 "at a time")
    again = "" if transport.is_local else f" --target {transport.target}"

    def pending(own: Path | None = None) -> str | None:
        found = [j for j in journals(directory, transport) if j.path != own]
        if not found:
            return None
        shield = any(j.detached for j in found)
        return (f"{directory} kept: {len(found)} journal(s) of system changes pending "
                f"({', '.join(j.path.name for j in found[:3])}): undo them with "
                f"`rtlab restore{again}`"
                + (f" (the persistent shield: `rtlab shield --reset{again}`)" if shield else "")
                + ", then clean again")

    out.kept = pending()
    if out.kept:
        return out
    with hold_target(transport, directory, "board clean") as session:
        out.kept = pending(session.journal)
        if out.kept:
            return out
        rm = transport.run_command(["rm", "-f", lock], what=f"removing {lock}")
        out.lock_removed = rm.returncode == 0
    rmdir = transport.run_command(["rmdir", str(directory)], what=f"removing {directory}")
    out.dir_removed = rmdir.returncode == 0
    if not out.lock_removed:
        out.kept = f"{lock} could not be removed: {(rm.stderr or '').strip() or rm.returncode}"
    elif not out.dir_removed:
        left = _dir_listing(transport, directory) or {}
        names = [str(n) for n in left.get("entries") or []]
        if names:  # something else is there (or a run started meanwhile): left alone
            out.kept = (f"{directory} kept: it is not empty ({', '.join(names[:3])}"
                        + (", …" if len(names) > 3 else "") + ")")
        else:
            out.dir_removed = left.get("type") == "error"  # gone meanwhile
    return out
