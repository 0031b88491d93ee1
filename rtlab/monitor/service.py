# SPDX-License-Identifier: MIT
"""`rtlab monitor`: watch boards indefinitely (docs/monitor.md).

One `Watcher` thread per board runs the engine in segments (`--segment`, one hour by
default): each segment is one engine run whose raw output is written line by line into
the state directory, whose snapshots feed the live totals (`LiveState`, read by the
exporter) and whose records up to the last one applied are named in the checkpoint.
An ended segment waits in `pending` until the store writer has stored it as a run;
while the store is unreachable segments pile up there (on disk) and are written when
it returns. A board that cannot be reached or whose engine fails is retried with a
growing pause (at most `retry_max_s`); the time it was not measured is a gap. The gap
is recorded the moment the board is back, when the next segment's engine header arrives
(the board answered and measures): counted, checkpointed at once, said in one line, and
written into that segment's provenance. The header's boot id tells a board that rebooted
from one whose connection dropped, and shows a reboot that no failure revealed (between
two segments) as a gap too.

The engine of a segment is started by its watcher thread and dies with it (SIGTERM,
docs/boards.md), so a monitor killed with kill -9 leaves no engine measuring; at the
next start the interrupted segment's raw file is fed from the checkpoint's mark on and
stored as a partial run: nothing counted twice, nothing lost.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rtlab.engine.board import transport_for
from rtlab.engine.session import EngineSession
from rtlab.errors import RtlabError
from rtlab.exitcodes import ExitCode
from rtlab.monitor import flight
from rtlab.monitor.checkpoint import MAX_GAPS, Checkpoint, Gap, Segment, StateDir
from rtlab.monitor.feed import FeedError, SegmentFeed
from rtlab.monitor.flight import MonitorTrace
from rtlab.monitor.live import LiveState
from rtlab.monitor.memory import release_free_memory
from rtlab.monitor.segments import segment_records, segment_run_id, store_segment
from rtlab.results.store import Store
from rtlab.trace.attribution import is_virtualized

LOCAL = "local"
STORE_RETRY_MAX_S = 600.0  # the longest pause before a refused segment is tried again


@dataclass
class MonitorOptions:
    targets: list[str]  # "local" for this machine
    engine_args: list[str]  # the probe and its options, without --duration
    state_dir: Path
    store: str | None = None
    segment_s: float = 3600.0
    duration_s: float | None = None  # stop after this long (None: until stopped)
    checkpoint_s: float = 5.0
    retry_min_s: float = 2.0
    retry_max_s: float = 60.0
    watchdog_s: float = 15.0
    store_retry_s: float = 10.0
    engine_dir: str | None = None
    # CPUs measured on this machine: the monitor itself keeps off them (None: all)
    measured_cpus: list[int] | None = None
    on_event: Callable[[str], None] = field(default=lambda _m: None)
    trace: MonitorTrace | None = None  # --trace: every segment's flight recorder

    def as_json(self) -> dict[str, Any]:
        out = {"targets": self.targets, "engine_args": self.engine_args,
               "store": self.store, "segment_s": self.segment_s}
        if self.trace is not None:
            out["trace"] = self.trace.as_json()
        return out


class Monitor:
    """The monitor's state and threads; `run()` blocks until stopped."""

    def __init__(self, opts: MonitorOptions, live: LiveState | None = None) -> None:
        self.opts = opts
        self.live = live or LiveState()
        self.state = StateDir(opts.state_dir)
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._wake_store = threading.Event()
        self._store_lock = threading.Lock()
        self._watchers: list[Watcher] = []
        self.cp: Checkpoint | None = None
        self.fatal: RtlabError | None = None
        self._last_save = 0.0
        # segments the store refused: raw file -> (failures, monotonic time of next try)
        self._store_backoff: dict[str, tuple[int, float]] = {}

    # lifecycle ------------------------------------------------------------------------
    def prepare(self) -> None:
        """Take the state directory, load the checkpoint, finish interrupted segments
        (before any engine starts). From here on the monitor's threads keep off the
        measured CPUs."""
        self._keep_off_measured_cpus()
        self.state.acquire()
        cp = self.state.load()
        mid = self.state.monitor_id(self.opts.as_json(), cp.monitor_id if cp else None)
        if cp is None or cp.monitor_id != mid:
            cp = Checkpoint(mid)
        self.cp = cp
        self.live.seed(cp.channels, cp.boards)
        for board, seg in list(cp.open.items()):
            self._replay(seg)
            del cp.open[board]
        for b in self.opts.targets:
            self.live.set_board(b, up=False, probe_ok=False, reason="starting",
                                store_pending=sum(1 for s in cp.pending if s.board == b))
        for b in cp.boards:  # watched before, not now: their totals stay, not their state
            if b.name not in self.opts.targets:
                self.live.set_board(b.name, up=False, probe_ok=False,
                                    reason="not watched by this monitor")
        self.save(force=True)

    def _replay(self, seg: Segment) -> None:
        """Feed the part of an interrupted segment's raw file the totals lack; the
        segment then waits for the store."""
        added, err = self._replay_records(seg)
        if err is not None:  # the records before it are in; the segment stands
            self.opts.on_event(f"{seg.board}: segment {seg.run_id}: {err}; the rest of its "
                               "raw file is not counted")
        seg.status = "ended" if seg.result else "interrupted"
        self.cp.pending.append(seg)  # type: ignore[union-attr]
        self.opts.on_event(f"{seg.board}: segment {seg.run_id} was interrupted; "
                           f"{added} records recovered from its raw file")

    def _replay_records(self, seg: Segment) -> tuple[int, FeedError | None]:
        """Apply the records after the segment's mark: how many, and the inconsistency
        that stopped it early, if one did."""
        feed = SegmentFeed()
        added = 0
        for rec in segment_records(self.state.abs(seg.file)):
            try:
                incs = feed.feed(rec)
            except FeedError as exc:
                return added, exc
            kind = rec.get("type")
            new = ((kind == "snapshot" and feed.seq > seg.seq)
                   or (kind == "result" and not seg.result))
            if not new:
                continue
            for inc in incs:
                self.live.update(seg.board, inc.channel, inc.cpu, feed.probe,
                                 **inc.as_update(time.time()))
            added += 1
            if kind == "snapshot":
                seg.seq = feed.seq
            else:
                seg.result = True
        return added, None

    def run(self) -> int:
        """Watch until `stop()` or --duration; the exit code."""
        assert self.cp is not None, "prepare() first"
        t_end = (time.monotonic() + self.opts.duration_s
                 if self.opts.duration_s is not None else None)
        writer = threading.Thread(target=self._store_loop, name="rtlab-store", daemon=True)
        writer.start()
        for b in self.opts.targets:
            w = Watcher(self, b)
            self._watchers.append(w)
            w.start()
        try:
            while not self._stop.is_set():
                if t_end is not None and time.monotonic() >= t_end:
                    break
                if self.fatal is not None:
                    break
                self._stop.wait(0.2)
                self.save()
        finally:
            self._stop.set()
            for w in self._watchers:
                w.stop()
            for w in self._watchers:
                w.join()
            self._wake_store.set()
            writer.join(timeout=30)
            self._store_pending(every=True)
            self.save(force=True)
        if self.fatal is not None:
            return int(self.fatal.code)
        return int(ExitCode.OK)

    def stop(self) -> None:
        self._stop.set()

    def _keep_off_measured_cpus(self) -> None:
        """On this machine the monitor's own threads (parsing, checkpoints, the store,
        the exporter) run on the CPUs not measured, as the engine's reporter does: every
        thread there is already (one a library started, say) and, by inheritance, every
        later one."""
        if LOCAL not in self.opts.targets or not self.opts.measured_cpus:
            return
        others = os.sched_getaffinity(0) - set(self.opts.measured_cpus)
        if not others:
            return
        for task in Path("/proc/self/task").iterdir():
            with contextlib.suppress(OSError):  # a thread that ended meanwhile
                os.sched_setaffinity(int(task.name), others)

    def pending_count(self) -> int:
        with self._lock:
            return len(self.cp.pending) if self.cp is not None else 0

    def close(self) -> None:
        self.state.release()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    # checkpoint -----------------------------------------------------------------------
    def save(self, force: bool = False) -> None:
        with self._lock:
            now = time.monotonic()
            if not force and now - self._last_save < self.opts.checkpoint_s:
                return
            assert self.cp is not None
            view = self.live.view()
            self.cp.channels = view.channels
            self.cp.boards = view.boards
            self.state.save(self.cp)
            self._last_save = now

    # segments (called by watchers) ------------------------------------------------------
    def new_segment(self, board: str, gap_s: float, gap_reason: str) -> Segment:
        with self._lock:
            assert self.cp is not None
            n = self.cp.counters.get(board, 0) + 1
            self.cp.counters[board] = n
            run_id = segment_run_id(self.cp.monitor_id, board, n)
            seg = Segment(board, run_id, self.state.segment_file(board, run_id), time.time(),
                          gap_before_s=gap_s, gap_reason=gap_reason)
            self.cp.open[board] = seg
            self.save(force=True)
            return seg

    def applied(self, seg: Segment, feed: SegmentFeed, rec: dict[str, Any]) -> None:
        """One record's increments, into the totals and the segment's mark together."""
        kind = rec.get("type")
        with self._lock:
            incs = feed.feed(rec)
            now = time.time()
            for inc in incs:
                self.live.update(seg.board, inc.channel, inc.cpu, feed.probe,
                                 **inc.as_update(now))
            if kind == "snapshot":
                seg.seq = feed.seq
            elif kind == "result":
                seg.result = True
        if kind in ("snapshot", "result"):
            self.live.set_board(seg.board, last_seen=time.time(), up=True)
            self.save()

    def end_segment(self, seg: Segment, measured: bool) -> None:
        with self._lock:
            assert self.cp is not None
            self.cp.open.pop(seg.board, None)
            if measured:
                seg.status = "ended"
                self.cp.pending.append(seg)
            else:
                self.state.remove(seg.file)
            self._update_pending(seg.board)
            self.save(force=True)
        self._wake_store.set()

    def abandon_open(self, board: str) -> None:
        """The board's open segment after a fault: what its raw file holds waits for the
        store like any segment (the totals have it), an empty one is dropped."""
        with self._lock:
            assert self.cp is not None
            seg = self.cp.open.get(board)
        if seg is not None:
            self.end_segment(seg, measured=self.state.abs(seg.file).exists())

    def add_gap(self, board: str, start: float, end: float, reason: str,
                rebooted: bool = False, seg: Segment | None = None) -> None:
        """Count a gap and checkpoint it at once (`seg`: the segment measuring after it,
        whose provenance names it)."""
        with self._lock:
            assert self.cp is not None
            self.cp.gaps.append(Gap(board, start, end, reason, rebooted))
            del self.cp.gaps[:-MAX_GAPS]  # the checkpoint keeps the last ones only
            self.live.add_board(board, gaps=1, gap_seconds=end - start,
                                reboots=1 if rebooted else 0)
            if seg is not None:
                seg.gap_before_s = end - start
                seg.gap_reason = reason + ("; the board rebooted"
                                           if rebooted and "reboot" not in reason else "")
            self.save(force=True)

    def _update_pending(self, board: str) -> None:
        assert self.cp is not None
        self.live.set_board(board, store_pending=sum(1 for s in self.cp.pending
                                                     if s.board == board))

    # the store writer -----------------------------------------------------------------
    def _store_loop(self) -> None:
        while not self._stop.is_set():
            self._wake_store.wait(self.opts.store_retry_s)
            self._wake_store.clear()
            if self._stop.is_set():
                break
            try:
                self._store_pending()
            except Exception as exc:  # the writer must outlive any fault
                self.opts.on_event(f"storing segments failed, tried again later: {exc!r}")

    def _store_pending(self, every: bool = False) -> None:
        """Store the pending segments (`every`: also those whose retry time has not
        come). One writer at a time: the final call at the end of run() may meet a writer
        thread that outlived its join's timeout."""
        with self._store_lock:
            self._store_pending_now(every)

    def _store_pending_now(self, every: bool) -> None:
        with self._lock:
            assert self.cp is not None
            now = time.monotonic()
            todo = [s for s in self.cp.pending
                    if every or self._store_backoff.get(s.file, (0, 0.0))[1] <= now]
        if not todo:
            return
        try:
            store = Store.open(self.opts.store)
        except RtlabError as exc:
            self.opts.on_event(f"store unreachable, {len(todo)} segment(s) wait in "
                               f"{self.state.path}: {exc.one_line()}")
            return
        try:
            for seg in todo:
                self._store_one(store, seg)
        finally:
            store.close()
            release_free_memory()  # what parsing the segments took, back to the system

    def _store_one(self, store: Store, seg: Segment) -> None:
        """One pending segment into the store. A segment the store refuses waits, with a
        growing pause, while the others go on: one bad segment never holds up the rest."""
        assert self.cp is not None
        target = None if seg.board == LOCAL else seg.board
        try:
            outcome, run_id = store_segment(store, self.state.abs(seg.file), seg,
                                            self.cp.monitor_id, target,
                                            virtualized=is_virtualized() if target is None
                                            else None)
        except (RtlabError, OSError) as exc:
            n = self._store_backoff.get(seg.file, (0, 0.0))[0] + 1
            pause = min(self.opts.store_retry_s * 2 ** (n - 1), STORE_RETRY_MAX_S)
            self._store_backoff[seg.file] = (n, time.monotonic() + pause)
            why = exc.one_line() if isinstance(exc, RtlabError) else str(exc)
            self.opts.on_event(f"{seg.board}: segment {seg.run_id} not stored yet "
                               f"(tried {n} time(s), again in {pause:.0f} s): {why}")
            return
        self._store_backoff.pop(seg.file, None)
        with self._lock:
            seg.run_id = run_id
            self.cp.pending.remove(seg)
            if outcome != "empty":
                self.live.add_board(seg.board, segments=1)
            self._update_pending(seg.board)
            self.save(force=True)
        flight.forget(self.state.abs(seg.file))
        self.state.remove(seg.file)
        if outcome == "stored":
            self.opts.on_event(f"{seg.board}: stored segment {run_id}")


