# SPDX-License-Identifier: MIT
"""Boards over SSH: the user's OpenSSH client, one multiplexed connection per command.

`SshTarget.parse` reads `[user@]host[:port]` (or an alias of `~/.ssh/config`);
`SshConnection` holds the ControlMaster connection (a child of this process: when
rtlab dies, the connection drops and every engine on the board sees its stdin
close); `rtlab.engine.board.SshTransport` is the board as a `Transport`, through
this connection.

Nothing given by the user is ever interpreted by the board's shell: every remote
command is a list of words joined with POSIX quoting (`shlex.join`), and the
destination is passed after `--` so it can never be read as an ssh option.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rtlab.engine.place_spec import is_labgrid, parse_place
from rtlab.engine.transport import PipeProcess, run_to_end
from rtlab.errors import RtlabError, UsageError
from rtlab.lifeline import die_with_parent
from rtlab.textfmt import shown

MAX_TARGET_CHARS = 320  # USER@HOST:PORT: a DNS name is at most 253 characters
CONFIG_ENV = "RTLAB_SSH_CONFIG"  # an ssh_config file used instead of ~/.ssh/config (-F)
CONNECT_TIMEOUT_S = 10
MASTER_WAIT_S = 60.0

_HOST = re.compile(r"[A-Za-z0-9_.%+-]+\Z")
_USER = re.compile(r"[A-Za-z0-9_.][A-Za-z0-9_.-]*\Z")


@dataclass(frozen=True)
class SshTarget:
    """Where a board is: `[user@]host[:port]`; host may be an ssh_config alias."""

    host: str
    user: str | None = None
    port: int | None = None

    @classmethod
    def parse(cls, text: str, option: str = "--target") -> SshTarget:
        """UsageError (one line, naming `option`) for anything that is not a plain
        destination. `labgrid:PLACE` (rtlab.engine.labgrid) is checked and kept whole as
        the host: `rtlab.engine.board.SshTransport` reaches it through the place."""
        if is_labgrid(text):
            parse_place(text, option)
            return cls(host=text)
        bad = UsageError(f"{option} {shown(text)}: expected [USER@]HOST[:PORT] or an alias from "
                         "~/.ssh/config, e.g. root@board7 or board7:2222")
        if len(text) > MAX_TARGET_CHARS:  # a host name has at most 253 characters
            raise bad
        user: str | None = None
        rest = text
        if "@" in rest:
            user, _, rest = rest.rpartition("@")
            if not _USER.match(user):
                raise bad
        port: int | None = None
        if rest.startswith("["):  # [IPv6]:port
            host, sep, tail = rest[1:].partition("]")
            if not sep or not host or not re.fullmatch(r"[0-9A-Fa-f:.]+", host):
                raise bad
            if tail:
                if not tail.startswith(":"):
                    raise bad
                port = _port(tail[1:], bad)
        else:
            host, sep, p = rest.partition(":")
            if sep:
                port = _port(p, bad)
            if not _HOST.match(host) or host.startswith("-"):
                raise bad
        return cls(host=host, user=user, port=port)

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host and not is_labgrid(self.host) \
            else self.host
        return (f"{self.user}@" if self.user else "") + host + (
            f":{self.port}" if self.port else "")

    def options(self) -> list[str]:
        """ssh options for the user and port given (else ssh_config decides)."""
        out: list[str] = []
        if self.user:
            out += ["-l", self.user]
        if self.port:
            out += ["-p", str(self.port)]
        return out


def _port(text: str, bad: UsageError) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise bad
    return int(text)


def base_options() -> list[str]:
    """Options of every ssh command: never prompt, fail fast, notice a dead link."""
    opts = ["-T", "-e", "none", "-o", "BatchMode=yes",
            "-o", f"ConnectTimeout={CONNECT_TIMEOUT_S}",
            "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3"]
    config = os.environ.get(CONFIG_ENV)
    if config:  # ssh reads it: only a regular file of a sane size (rtlab.fileio)
        from rtlab.fileio import check_input

        opts = ["-F", str(check_input(config, f"${CONFIG_ENV}")), *opts]
    return opts


_REASONS: tuple[tuple[str, str], ...] = (
    ("could not resolve hostname", "host name not known"),
    ("name or service not known", "host name not known"),
    ("connection refused", "connection refused (no SSH server on that port?)"),
    ("connection timed out", "connection timed out"),
    ("operation timed out", "connection timed out"),
    ("no route to host", "no route to host"),
    ("network is unreachable", "network unreachable"),
)


def ssh_error(target: str, stderr: str, *, during: str = "connecting") -> RtlabError:
    """One line for what ssh said when it failed (exit 255)."""
    text = stderr.lower()
    if "remote host identification has changed" in text:
        return RtlabError(
            f"the host key of {target} has CHANGED since it was last seen: not connecting",
            hint="if the board was re-installed, remove the old key with "
                 "`ssh-keygen -R HOST` and connect once with ssh to accept the new one")
    if "host key verification failed" in text or "no matching host key" in text:
        return RtlabError(f"the host key of {target} is not known",
                          hint=f"connect once with `ssh {target}` to check and accept it")
    if "permission denied" in text or "too many authentication failures" in text:
        return RtlabError(
            f"{target} refused the login ({_last_line(stderr)})",
            hint="set up key-based login (ssh-copy-id, an agent or IdentityFile in "
                 "~/.ssh/config): rtlab never asks for a password")
    for needle, reason in _REASONS:
        if needle in text:
            return RtlabError(f"cannot reach {target}: {reason}",
                              hint="check the name, port and network; `ssh TARGET true` "
                                   "must work without a prompt")
    if during != "connecting":
        return RtlabError(f"lost the SSH connection to {target} while {during}"
                          + (f": {_last_line(stderr)}" if stderr.strip() else ""))
    return RtlabError(f"cannot connect to {target}: {_last_line(stderr) or 'ssh failed'}",
                      hint="`ssh TARGET true` must work without a prompt")


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else ""


class SshConnection:
    """One ControlMaster connection to a board, owned by this process."""

    def __init__(self, target: SshTarget, *, ssh: str = "ssh") -> None:
        self.target = target
        self.ssh = shutil.which(ssh) or ssh
        self._dir = Path(tempfile.mkdtemp(prefix="rtlab-ssh-"))
        self.socket = self._dir / "cm"
        self._master: subprocess.Popen[bytes] | None = None

    def _argv(self, extra: list[str], remote: list[str] | None) -> list[str]:
        argv = [self.ssh, *base_options(), *extra, *self.target.options(), "--", self.target.host]
        if remote is not None:
            argv.append(shlex.join(remote))
        return argv

    def open(self) -> SshConnection:
        """Connect (RtlabError with one line when the board cannot be reached)."""
        if shutil.which(self.ssh) is None:
            raise RtlabError("the OpenSSH client `ssh` is not installed",
                             hint="install it: apt-get install openssh-client")
        self._master = subprocess.Popen(
            self._argv(["-M", "-N", "-S", str(self.socket), "-o", "ControlPersist=no"], None),
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            start_new_session=True, preexec_fn=die_with_parent(signal.SIGTERM))
        deadline = time.monotonic() + MASTER_WAIT_S
        while True:
            code = self._master.poll()
            if code is not None:
                err = self._master.stderr.read().decode(errors="replace") if (
                    self._master.stderr) else ""
                self._master = None
                self.close()
                raise ssh_error(str(self.target), err)
            if self.socket.exists() and self._check():
                return self
            if time.monotonic() > deadline:
                self.close()
                raise RtlabError(f"cannot connect to {self.target}: no answer within "
                                 f"{MASTER_WAIT_S:g} s")
            time.sleep(0.05)

    def _check(self) -> bool:
        r = subprocess.run(self._argv(["-S", str(self.socket), "-O", "check"], None),
                           capture_output=True, check=False)
        return r.returncode == 0

    def argv(self, remote: list[str]) -> list[str]:
        """The local command line that runs `remote` (a list of words) on the board
        through the shared connection."""
        if self._master is None:
            raise RtlabError(f"the SSH connection to {self.target} is not open")
        return self._argv(["-S", str(self.socket), "-o", "ControlMaster=no"], remote)

    def run(self, remote: list[str], *, input: bytes | str | None = None,
            timeout_s: float = 60.0, text: bool = True,
            what: str | None = None) -> subprocess.CompletedProcess[Any]:
        """Run `remote` on the board to completion. When ssh itself failed (exit 255 and
        the connection is gone) RtlabError with one line saying why; a remote command's
        own failure is in the returned exit code. `what` names it in messages."""
        what = what or remote[0]
        proc = run_to_end(self.argv(remote), input=input, text=text, timeout_s=timeout_s,
                          late=f"`{what}` on {self.target}", cannot="cannot start ssh")
        if proc.returncode == 255 and not self.alive():
            err = proc.stderr if isinstance(proc.stderr, str) else proc.stderr.decode(
                errors="replace")
            raise ssh_error(str(self.target), err, during=f"running `{what}`")
        return proc

    def alive(self) -> bool:
        return self._master is not None and self._master.poll() is None

    def close(self) -> None:
        m, self._master = self._master, None
        if m is not None and m.poll() is None:
            m.terminate()
            try:
                m.wait(timeout=5)
            except subprocess.TimeoutExpired:
                m.kill()
                m.wait(timeout=5)
        with contextlib.suppress(OSError):
            self.socket.unlink()
        with contextlib.suppress(OSError):
            self._dir.rmdir()


class SshProcess(PipeProcess):
    """An engine on a board: stopping it closes its stdin (the engine's lifeline),
    so it writes its result, which still comes back through the connection."""

    def __init__(self, popen: subprocess.Popen[bytes]) -> None:
        super().__init__(popen)
        self._popen = popen

    def send_signal(self, sig: int) -> None:
        if sig == signal.SIGKILL:
            super().send_signal(sig)
            return
        if self._popen.stdin is not None:
            with contextlib.suppress(OSError):
                self._popen.stdin.close()
