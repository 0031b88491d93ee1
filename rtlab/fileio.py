# SPDX-License-Identifier: MIT
"""One way to write an output file and one way to read an input file (docs/files.md).

rtlab runs as root, so a path the user names is checked before rtlab opens it:

- **Output** (`check_output`, then `write_output` or `open_output`): a regular file or a
  new name in an existing directory, never a device, FIFO, socket, directory or a file on
  a kernel pseudo filesystem (/proc, /sys, tracefs, cgroupfs, ...); `-` is standard
  output. The data goes to a temporary file beside the target, which replaces the target
  only after every byte was written and flushed to disk; on any failure the temporary file
  is removed and the target is as it was. Commands check every output path before they
  measure (`check_output`), so a typo never costs a run.
- **Input** (`read_input`, `read_text_input`, `check_input`): regular files only (a
  one-line refusal names a directory, FIFO, device, socket or symlink loop), at most a
  stated number of bytes, decoded strictly (binary data is one line, not a traceback),
  read in pieces so that Ctrl-C interrupts it (exit 130). Files named by environment
  variables follow the same rules, and a child process (ssh) is handed only a file that
  passed `check_input`.
"""

from __future__ import annotations

import errno
import os
import stat
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from rtlab.errors import RtlabError, UsageError
from rtlab.textfmt import shown

STDOUT = "-"
CHUNK = 1 << 20  # bytes per read: Ctrl-C is seen between two

# Bounds of what rtlab reads into memory (docs/files.md)
TEXT_LIMIT = 4 << 20  # scenarios, SLO files, ssh configs, JSON documents
IMPORT_LIMIT = 1 << 30  # a peer tool's output or an engine's raw file to import

# Kernel pseudo filesystems: files there are kernel interfaces, not files to write a
# report into (and those the kernel makes "regular" read without end or change state)
PSEUDO_FS = frozenset({"proc", "sysfs", "cgroup", "cgroup2", "tracefs", "debugfs",
                       "securityfs", "configfs", "bpf", "pstore", "efivarfs", "devpts",
                       "mqueue", "hugetlbfs", "fusectl", "binfmt_misc", "rpc_pipefs",
                       "nsfs", "autofs", "devtmpfs"})
MOUNTINFO = "/proc/self/mountinfo"


_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"), (stat.S_ISLNK, "a symbolic link"))


def kind_of(mode: int) -> str:
    """What a file that is not a regular file is, in the words a message uses."""
    return next((what for test, what in _KINDS if test(mode)), "not a regular file")


def fs_type(path: Path) -> str | None:
    """The type of the filesystem `path` (an existing, resolved path) is on, from the
    mount table; None when it cannot be read."""
    try:
        with open(MOUNTINFO, encoding="utf-8", errors="replace") as f:
            table = f.read(TEXT_LIMIT)
    except OSError:
        return None
    text = str(path)
    best, best_len = None, -1
    for line in table.splitlines():
        left, sep, right = line.partition(" - ")
        fields = left.split()
        if not sep or len(fields) < 5:
            continue
        mount = fields[4].replace("\\040", " ").replace("\\011", "\t").replace("\\134", "\\")
        inside = text == mount or text.startswith(mount.rstrip("/") + "/")
        if inside and len(mount) >= best_len:  # later mounts over one point win
            best, best_len = right.split()[0] if right.split() else None, len(mount)
    return best


PATH_SHOWN = 200  # characters of a path a message quotes (longer ones are cut)


def _describe(path: str) -> str:
    return shown(path, PATH_SHOWN)


# output ------------------------------------------------------------------------------
def check_output(path: str | os.PathLike[str], option: str) -> Path | None:
    """The file an output path names (symbolic links followed), or None for `-`
    (standard output). Raises UsageError (exit 2) when rtlab must not or cannot write
    there; nothing is created."""
    text = os.fspath(path)
    if text == STDOUT:
        return None
    if not text or "\0" in text:
        raise UsageError(f"{option} {_describe(text)}: not a file name",
                         hint="give a file name, or - for standard output")
    p = Path(text).expanduser()
    try:
        st = os.stat(p)
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            return _check_new_output(p, option)
        raise _path_error(exc, text, option) from None
    if not stat.S_ISREG(st.st_mode):
        raise UsageError(f"{option} {_describe(text)} is {kind_of(st.st_mode)}: rtlab writes "
                         "only regular files",
                         hint="give a new file name or an existing regular file"
                              + (", or - for standard output"
                                 if stat.S_ISCHR(st.st_mode) else ""))
    real = p.resolve()
    fs = fs_type(real)
    if fs in PSEUDO_FS:
        raise UsageError(f"{option} {_describe(text)} is on the kernel's {fs} filesystem, "
                         "not a file to write output into", hint="give a file elsewhere")
    if not os.access(real, os.W_OK) or not os.access(real.parent, os.W_OK | os.X_OK):
        raise UsageError(f"{option} {_describe(text)}: permission denied",
                         hint="give a file you may write")
    return real


