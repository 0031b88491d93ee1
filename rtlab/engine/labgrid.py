# SPDX-License-Identifier: MIT
"""labgrid places as targets: `--target labgrid:PLACE` (docs/lab.md#labgrid).

The farm decides who holds a board. For the time of a command rtlab holds the place:
it acquires it, or uses it as it is when this user on this host holds it already (and
then leaves it held at the end). It reaches the board over the same SSH transport as
any board, at the address, user and port of the place's NetworkService resource, and
releases the place at the end.

The coordinator is found as labgrid's own client finds it: $LG_COORDINATOR (HOST:PORT),
else labgrid's default 127.0.0.1:20408. The holder's name is labgrid's too: host/user,
from $LG_HOSTNAME and $LG_USERNAME when set.

A guard process (`rtlab.engine.labgrid_guard`) talks to the coordinator through
labgrid's client library. rtlab holds its stdin: when rtlab ends in any way, `kill -9`
included, the pipe closes and the guard releases the place. While rtlab works, the
guard watches the reservation; when it can no longer be confirmed (coordinator gone,
exporter gone, place taken or released by someone else) rtlab says so in one line and
stops as on SIGTERM: the board is restored over SSH as after any interrupted run, and
the command ends with its interrupted exit code (130). A lost lock means another team
may get the board, so rtlab never goes on measuring it.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from rtlab.engine.place_spec import parse_place
from rtlab.errors import RtlabError, UsageError
from rtlab.textfmt import shown

COORDINATOR_ENV = "LG_COORDINATOR"
DEFAULT_COORDINATOR = "127.0.0.1:20408"  # labgrid-client's own default
CONNECT_TIMEOUT_S = 5.0  # the coordinator must answer within this
START_TIMEOUT_S = 60.0  # the guard's first answer (imports, connect, acquire) on a loaded host
STOP_TIMEOUT_S = 15.0
_COORD = re.compile(r"[A-Za-z0-9_.:\[\]-]{1,300}\Z")

_lost_once = threading.Lock()
_lost_said = False


def coordinator_address() -> str:
    """HOST:PORT of the coordinator ($LG_COORDINATOR, else labgrid's default)."""
    addr = os.environ.get(COORDINATOR_ENV, "").strip() or DEFAULT_COORDINATOR
    if not _COORD.match(addr):
        raise UsageError(f"${COORDINATOR_ENV} {shown(addr)}: expected HOST[:PORT] of the "
                         "labgrid coordinator, e.g. labgrid.example.org:20408")
    return addr


def _guard_error(place: str, coordinator: str, event: dict[str, Any]) -> RtlabError:
    kind = event.get("kind")
    msg = str(event.get("message") or "labgrid failed")
    if kind == "held":
        return RtlabError(msg, hint="wait until it is released, or ask its holder; "
                          "`labgrid-client -p PLACE show` shows the place")
    if kind == "unknown":
        return RtlabError(msg, hint="`labgrid-client places` lists them; "
                          f"${COORDINATOR_ENV} names the coordinator")
    if kind == "no-service":
        return RtlabError(msg, hint="export the board's SSH address as a NetworkService "
                          "and add it to the place, see docs/lab.md#labgrid")
    if kind == "unreachable":
        return RtlabError(msg, hint=f"start the coordinator or set ${COORDINATOR_ENV}="
                          "HOST:PORT, see docs/lab.md#labgrid")
    return RtlabError(f"labgrid place {place} (coordinator {coordinator}): {msg}")


def _on_lost_default(place: str, message: str) -> None:
    """One line, then stop this process as SIGTERM does (each command restores there)."""
    global _lost_said
    with _lost_once:
        first, _lost_said = not _lost_said, True
    if first:
        print(f"rtlab: {message}: the reservation can no longer be confirmed; stopping, "
              "the board is restored", file=sys.stderr, flush=True)
        os.kill(os.getpid(), signal.SIGTERM)


class PlaceLease:
    """A labgrid place held for the time of a command (module docstring)."""

    def __init__(self, spec: str, *, on_lost: Any = None) -> None:
        self.spec = spec
        self.place = parse_place(spec)
        self.coordinator = coordinator_address()
        self.on_lost = on_lost or _on_lost_default
        self.ssh_target: Any = None  # rtlab.engine.ssh.SshTarget once open
        self.acquired = False  # by this lease (False: the user held it already)
        self.holder = ""
        self.classes: list[str] = []  # the resource classes of the place
        self.lost: str | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._events: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._reader: threading.Thread | None = None
        self._closing = False

    def open(self) -> PlaceLease:
        if importlib.util.find_spec("labgrid") is None:
            raise RtlabError("labgrid is not installed: --target labgrid:PLACE needs it",
                             hint="pip install 'rtlab[labgrid]', see docs/lab.md#labgrid")
        # the guard imports this very rtlab, whichever way this process found it
        root = str(Path(__file__).resolve().parent.parent.parent)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            [root, *filter(None, [os.environ.get("PYTHONPATH")])])}
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "rtlab.engine.labgrid_guard", "--place", self.place,
                 "--coordinator", self.coordinator, "--timeout", f"{CONNECT_TIMEOUT_S:g}"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                start_new_session=True, close_fds=True, env=env)
        except OSError as exc:
            raise RtlabError(f"cannot start the labgrid guard: {exc.strerror or exc}") from exc
        self._reader = threading.Thread(target=self._read, args=(self._proc,),
                                        name=f"labgrid-{self.place}", daemon=True)
        self._reader.start()
        try:
            first = self._events.get(timeout=START_TIMEOUT_S)
        except queue.Empty:  # it may be acquiring: its pipe closed, it releases and ends
            self._stop()
            raise RtlabError(f"labgrid place {self.place}: no answer from the coordinator "
                             f"at {self.coordinator} within {START_TIMEOUT_S:g} s") from None
        if first is None or first.get("event") != "ready":
            self._stop(kill=True)  # it holds nothing: it acquires only when it is ready
            if first is None:
                raise RtlabError(f"labgrid place {self.place}: the guard ended without an "
                                 "answer")
            raise _guard_error(self.place, self.coordinator, first)
        self.acquired = bool(first.get("acquired"))
        self.holder = str(first.get("holder") or "")
        self.classes = [str(c) for c in first.get("classes") or []]
        try:
            self.ssh_target = _ssh_target(self.place, first)
        except BaseException:
            self.close()
            raise
        return self

    def _read(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        ready = False
        for raw in proc.stdout:
            try:
                event = json.loads(raw)
            except ValueError:
                continue
            if not isinstance(event, dict):
                continue
            if not ready:
                ready = True
                self._events.put(event)
                continue
            if event.get("event") == "lost" and not self._closing and self.lost is None:
                self.lost = str(event.get("message") or "the reservation is gone")
                self.on_lost(self.place, self.lost)
            elif event.get("event") in ("released", "release-failed"):
                self._events.put(event)
        self._events.put(None)

    def close(self) -> str | None:
        """Release the place if this lease acquired it (the guard does, once its stdin
        closes). Returns what went wrong releasing, or None."""
        self._closing = True
        return self._stop()

    def _stop(self, kill: bool = False) -> str | None:
        proc, self._proc = self._proc, None
        if proc is None:
            return None
        if kill:
            proc.kill()
            proc.wait(timeout=STOP_TIMEOUT_S)
            return None
        with contextlib.suppress(OSError):
            assert proc.stdin is not None
            proc.stdin.close()
        problem: str | None = None
        deadline = time.monotonic() + STOP_TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                ev = self._events.get(timeout=max(0.05, deadline - time.monotonic()))
            except queue.Empty:
                break
            if ev is None:
                break
            if ev.get("event") == "release-failed":
                problem = str(ev.get("message"))
        try:
            proc.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
            problem = problem or "the guard did not end"
        return problem


def _ssh_target(place: str, ready: dict[str, Any]) -> Any:
    from rtlab.engine.ssh import SshTarget

    address = str(ready.get("address") or "")
    user = str(ready.get("username") or "")
    port = ready.get("port")
    host = f"[{address}]" if ":" in address else address
    text = (f"{user}@" if user else "") + host + (f":{port}" if port else "")
    try:
        return SshTarget.parse(text, f"the NetworkService of labgrid place {place}")
    except UsageError as exc:
        raise RtlabError(exc.message) from None