class Watcher(threading.Thread):
    """One board: connect, measure segment after segment, reconnect after a failure."""

    def __init__(self, mon: Monitor, board: str) -> None:
        super().__init__(name=f"rtlab-watch-{board}", daemon=True)
        self.mon = mon
        self.board = board
        self._session: EngineSession | None = None
        self._session_lock = threading.Lock()
        self._stopped = threading.Event()
        # the outage going on (unix time it began, the reason it began with)
        self.down_since: float | None = None
        self.down_reason = ""
        # unix time of the board's last engine record (header, snapshot or result)
        self.seen: float | None = None
        # what the latest header said of the board's boot: (boot id, monotonic ns)
        self.boot: tuple[str | None, int | None] = (None, None)

    def stop(self) -> None:
        self._stopped.set()
        with self._session_lock:
            if self._session is not None:
                self._session.request_stop(signal.SIGINT)

    def run(self) -> None:
        """Watch until stopped; a fault of any kind (a full disk under the state
        directory, a bug) marks the board down and is retried, never ends the watching.
        An outage still going on when the monitor stops is recorded as a gap up to then."""
        while not self._stopped.is_set():
            try:
                self._watch()
                break
            except Exception as exc:  # see the docstring
                self.mon.abandon_open(self.board)
                self._down(f"monitor fault, retried: {exc!r}")
                self._stopped.wait(self.mon.opts.retry_max_s)
        if self.down_since is not None:
            self.mon.add_gap(self.board, self.down_since, time.time(),
                             f"{self.down_reason} (still down when the monitor stopped)")
            self.down_since = None

    def _watch(self) -> None:
        mon = self.mon
        pause = mon.opts.retry_min_s
        last_end: float | None = None
        first = True
        while not self._stopped.is_set():
            try:
                transport = transport_for(None if self.board == LOCAL else self.board,
                                          engine_dir=mon.opts.engine_dir)
            except RtlabError as exc:
                self._down(exc.one_line())
                self._stopped.wait(pause)
                pause = min(pause * 2, mon.opts.retry_max_s)
                continue
            try:
                while not self._stopped.is_set():
                    now = time.time()
                    gap = 0.0 if last_end is None else max(0.0, now - last_end)
                    if self.down_since is not None:
                        gap = now - self.down_since
                    seg = mon.new_segment(self.board, gap,
                                          self.down_reason if self.down_since else "")
                    ok, why, code = self._segment(transport, seg)
                    last_end = time.time()
                    if ok:  # its header ended the outage before it, if there was one
                        pause = mon.opts.retry_min_s
                        first = False
                        continue
                    if first and code in (ExitCode.USAGE, ExitCode.SKIPPED):
                        # the engine refuses this set-up: retrying does not help
                        mon.fatal = RtlabError(f"{self.board}: {why}", code=code)
                        mon.stop()
                        return
                    self._down(why)
                    break
            finally:
                transport.close()
            self._stopped.wait(pause)
            pause = min(pause * 2, mon.opts.retry_max_s)

    def _down(self, why: str) -> None:
        """The board is down: not measured since its last record (or, never seen yet,
        since now). The outage keeps the reason it began with; the board's state shows
        the latest."""
        self.mon.live.set_board(self.board, up=False, probe_ok=False, reason=why)
        self.mon.opts.on_event(f"{self.board}: down: {why}")
        if self.down_since is None:
            self.down_since = self.seen if self.seen is not None else time.time()
            self.down_reason = why

    def _answered(self, seg: Segment, header: dict[str, Any]) -> None:
        """A segment's engine header: the board answered and measures. The outage before
        it, or a reboot that no failure showed (between two segments: its boot id
        changed), is a gap: recorded, checkpointed and said now, not when the segment
        ends or the monitor stops."""
        now = time.time()
        system = header.get("system") or {}
        boot_id = system.get("boot_id") if isinstance(system.get("boot_id"), str) else None
        mono = header.get("start_monotonic_ns")
        boot = (boot_id or None, mono if isinstance(mono, int) else None)
        rebooted = _rebooted(self.boot, boot)
        self.boot = boot
        last_seen, self.seen = self.seen, now
        if self.down_since is not None:
            start, reason = self.down_since, self.down_reason
            line = (f"back after {now - start:.1f} s{', rebooted' if rebooted else ''} "
                    f"(down since {_clock(start, now)}: {reason})")
        elif rebooted and last_seen is not None:
            start, reason = last_seen, "rebooted between two segments"
            line = (f"rebooted between two segments: not measured for {now - start:.1f} s "
                    f"(since {_clock(start, now)})")
        else:
            return
        self.down_since, self.down_reason = None, ""
        self.mon.add_gap(self.board, start, now, reason, rebooted=rebooted, seg=seg)
        self.mon.opts.on_event(f"{self.board}: {line}")

    def _trace_home(self, transport: Any, raw: Path) -> None:
        """A board's flight windows of the segment, fetched beside its raw file."""
        if self.mon.opts.trace is None:
            return
        why = flight.bring_home(transport, raw)
        if why is not None:
            self.mon.opts.on_event(f"{self.board}: {why}")

    def _segment(self, transport: Any, seg: Segment) -> tuple[bool, str, int | None]:
        """Run one segment: (measured something, why not, engine exit code)."""
        mon = self.mon
        feed = SegmentFeed(live=True)
        args = [*mon.opts.engine_args, "--duration", f"{int(mon.opts.segment_s * 1000)}ms"]
        raw = mon.state.abs(seg.file)
        if mon.opts.trace is not None:
            args += mon.opts.trace.engine_args(flight.target_dir(transport, raw))

        def on_record(rec: dict[str, Any]) -> None:
            if rec.get("type") == "header":
                eff = rec.get("effective") or {}
                system = rec.get("system") or {}
                mon.live.set_board(self.board, up=True, reason="",
                                   probe_ok=bool(eff.get("rt_valid")),
                                   kernel=str(system.get("release") or ""),
                                   preempt=str(system.get("preempt") or ""),
                                   machine=str(system.get("machine") or ""),
                                   engine_version=str(rec.get("engine_version") or ""))
            try:
                mon.applied(seg, feed, rec)
            except FeedError as exc:
                mon.opts.on_event(f"{self.board}: {exc}; segment ends")
                if self._session is not None:
                    self._session.request_stop(signal.SIGINT)
                return
            if rec.get("type") == "header":  # a header the feed took: the board is back
                self._answered(seg, rec)
            else:
                self.seen = time.time()

        session = EngineSession(transport, args, mon.state.abs(seg.file),
                                watchdog_s=mon.opts.watchdog_s, on_record=on_record)
        with self._session_lock:
            self._session = session
            if self._stopped.is_set():
                session.request_stop(signal.SIGINT)
        try:
            outcome = session.run()
        except (RtlabError, OSError) as exc:
            # what was measured before the fault is in the totals: it is stored too
            self._trace_home(transport, raw)
            mon.end_segment(seg, measured=session.collector.state is not None)
            why = exc.one_line() if isinstance(exc, RtlabError) else f"{exc}"
            return False, why, None
        finally:
            with self._session_lock:
                self._session = None
        measured = outcome.collector.state is not None
        self._trace_home(transport, raw)
        mon.end_segment(seg, measured=measured)
        code = outcome.exit_code
        if measured and (code in (0, 130) or self._stopped.is_set()):
            return True, "", code
        why = outcome.stderr_line() or (outcome.notes[0] if outcome.notes else
                                        f"engine exit {code}")
        if code == 255 and not transport.is_local:
            why = f"the SSH connection was lost ({why})"
        return measured and code == 3, why, code


def _rebooted(before: tuple[str | None, int | None], now: tuple[str | None, int | None]
              ) -> bool:
    """Whether a board rebooted between two engine headers: its boot id changed, or
    (an engine that does not report it) its monotonic clock went back."""
    (id0, mono0), (id1, mono1) = before, now
    if id0 is not None and id1 is not None:
        return id0 != id1
    return mono0 is not None and mono1 is not None and mono1 < mono0


def _clock(t: float, now: float) -> str:
    """The local time of `t`: HH:MM:SS, with the date when it is not `now`'s day."""
    a, b = time.localtime(t), time.localtime(now)
    fmt = "%H:%M:%S" if a[:3] == b[:3] else "%Y-%m-%d %H:%M:%S"
    return time.strftime(fmt, a)