def _check_new_output(p: Path, option: str) -> Path:
    """A path that does not exist: its directory must (rtlab creates no directories
    for a name the user gave) and be writable, on a real filesystem."""
    if os.path.lexists(p):  # a dangling symbolic link: where would the file go?
        raise UsageError(f"{option} {_describe(str(p))} is a symbolic link to a missing file",
                         hint="give the link's target or a new file name")
    parent = p.parent
    try:
        st = os.stat(parent)
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            raise UsageError(f"{option} {_describe(str(p))}: the directory "
                             f"{_describe(str(parent))} does not exist",
                             hint="create it first or give a path in an existing "
                                  "directory") from None
        raise _path_error(exc, str(p), option) from None
    if not stat.S_ISDIR(st.st_mode):
        raise UsageError(f"{option} {_describe(str(p))}: {_describe(str(parent))} is not a "
                         "directory")
    real = parent.resolve() / p.name
    fs = fs_type(real.parent)
    if fs in PSEUDO_FS:
        raise UsageError(f"{option} {_describe(str(p))} is on the kernel's {fs} filesystem, "
                         "not a place for output files", hint="give a file elsewhere")
    if not os.access(real.parent, os.W_OK | os.X_OK):
        raise UsageError(f"{option} {_describe(str(p))}: cannot create files in "
                         f"{_describe(str(parent))} (permission denied)")
    return real


def _path_error(exc: OSError, text: str, option: str) -> UsageError:
    if exc.errno == errno.ELOOP:
        return UsageError(f"{option} {_describe(text)}: too many levels of symbolic links "
                          "(a symlink loop)")
    if exc.errno == errno.ENOTDIR:
        return UsageError(f"{option} {_describe(text)}: a part of the path is not a "
                          "directory")
    if exc.errno == errno.ENAMETOOLONG:
        return UsageError(f"{option} {_describe(text)}: file name too long")
    return UsageError(f"{option} {_describe(text)}: {exc.strerror or exc}")


@contextmanager
def open_output(path: str | os.PathLike[str], option: str) -> Iterator[BinaryIO]:
    """A binary file to write `option`'s output into. The target is replaced only when
    the `with` block ends without an exception and every byte reached the disk; else the
    temporary file is removed and the target is untouched."""
    target = check_output(path, option)
    if target is None:
        yield sys.stdout.buffer
        sys.stdout.buffer.flush()
        return
    import tempfile

    try:
        fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp",
                                        dir=target.parent)
    except OSError as exc:
        raise RtlabError(f"cannot write {option} {_describe(str(path))}: "
                         f"{exc.strerror or exc}") from None
    tmp = Path(tmp_name)
    done = False
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
            _set_mode(f.fileno(), target)
        _replace(tmp, target, option, path)
        done = True
    except OSError as exc:
        raise RtlabError(f"cannot write {option} {_describe(str(path))}: "
                         f"{exc.strerror or exc}", hint="nothing was written") from None
    finally:
        if not done:
            with suppress(OSError):
                tmp.unlink()


def _set_mode(fd: int, target: Path) -> None:
    """An existing file keeps its permissions; a new one gets the umask's (mkstemp
    makes 0600)."""
    try:
        mode = stat.S_IMODE(os.stat(target).st_mode)
    except OSError:
        mode = 0o666 & ~_umask()
    os.fchmod(fd, mode)


def _umask() -> int:
    """The process's umask, read without setting it (os.umask would change it for every
    thread for a moment): /proc/self/status says it since Linux 4.7."""
    with suppress(OSError, ValueError), open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    return 0o022


