# SPDX-License-Identifier: MIT
"""A small reader of /proc and /sys below an injectable root directory.

Every path is given relative to the system root ("proc/cmdline", "sys/kernel/realtime"),
so the same code reads the live system (root "/") or a fixture tree / a copy of a
board's /proc and /sys (root "some/dir"). Reads never raise for the ordinary reasons a
file is missing or forbidden: they return None and remember why (`last_error`), so a
check can say "unknown: EPERM" instead of crashing.
"""

from __future__ import annotations

import errno
import gzip
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from rtlab.cpulist import parse_cpulist
from rtlab.errors import UsageError
from rtlab.textfmt import shown


def parse_cmdline(text: str) -> dict[str, str | None]:
    """Kernel parameters of a command line; later duplicates win; stops at "--"."""
    params: dict[str, str | None] = {}
    for word in text.split():
        if word == "--":
            break
        key, sep, value = word.partition("=")
        params[key] = value if sep else None
    return params


@dataclass(frozen=True)
class ReadError:
    path: str
    reason: str  # "missing", "EPERM", "EACCES", ...


class SysRoot:
    """Reads files of a system tree rooted at `root`."""

    def __init__(self, root: str = "/") -> None:
        path = Path(root)
        try:
            is_dir = path.is_dir()  # False for a missing path
        except OSError as exc:  # a name too long, a symlink loop
            raise UsageError(f"--root {shown(root)}: {exc.strerror or exc}") from None
        if not is_dir:
            raise UsageError(
                f"--root {shown(root)} is not a directory",
                "give a directory holding a copy of proc/ and sys/",
            )
        if not (path / "proc").is_dir() and not (path / "sys").is_dir():
            raise UsageError(
                f"--root {shown(root)} holds neither proc/ nor sys/",
                "give a directory holding a copy of proc/ and sys/",
            )
        self.root = path
        self.live = path.resolve() == Path("/")
        self.last_error: ReadError | None = None
        self._cache: dict[str, str | None] = {}

    def path(self, rel: str) -> Path:
        return self.root / rel.lstrip("/")

    def exists(self, rel: str) -> bool:
        return self.path(rel).exists()

    def read(self, rel: str) -> str | None:
        """The stripped text of a file, or None (reason in `last_error`)."""
        if rel in self._cache:
            return self._cache[rel]
        value: str | None
        try:
            value = self.path(rel).read_text(errors="replace").strip()
            self.last_error = None
        except OSError as exc:
            reason = (
                "missing"
                if exc.errno in (errno.ENOENT, errno.ENOTDIR)
                else (errno.errorcode.get(exc.errno or 0, str(exc)))
            )
            self.last_error = ReadError(rel, reason)
            value = None
        self._cache[rel] = value
        return value

    def read_reason(self, rel: str) -> str | None:
        """Why `rel` cannot be read (None if it can): "missing", "EPERM", ..."""
        try:
            with self.path(rel).open("rb") as fh:
                fh.read(1)
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.ENOTDIR):
                return "missing"
            return errno.errorcode.get(exc.errno or 0, str(exc))
        return None

    def read_int(self, rel: str) -> int | None:
        text = self.read(rel)
        if text is None:
            return None
        try:
            return int(text.split()[0])
        except (ValueError, IndexError):
            return None

    def read_bytes(self, rel: str, size: int = 64) -> bytes | None:
        try:
            with self.path(rel).open("rb") as fh:
                return fh.read(size)
        except OSError:
            return None

    def listdir(self, rel: str) -> list[str]:
        try:
            return sorted(os.listdir(self.path(rel)))
        except OSError:
            return []

    def readlink(self, rel: str) -> str | None:
        try:
            return os.readlink(self.path(rel))
        except OSError:
            return None

    def sysctl(self, name: str) -> str | None:
        return self.read("proc/sys/" + name.replace(".", "/"))

    def cpulist(self, rel: str) -> list[int] | None:
        text = self.read(rel)
        if text is None:
            return None
        try:
            return parse_cpulist(text, strides=True)
        except ValueError:
            return None

    # ---- facts shared by many checks -----------------------------------------------

    def cmdline(self) -> dict[str, str | None]:
        return parse_cmdline(self.read("proc/cmdline") or "")

    def release(self) -> str | None:
        text = self.read("proc/sys/kernel/osrelease")
        if text is None and self.live:
            text = os.uname().release
        return text

    def uname_version(self) -> str | None:
        text = self.read("proc/sys/kernel/version")
        if text is None and self.live:
            text = os.uname().version
        return text

    def kconfig(self) -> tuple[dict[str, str], str | None]:
        """Kernel config options set (name -> value) and where they came from."""
        sources = ["proc/config.gz"]
        release = self.release()
        if release:
            sources.append(f"boot/config-{release}")
        for rel in sources:
            path = self.path(rel)
            try:
                raw = path.read_bytes()
            except OSError:
                continue
            try:
                text = gzip.decompress(raw).decode() if rel.endswith(".gz") else raw.decode()
            except (OSError, EOFError, UnicodeDecodeError):
                continue
            opts: dict[str, str] = {}
            for line in text.splitlines():
                if line.startswith("CONFIG_"):
                    key, _, value = line.partition("=")
                    opts[key] = value.strip('"')
                elif line.startswith("# CONFIG_") and line.endswith(" is not set"):
                    opts[line[2 : -len(" is not set")]] = "n"
            return opts, "/" + rel
        return {}, None

    def online_cpus(self) -> list[int] | None:
        return self.cpulist("sys/devices/system/cpu/online")

    def cpuinfo_flags(self) -> set[str] | None:
        text = self.read("proc/cpuinfo")
        if text is None:
            return None
        flags: set[str] = set()
        for line in text.splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("flags", "Features"):
                flags.update(value.split())
        return flags

    def processes(self) -> Iterator[tuple[int, str]]:
        """(pid, comm) of every process visible under proc/."""
        for name in self.listdir("proc"):
            if not name.isdigit():
                continue
            try:
                comm = self.path(f"proc/{name}/comm").read_text().strip()
            except OSError:
                continue
            yield int(name), comm

    def sched_of(self, pid: int) -> tuple[int, int] | None:
        """(policy, rt_priority) of a task from /proc/PID/stat."""
        try:
            text = self.path(f"proc/{pid}/stat").read_text()
        except OSError:
            return None
        rest = text[text.rfind(")") + 2 :].split()
        try:
            return int(rest[38]), int(rest[37])  # fields 41 (policy) and 40 (rt_priority)
        except (IndexError, ValueError):
            return None
