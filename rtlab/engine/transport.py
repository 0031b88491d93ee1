# SPDX-License-Identifier: MIT
"""How the host reaches a target's engine: the one way `rtlab-probe` is started.

A `Transport` is a target (this machine, a network namespace on it, or a board over
SSH: `rtlab.engine.ssh`) plus the way to start `rtlab-probe ARGS` there. Everything
that starts the engine goes through one: a measurement streams its JSON Lines
(`spawn`), a fact or a restore runs to completion (`run`), the journaled applier
keeps its pipes open (`popen`). Nothing above this module builds an engine command
line itself, and no other notion of "where" exists.
"""

from __future__ import annotations

import abc
import contextlib
import queue
import signal
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from rtlab.engine.locate import find_probe
from rtlab.errors import RtlabError
from rtlab.lifeline import die_with_parent

_EOF = object()
_STDERR_KEEP = 64 * 1024
RUN_TIMEOUT_S = 30.0


def run_to_end(argv: list[str], *, timeout_s: float, late: str, cannot: str,
               input: str | bytes | None = None, stdin: int | None = None,
               text: bool = True) -> subprocess.CompletedProcess[Any]:
    """Run `argv` here (a Transport's command line: `engine_argv`, `command_argv`, an
    SSH connection's) to completion; its stdout and stderr as text (bytes with
    text=False). RtlabError "LATE did not end within T s" when it does not end in time,
    "CANNOT: why" when it cannot be started. Text is decoded as UTF-8 with every byte
    that is not replaced: a board's shell may echo a binary (an engine of another
    architecture run as a script) and that must never raise."""
    try:
        return subprocess.run(argv, input=input, stdin=stdin, capture_output=True, text=text,
                              encoding="utf-8" if text else None,
                              errors="replace" if text else None,
                              timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired as exc:
        raise RtlabError(f"{late} did not end within {timeout_s:g} s") from exc
    except OSError as exc:
        raise RtlabError(f"{cannot}: {exc.strerror or exc}") from exc


class EngineProcess(abc.ABC):
    """A running engine."""

    @abc.abstractmethod
    def lines(self, poll_s: float) -> Iterator[str | None]:
        """Stdout lines as they arrive (with their newline; an unterminated last
        line without). Yields None whenever `poll_s` passes without a line, so the
        caller can run its watchdog and signal checks. Ends at end of output."""

    @abc.abstractmethod
    def send_signal(self, sig: int) -> None:
        """Ask the engine to stop (SIGINT/SIGTERM) or kill it (SIGKILL)."""

    @abc.abstractmethod
    def kill(self) -> None: ...

    @abc.abstractmethod
    def wait(self, timeout_s: float | None = None) -> int | None:
        """Exit code (negative: killed by that signal), or None if still running."""

    @abc.abstractmethod
    def stderr_text(self) -> str: ...


class PipeProcess(EngineProcess):
    """An engine started as a child process of this one, read through its pipes."""

    def __init__(self, popen: subprocess.Popen[bytes]) -> None:
        self._p = popen
        self._q: queue.Queue[object] = queue.Queue()
        self._stderr = bytearray()
        self._done = False
        threading.Thread(target=self._read_stdout, daemon=True).start()
        self._err_thread = threading.Thread(target=self._read_stderr, daemon=True)
        self._err_thread.start()

    @property
    def pid(self) -> int:
        return self._p.pid

    def _read_stdout(self) -> None:
        assert self._p.stdout is not None
        try:
            for raw in iter(self._p.stdout.readline, b""):
                self._q.put(raw.decode("utf-8", errors="replace"))
        finally:
            self._q.put(_EOF)

    def _read_stderr(self) -> None:
        assert self._p.stderr is not None
        for chunk in iter(lambda: self._p.stderr.read1(4096), b""):  # type: ignore[union-attr]
            if len(self._stderr) < _STDERR_KEEP:
                self._stderr.extend(chunk[: _STDERR_KEEP - len(self._stderr)])

    def lines(self, poll_s: float) -> Iterator[str | None]:
        while not self._done:
            try:
                item = self._q.get(timeout=poll_s)
            except queue.Empty:
                yield None
                continue
            if item is _EOF:
                self._done = True
                return
            yield item  # type: ignore[misc]

    def send_signal(self, sig: int) -> None:
        if self._p.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self._p.send_signal(sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def wait(self, timeout_s: float | None = None) -> int | None:
        try:
            code = self._p.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return None
        self._err_thread.join(timeout=1.0)
        return code

    def stderr_text(self) -> str:
        return self._stderr.decode("utf-8", errors="replace")


class Transport(abc.ABC):
    """A target and the way to start its engine."""

    name: str = "abstract"  # "local", "netns", "ssh"

    @property
    def target(self) -> str:
        """The target as the user names it ("local", a namespace, an SSH destination)."""
        return "local"

    @property
    def is_local(self) -> bool:
        """The engine runs on this machine (its /proc, /sys and tracefs are ours)."""
        return True

    @abc.abstractmethod
    def engine_argv(self, args: list[str]) -> list[str]:
        """The command line, run here, that starts `rtlab-probe ARGS` on the target."""

    @abc.abstractmethod
    def describe(self) -> str: ...

    def spawn(self, args: list[str], *, keep_as: str | None = None) -> EngineProcess:
        """Start a measurement `rtlab-probe ARGS` and stream its output. `keep_as`: a
        name under which a remote target keeps its own copy of the raw output (a
        dropped connection then loses nothing); local runs ignore it."""
        del keep_as
        try:
            # SIGTERM at rtlab's death: the engine stops as on Ctrl-C instead of
            # measuring on, unobserved, at RT priority
            popen = self.start_held(args, die_signal=signal.SIGTERM)
        except OSError as exc:
            raise RtlabError(f"cannot start the engine ({self.describe()}): "
                             f"{exc.strerror or exc}") from exc
        return PipeProcess(popen)

    def start_held(self, args: list[str], *, stdin: int | IO[Any] | None = subprocess.DEVNULL,
                   stderr: int | IO[Any] | None = subprocess.PIPE,
                   die_signal: int = signal.SIGTERM) -> subprocess.Popen[bytes]:
        """Start `rtlab-probe ARGS` on the target, stdout piped, held by rtlab: in its
        own process group (a terminal's Ctrl-C reaches only rtlab, which forwards the
        stop exactly once) and sent `die_signal` when rtlab dies, even by kill -9 (for a
        board: the local ssh process, whose end closes the engine's stdin lifeline
        there). A measurement (`spawn`) and a load on a board start this way. OSError
        when it cannot be started."""
        return subprocess.Popen(self.engine_argv(args), stdin=stdin, stdout=subprocess.PIPE,
                                stderr=stderr, process_group=0,
                                preexec_fn=die_with_parent(die_signal))

    def run(self, args: list[str], *, input: str | None = None,
            timeout_s: float = RUN_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
        """Run `rtlab-probe ARGS` to completion; its stdout and stderr as text.
        RtlabError when it cannot be started or does not end in time."""
        return run_to_end(self.engine_argv(args), input=input, timeout_s=timeout_s,
                          late=f"`rtlab-probe {' '.join(args[:2])}` on {self.target}",
                          cannot=f"cannot start the engine ({self.describe()})")

    def popen(self, args: list[str], *, stdin: int | IO[Any] | None = subprocess.PIPE,
              start_new_session: bool = True) -> subprocess.Popen[bytes]:
        """Start `rtlab-probe ARGS` with pipes to talk to it (the journaled applier).
        Own session: a Ctrl-C on the terminal reaches the host only."""
        try:
            return subprocess.Popen(self.engine_argv(args), stdin=stdin,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    start_new_session=start_new_session)
        except OSError as exc:
            raise RtlabError(f"cannot start the engine ({self.describe()}): "
                             f"{exc.strerror or exc}") from exc

    def command_argv(self, argv: list[str]) -> list[str]:
        """The command line, run here, that runs another program (a load) on the target."""
        return list(argv)

    def run_command(self, argv: list[str], *, timeout_s: float = RUN_TIMEOUT_S,
                    what: str) -> subprocess.CompletedProcess[str]:
        """Run another program on the target to completion (stdin empty); its output
        as text. RtlabError naming `what` when it cannot run or end in time (on a
        board also when the connection failed)."""
        return run_to_end(self.command_argv(argv), stdin=subprocess.DEVNULL,
                          timeout_s=timeout_s, late=f"{what} on {self.target}",
                          cannot=f"cannot run {what} on {self.target}")

    def close(self) -> None:  # noqa: B027 (nothing to release for most targets)
        """Release what reaching the target holds (an SSH connection)."""

    def __enter__(self) -> Transport:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class LocalTransport(Transport):
    """Run the probe on this machine."""

    name = "local"

    def __init__(self, probe: Path | str | None = None) -> None:
        self._probe = Path(probe) if probe else None

    @property
    def probe(self) -> Path:
        if self._probe is None:
            self._probe = find_probe()
        return self._probe

    def describe(self) -> str:
        return f"local ({self.probe})"

    def engine_argv(self, args: list[str]) -> list[str]:
        return [str(self.probe), *args]


class NetnsTransport(LocalTransport):
    """Run the probe on this machine inside network namespace `netns` (`ip netns exec`)."""

    name = "netns"

    def __init__(self, netns: str, probe: Path | str | None = None) -> None:
        super().__init__(probe)
        self.netns = netns

    @property
    def target(self) -> str:
        return f"netns:{self.netns}"

    def describe(self) -> str:
        return f"local, network namespace {self.netns} ({self.probe})"

    def engine_argv(self, args: list[str]) -> list[str]:
        return ["ip", "netns", "exec", self.netns, str(self.probe), *args]

    def command_argv(self, argv: list[str]) -> list[str]:
        return ["ip", "netns", "exec", self.netns, *argv]