def _replace(tmp: Path, target: Path, option: str, given: str | os.PathLike[str]) -> None:
    """Rename over the target, unless it became something else than a regular file
    since it was checked (a device put there meanwhile is never replaced)."""
    try:
        st = os.lstat(target)
    except FileNotFoundError:
        st = None
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise UsageError(f"{option} {_describe(os.fspath(given))} became "
                         f"{kind_of(st.st_mode)} while rtlab wrote it; nothing was written")
    os.replace(tmp, target)


def write_output(path: str | os.PathLike[str], data: bytes | str, option: str) -> Path | None:
    """Write `data` (str: UTF-8) to `path` the one safe way; returns the file written,
    None for standard output."""
    return write_outputs([(path, data, option)])[0]


# directories -------------------------------------------------------------------------
def check_directory(path: str | os.PathLike[str], what: str) -> Path:
    """A directory rtlab keeps its own files in (journals, a monitor's state): one that
    exists, or one it may create (the nearest existing ancestor is a directory it may
    write into, on a real filesystem). UsageError (exit 2) otherwise; creates nothing."""
    text = os.fspath(path)
    if not text.strip() or "\0" in text:
        raise UsageError(f"{what} {_describe(text)}: not a directory name")
    p = Path(text).expanduser()
    try:
        st = os.stat(p)
    except OSError as exc:
        if exc.errno != errno.ENOENT:
            raise _path_error(exc, text, what) from None
        st = None
    if st is not None and not stat.S_ISDIR(st.st_mode):
        raise UsageError(f"{what} {_describe(text)} is {kind_of(st.st_mode)}, not a "
                         "directory", hint="give a directory, or a new name for one")
    if st is None and os.path.lexists(p):
        raise UsageError(f"{what} {_describe(text)} is a symbolic link to a missing "
                         "directory", hint="give the directory itself")
    try:
        place = new_place(p)
    except OSError as exc:
        raise _path_error(exc, text, what) from None
    if place.not_directory is not None:
        raise UsageError(f"{what} {_describe(text)}: {_describe(str(place.existing))} is "
                         f"{place.not_directory}, not a directory")
    if place.pseudo_fs is not None:
        raise UsageError(f"{what} {_describe(text)} is on the kernel's {place.pseudo_fs} "
                         "filesystem, not a place for rtlab's files",
                         hint="give a directory elsewhere")
    if not place.writable:
        raise UsageError(f"{what} {_describe(text)}: permission denied",
                         hint="give a directory you may write into")
    return p


@dataclass(frozen=True)
class NewPlace:
    """Where rtlab would create a file or directory: the nearest part of its path that
    exists, and what keeps rtlab from creating the rest there (nothing: `not_directory`
    and `pseudo_fs` None, `writable` True)."""

    existing: Path
    not_directory: str | None  # what `existing` is when it is not a directory
    pseudo_fs: str | None  # the kernel filesystem `existing` is on (/proc, /sys, ...)
    writable: bool  # this process may create files in `existing`


def new_place(path: Path) -> NewPlace:
    """What is in the way of creating `path` (an existing directory: of creating files in
    it). Only looks; OSError (its `filename` the existing part) when that part cannot be
    looked at (a symbolic link loop, no permission)."""
    existing = path
    while not os.path.lexists(existing) and existing != existing.parent:
        existing = existing.parent
    st = os.stat(existing)
    if not stat.S_ISDIR(st.st_mode):
        return NewPlace(existing, kind_of(st.st_mode), None, False)
    fs = fs_type(existing.resolve())
    return NewPlace(existing, None, fs if fs in PSEUDO_FS else None,
                    os.access(existing, os.W_OK | os.X_OK))


# input -------------------------------------------------------------------------------
def check_input(path: str | os.PathLike[str], what: str, limit: int = TEXT_LIMIT) -> Path:
    """The regular file `path` names (symbolic links followed), no larger than `limit`.
    Raises UsageError (exit 2) naming `what` otherwise; opens nothing."""
    text = os.fspath(path)
    if not text or "\0" in text:
        raise UsageError(f"{what} {_describe(text)}: not a file name")
    p = Path(text).expanduser()
    try:
        st = os.stat(p)
    except OSError as exc:
        raise _input_error(exc, what, text) from None
    if not stat.S_ISREG(st.st_mode):
        raise UsageError(f"{what} {_describe(text)} is {kind_of(st.st_mode)}, not a regular "
                         "file", hint="give a regular file")
    fs = fs_type(p.resolve())
    if fs in PSEUDO_FS:  # kernel interfaces: reading some consumes (trace_pipe) or blocks
        raise UsageError(f"{what} {_describe(text)} is on the kernel's {fs} filesystem, not "
                         "a file rtlab reads", hint="copy it to a regular file first")
    if st.st_size > limit:
        raise UsageError(f"{what} {_describe(text)} is {_size(st.st_size)}, more than the "
                         f"{_size(limit)} rtlab reads", hint="see docs/files.md")
    return p


