# SPDX-License-Identifier: MIT
"""A board as a `Transport`: its SSH connection (`rtlab.engine.ssh`) and the static
engine put there for its architecture (`rtlab.engine.provision`).

`transport_for(--target)` gives this machine's transport or a board's; everything
above sees only `Transport`.
"""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from rtlab.engine import heartbeat
from rtlab.engine.place_spec import is_labgrid
from rtlab.engine.provision import provision
from rtlab.engine.ssh import SshConnection, SshProcess, SshTarget
from rtlab.engine.transport import RUN_TIMEOUT_S, EngineProcess, LocalTransport, Transport
from rtlab.errors import RtlabError


class SshTransport(Transport):
    """A board reached over SSH, with the static engine for its architecture."""

    name = "ssh"

    def __init__(self, target: str | SshTarget, *, engine_dir: str | None = None,
                 connect: bool = True) -> None:
        self.ssh_target = target if isinstance(target, SshTarget) else SshTarget.parse(target)
        self.conn = SshConnection(self.ssh_target)
        self.engine_dir = engine_dir
        self.board: Any = None  # provision.Board once the engine is there
        self.lease: Any = None  # rtlab.engine.labgrid.PlaceLease for labgrid:PLACE
        if connect:
            self.open()

    def open(self) -> SshTransport:
        if is_labgrid(self.ssh_target.host) and self.lease is None:
            from rtlab.engine.labgrid import PlaceLease  # held until close()

            self.lease = PlaceLease(self.ssh_target.host).open()
            self.conn.close()  # the place's address, not the spec
            self.conn = SshConnection(self.lease.ssh_target)
        try:
            self.conn.open()
            self.board = provision(self.conn, self.engine_dir)
        except BaseException:
            self.close()
            raise
        return self

    @property
    def target(self) -> str:
        return str(self.ssh_target)

    @property
    def is_local(self) -> bool:
        return False

    @property
    def engine_path(self) -> str:
        if self.board is None:
            raise RtlabError(f"no engine on {self.target} yet")
        return str(self.board.engine)

    def describe(self) -> str:
        return f"ssh {self.target} ({self.engine_path})"

    def engine_argv(self, args: list[str]) -> list[str]:
        return self.conn.argv([self.engine_path, *args])

    def command_argv(self, argv: list[str]) -> list[str]:
        return self.conn.argv(list(argv))

    def raw_path(self, name: str) -> str:
        """Where the board keeps the raw output of a run (`rtlab results fetch`)."""
        return f"{self.board.runs_dir}/{name}"

    def start_held(self, args: list[str], *, stdin: Any = subprocess.DEVNULL,
                   stderr: Any = subprocess.PIPE,
                   die_signal: int = signal.SIGTERM) -> subprocess.Popen[bytes]:
        """As for any target; an engine held by its stdin lifeline also gets the
        heartbeat (rtlab.engine.heartbeat): a link starved for good ends it too."""
        beat = bool(args) and args[0] == "--stdin-lifeline" and stdin == subprocess.PIPE
        if beat:
            args = [*heartbeat.lifeline_args(), *args[1:]]
        popen = super().start_held(args, stdin=stdin, stderr=stderr, die_signal=die_signal)
        if beat and popen.stdin is not None:
            heartbeat.keep_alive(popen.stdin)
        return popen

    def spawn(self, args: list[str], *, keep_as: str | None = None) -> EngineProcess:
        lifeline = ["--stdin-lifeline"]
        if keep_as is not None:
            lifeline += ["--tee", self.raw_path(keep_as)]
        try:  # stdin kept open: it is the engine's lifeline on the board
            popen = self.start_held([*lifeline, *args], stdin=subprocess.PIPE)
        except OSError as exc:
            raise RtlabError(f"cannot start ssh: {exc.strerror or exc}") from exc
        return SshProcess(popen)

    def run(self, args: list[str], *, input: str | None = None,
            timeout_s: float = RUN_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
        return self.conn.run([self.engine_path, *args], input=input, timeout_s=timeout_s,
                             what=f"rtlab-probe {' '.join(args[:2])}")

    def run_command(self, argv: list[str], *, timeout_s: float = RUN_TIMEOUT_S,
                    what: str) -> subprocess.CompletedProcess[str]:
        return self.conn.run(list(argv), input="", timeout_s=timeout_s, what=what)

    def close(self) -> None:
        self.conn.close()
        lease, self.lease = self.lease, None
        if lease is not None:
            lease.close()


@contextmanager
def connection(target: str) -> Iterator[SshConnection]:
    """A bare SSH connection to a board, without its engine (`rtlab board clean` of a
    board no engine runs on); a labgrid place is held while it is open."""
    ssh_target = SshTarget.parse(target)
    lease: Any = None
    if is_labgrid(ssh_target.host):
        from rtlab.engine.labgrid import PlaceLease

        lease = PlaceLease(ssh_target.host).open()
        ssh_target = lease.ssh_target
    try:
        conn = SshConnection(ssh_target).open()
        try:
            yield conn
        finally:
            conn.close()
    finally:
        if lease is not None:
            lease.close()


def transport_for(target: str | None, *, engine_dir: str | None = None) -> Transport:
    """`--target` as a Transport: this machine when None or "local"."""
    if target is None or target == "local":
        return LocalTransport()
    return SshTransport(target, engine_dir=engine_dir)


@contextmanager
def open_target(target: str | None, engine_dir: str | None = None) -> Iterator[Transport]:
    """The target as a Transport for the duration of a command or a run (its SSH
    connection is closed at the end, whatever happens)."""
    transport = transport_for(target, engine_dir=engine_dir)
    try:
        yield transport
    finally:
        transport.close()
