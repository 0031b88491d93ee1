# SPDX-License-Identifier: MIT
"""How the host reaches an engine: spawn `rtlab-probe ARGS`, read its stdout lines.

`Transport` is the seam for remote targets: `LocalTransport` runs the probe
here; an SSH transport (later) runs it on a board and streams the same lines
back. Everything above this module only sees `EngineProcess`.
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

from rtlab.engine.locate import find_probe
from rtlab.errors import RtlabError
from rtlab.lifeline import die_with_parent

_EOF = object()
_STDERR_KEEP = 64 * 1024


class EngineProcess(abc.ABC):
    """A running engine."""

    @abc.abstractmethod
    def lines(self, poll_s: float) -> Iterator[str | None]:
        """Stdout lines as they arrive (with their newline; an unterminated last
        line without). Yields None whenever `poll_s` passes without a line, so the
        caller can run its watchdog and signal checks. Ends at end of output."""

    @abc.abstractmethod
    def send_signal(self, sig: int) -> None: ...

    @abc.abstractmethod
    def kill(self) -> None: ...

    @abc.abstractmethod
    def wait(self, timeout_s: float | None = None) -> int | None:
        """Exit code (negative: killed by that signal), or None if still running."""

    @abc.abstractmethod
    def stderr_text(self) -> str: ...


class Transport(abc.ABC):
    """Where probes run."""

    name: str = "abstract"

    @abc.abstractmethod
    def spawn(self, args: list[str]) -> EngineProcess:
        """Start `rtlab-probe ARGS...` (args exclude the binary itself)."""

    @abc.abstractmethod
    def describe(self) -> str: ...


class _LocalProcess(EngineProcess):
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

    def spawn(self, args: list[str]) -> EngineProcess:
        try:
            popen = subprocess.Popen(
                [str(self.probe), *args],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                # Own process group: a terminal Ctrl-C reaches only rtlab, which
                # forwards it exactly once and then waits for the engine's result.
                process_group=0,
                # A kill -9 of rtlab ends the measurement too (SIGTERM: the engine
                # stops as on Ctrl-C instead of measuring on, unobserved, at RT priority).
                preexec_fn=die_with_parent(signal.SIGTERM),
            )
        except OSError as exc:
            raise RtlabError(f"cannot start {self.probe}: {exc.strerror or exc}") from exc
        return _LocalProcess(popen)