def _input_error(exc: OSError, what: str, text: str) -> RtlabError:
    if exc.errno == errno.ENOENT:
        return UsageError(f"{what} {_describe(text)} does not exist",
                          hint="check the path")
    if exc.errno == errno.ELOOP:
        return UsageError(f"{what} {_describe(text)}: too many levels of symbolic links "
                          "(a symlink loop)")
    if exc.errno == errno.ENOTDIR:
        return UsageError(f"{what} {_describe(text)}: a part of the path is not a directory")
    if exc.errno in (errno.EACCES, errno.EPERM):
        return UsageError(f"{what} {_describe(text)}: permission denied",
                          hint="give a file you may read")
    return UsageError(f"cannot read {what} {_describe(text)}: {exc.strerror or exc}")


def _size(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n} bytes"


def read_input(path: str | os.PathLike[str], what: str, limit: int = TEXT_LIMIT) -> bytes:
    """The bytes of the regular file `path`, at most `limit` of them (UsageError beyond:
    also for files that say they are empty and are not, as /proc's). Never blocks on a
    FIFO, never opens a device; Ctrl-C interrupts it (KeyboardInterrupt)."""
    p = check_input(path, what, limit)
    text = os.fspath(path)
    try:
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        raise _input_error(exc, what, text) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):  # replaced between the check and the open
            raise UsageError(f"{what} {_describe(text)} is {kind_of(st.st_mode)}, not a "
                             "regular file")
        parts: list[bytes] = []
        total = 0
        while True:
            piece = os.read(fd, CHUNK)
            if not piece:
                break
            total += len(piece)
            if total > limit:
                raise UsageError(f"{what} {_describe(text)} holds more than the "
                                 f"{_size(limit)} rtlab reads", hint="see docs/files.md")
            parts.append(piece)
        return b"".join(parts)
    except OSError as exc:
        raise RtlabError(f"cannot read {what} {_describe(text)}: {exc.strerror or exc}"
                         ) from None
    finally:
        os.close(fd)


def decode_text(data: bytes, what: str, path: str | os.PathLike[str], *,
                lenient: bool = False) -> str:
    """UTF-8 text, or one line saying the file is binary (where, which byte).
    `lenient`: a text with a stray non-UTF-8 byte (a peer tool's output with a Latin-1
    host name) is read with U+FFFD in its place; a NUL byte still means binary."""
    nul = data.find(b"\0")
    if nul >= 0:
        raise UsageError(f"{what} {_describe(os.fspath(path))} is binary (a NUL byte at "
                         f"offset {nul}), not text")
    if lenient:
        return data.decode("utf-8", errors="replace")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"{what} {_describe(os.fspath(path))} is not UTF-8 text (byte "
                         f"0x{data[exc.start]:02x} at offset {exc.start})",
                         hint="give a text file") from None


def read_text_input(path: str | os.PathLike[str], what: str, limit: int = TEXT_LIMIT) -> str:
    """`read_input`, decoded as UTF-8 (binary data: one line)."""
    return decode_text(read_input(path, what, limit), what, path)


def write_outputs(items: list[tuple[str | os.PathLike[str], bytes | str, str]]
                  ) -> list[Path | None]:
    """Several outputs of one command, all or none: every path is checked first, every
    file is written beside its target, and the targets are replaced only once all were
    written (a failing --junit leaves no report written either)."""
    from contextlib import ExitStack

    if len({os.fspath(p) for p, _, _ in items if os.fspath(p) != STDOUT}) < len(
            [p for p, _, _ in items if os.fspath(p) != STDOUT]):
        raise UsageError("two outputs name the same file: "
                         + ", ".join(f"{o} {_describe(os.fspath(p))}" for p, _, o in items))
    targets = [check_output(p, o) for p, _, o in items]
    with ExitStack() as stack:
        for (p, data, option) in items:
            f = stack.enter_context(open_output(p, option))
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
    return targets
