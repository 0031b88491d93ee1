# SPDX-License-Identifier: MIT
"""The guard of one labgrid place: `python -m rtlab.engine.labgrid_guard --place P
--coordinator HOST:PORT` (started by `rtlab.engine.labgrid.PlaceLease`, never by hand).

It talks to the coordinator through labgrid's own client library, acquires the place
(or finds it already held by this user and host, and then leaves it held), reads the
place's NetworkService and writes one JSON line on stdout:

    {"event": "ready", "address": ..., "username": ..., "port": ..., "acquired": true}
    {"event": "error", "kind": "unknown|held|no-service|unreachable|failed", "message": ...}

Then it keeps watching the reservation. When it can no longer be confirmed (the
coordinator is gone, the exporter that exports the place's resources is gone, someone
released or took the place) it writes `{"event": "lost", "message": ...}` once.

Its stdin is the lifeline: rtlab holds the other end of the pipe. When it closes (rtlab
ended, normally or by `kill -9`) the guard releases the place if it acquired it, and
exits. It runs in a session of its own, so a terminal's Ctrl-C reaches rtlab (which
closes the pipe when it has restored the board), not the guard.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
from typing import Any

WATCH_S = 0.5
RELEASE_TIMEOUT_S = 10.0


def _avail(entry: Any) -> bool:
    """A resource entry that its exporter still offers (an exporter that disconnected
    leaves an entry without data)."""
    return entry is not None and bool(entry.data.get("avail", False))


def _say(event: str, **fields: Any) -> None:
    with contextlib.suppress(OSError, ValueError):  # rtlab may be gone (kill -9)
        sys.stdout.write(json.dumps({"event": event, **fields}) + "\n")
        sys.stdout.flush()


class Guard:
    def __init__(self, place: str, coordinator: str, timeout_s: float) -> None:
        self.place = place
        self.coordinator = coordinator
        self.timeout_s = timeout_s
        self.session: Any = None
        self.acquired = False  # by this guard: released at the end
        self.service_path: tuple[str, str, str, str] | None = None
        self.lost = False

    # ---------------------------------------------------------------- coordinator
    async def connect(self) -> bool:
        from labgrid.remote.client import ClientSession
        from labgrid.util.proxy import proxymanager

        address = proxymanager.get_grpc_address(self.coordinator, default_port=20408)
        self.session = ClientSession(address, asyncio.get_running_loop())
        try:
            await asyncio.wait_for(self.session.start(), self.timeout_s)
        except TimeoutError:
            _say("error", kind="unreachable",
                 message=f"the labgrid coordinator at {self.coordinator} did not answer "
                         f"within {self.timeout_s:g} s")
            return False
        except Exception:  # labgrid's ServerError, grpc errors: the coordinator is not there
            _say("error", kind="unreachable",
                 message=f"cannot reach the labgrid coordinator at {self.coordinator}")
            return False
        return True

    def me(self) -> str:
        return f"{self.session.gethostname()}/{self.session.getuser()}"

    def _services(self, place: Any) -> list[tuple[str, str, str, str]]:
        """The paths of the place's NetworkService resources: those it acquired, or
        those that match it while it is idle."""
        if place.acquired:
            paths = [tuple(p) for p in place.acquired_resources]
        else:
            paths = [(e, g, r.cls, n) for e, groups in self.session.resources.items()
                     for g, group in groups.items() for n, r in group.items()
                     if "cls" in r.data and place.getmatch((e, g, r.cls, n)) is not None]
        return sorted(p for p in paths if p[2] == "NetworkService")

    def _entry(self, path: tuple[str, str, str, str]) -> Any:
        exporter, group, _, name = path
        return self.session.resources.get(exporter, {}).get(group, {}).get(name)

    async def acquire(self) -> bool:
        import grpc
        from labgrid.remote.generated import labgrid_coordinator_pb2 as pb2

        place = self.session.places.get(self.place)
        if place is None:
            known = ", ".join(sorted(self.session.places)[:8]) or "none"
            _say("error", kind="unknown",
                 message=f"the labgrid coordinator at {self.coordinator} has no place "
                         f"{self.place!r} (places: {known})")
            return False
        if not self._services(place):
            _say("error", kind="no-service",
                 message=f"labgrid place {self.place} has no NetworkService resource: "
                         "rtlab reaches a board over SSH at the address it names")
            return False
        if place.acquired and place.acquired != self.me():
            _say("error", kind="held", holder=place.acquired,
                 message=f"labgrid place {self.place} is held by {place.acquired}")
            return False
        if not place.acquired:
            try:
                await self.session.stub.AcquirePlace(pb2.AcquirePlaceRequest(
                    placename=self.place))
                await self.session.sync_with_coordinator()
            except grpc.aio.AioRpcError as exc:
                now = self.session.places.get(self.place)
                holder = now.acquired if now is not None else None
                if holder and holder != self.me():
                    _say("error", kind="held", holder=holder,
                         message=f"labgrid place {self.place} is held by {holder}")
                else:
                    _say("error", kind="failed",
                         message=f"cannot acquire labgrid place {self.place}: "
                                 f"{exc.details()}")
                return False
            self.acquired = True
        place = self.session.places[self.place]
        services = self._services(place)
        entry = self._entry(services[0]) if services else None
        if not _avail(entry):
            await self.release()
            _say("error", kind="no-service",
                 message=f"the NetworkService of labgrid place {self.place} is not "
                         "available (is its exporter running?)")
            return False
        self.service_path = services[0]
        args = entry.args
        _say("ready", address=str(args.get("address", "")),
             username=str(args.get("username") or ""), port=int(args.get("port") or 22),
             acquired=self.acquired, holder=self.me(), resource="/".join(services[0]),
             classes=sorted({p[2] for p in place.acquired_resources}))
        return True

    async def release(self) -> None:
        if not self.acquired:
            return
        from labgrid.remote.generated import labgrid_coordinator_pb2 as pb2

        self.acquired = False
        if self.session.stopping.is_set():
            _say("release-failed", message="the coordinator is unreachable")
            return
        try:
            await asyncio.wait_for(self.session.stub.ReleasePlace(
                pb2.ReleasePlaceRequest(placename=self.place)), RELEASE_TIMEOUT_S)
            await asyncio.wait_for(self.session.sync_with_coordinator(), RELEASE_TIMEOUT_S)
        except Exception as exc:  # the coordinator went away at the end: said, not raised
            _say("release-failed", message=str(exc) or type(exc).__name__)
            return
        _say("released")

    # ---------------------------------------------------------------- watching
    def why_lost(self) -> str | None:
        if self.session.stopping.is_set():
            return f"the labgrid coordinator at {self.coordinator} is gone"
        place = self.session.places.get(self.place)
        if place is None:
            return f"labgrid place {self.place} was deleted"
        if place.acquired != self.me():
            return (f"labgrid place {self.place} is now held by {place.acquired}"
                    if place.acquired else f"labgrid place {self.place} was released")
        assert self.service_path is not None
        if not _avail(self._entry(self.service_path)):
            return (f"the exporter {self.service_path[0]} of labgrid place {self.place} "
                    "is gone")
        return None

    async def watch(self) -> None:
        loop = asyncio.get_running_loop()
        closed = asyncio.Event()

        def readable() -> None:
            try:
                data = os.read(0, 4096)
            except OSError:
                data = b""
            if not data:
                loop.remove_reader(0)
                closed.set()

        loop.add_reader(0, readable)
        for sig in (signal.SIGTERM, signal.SIGHUP):  # stopped: release as at the end
            loop.add_signal_handler(sig, closed.set)
        while not closed.is_set():
            if not self.lost:
                try:
                    why = self.why_lost()
                except Exception as exc:  # cannot tell: not confirmed
                    why = f"labgrid place {self.place}: {exc!r}"
                if why is not None:
                    self.lost = True
                    _say("lost", message=why)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(closed.wait(), WATCH_S)

    async def main(self) -> int:
        if not await self.connect():
            return 1
        try:
            try:
                if not await self.acquire():
                    return 1
                await self.watch()
            finally:  # whatever happened once acquired, the place is given back
                await self.release()
            return 0
        finally:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.session.stop(), 5)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.session.close(), 5)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rtlab.engine.labgrid_guard")
    parser.add_argument("--place", required=True)
    parser.add_argument("--coordinator", required=True)
    parser.add_argument("--timeout", type=float, default=5.0)
    args = parser.parse_args(argv)
    logging.disable(logging.CRITICAL)  # labgrid logs to stderr; rtlab reads our events
    try:
        return asyncio.run(Guard(args.place, args.coordinator, args.timeout).main())
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # said on stdout as an event, never a traceback
        _say("error", kind="failed", message=f"labgrid: {exc!r}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
