# SPDX-License-Identifier: MIT
"""Explain each latency spike from scheduler, IRQ and timer trace events.

For a spike on CPU c (deadline D, wake W, both CLOCK_MONOTONIC ns) we replay
that CPU's events from D - margin to W, keeping track of the current task and
of the stack of interrupt-like contexts (hard IRQ, x86 vector, softirq, hrtimer
callback). Every nanosecond of [D, W] is given to the innermost context active
at that time, so the parts add up to the latency exactly:

* other tasks that held the CPU (pid, comm, prio, time held, IRQ time excluded),
* hard IRQs, x86 vectors (local timer, IPIs), softirqs and hrtimer callbacks,
* the probe's own wake path (its timer's callback, scheduling, return to user),
* idle: the CPU sat idle although the deadline had passed -> the timer interrupt
  arrived late (C-state exit, or time the vCPU/CPU was not running at all),
* gaps: an interval without any event longer than `gap_ns` inside a context that
  is normally short (IRQ, vector, hrtimer, own wake path, idle).

Idle-late time and gaps are UNEXPLAINED: the guest saw nothing run, so the time
went to the hypervisor (host preemption of the vCPU) or, on bare metal, to SMIs,
firmware or hardware. Everything here is a pure function of its inputs.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from rtlab.trace.causes import Cause, Component, Spike, fmt_ns
from rtlab.trace.ringbuf import Event
from rtlab.trace.spike_sources import read_samples, spikes_from_markers, spikes_from_samples

SOFTIRQ_NAMES = (
    "HI",
    "TIMER",
    "NET_TX",
    "NET_RX",
    "BLOCK",
    "IRQ_POLL",
    "TASKLET",
    "SCHED",
    "HRTIMER",
    "RCU",
)
DEFAULT_MARGIN_NS = 20_000_000
DEFAULT_GAP_NS = 100_000
DEFAULT_LEAD_NS = 1_000_000
_SHORT_KINDS = frozenset({"irq", "vector", "hrtimer", "wake_path", "ipi"})
_VECTOR_RE = re.compile(r"^(?P<name>\w+)_(?P<edge>entry|exit)$")
_VECTOR_EVENTS = frozenset(
    {
        "local_timer",
        "reschedule",
        "call_function",
        "call_function_single",
        "irq_work",
        "x86_platform_ipi",
        "thermal_apic",
        "error_apic",
        "spurious_apic",
        "deferred_error_apic",
        "threshold_apic",
        "reboot",
    }
)


# -- the replay ------------------------------------------------------------------------


def _ctx_of(ev: Event) -> tuple[str, str, tuple[str, object], bool] | None:
    """(kind, name, key, is_entry) for context entry/exit events, else None."""
    n = ev.name
    if n == "irq_handler_entry":
        return "irq", str(ev.fields.get("name", "")), ("irq", ev.fields.get("irq")), True
    if n == "irq_handler_exit":
        return "irq", "", ("irq", ev.fields.get("irq")), False
    if n in ("softirq_entry", "softirq_exit"):
        vec = int(ev.fields.get("vec", -1))  # type: ignore[arg-type]
        name = SOFTIRQ_NAMES[vec] if 0 <= vec < len(SOFTIRQ_NAMES) else str(vec)
        return "softirq", name, ("softirq", vec), n.endswith("entry")
    if n == "hrtimer_expire_entry":
        return "hrtimer", "", ("hrtimer", ev.fields.get("hrtimer")), True
    if n == "hrtimer_expire_exit":
        return "hrtimer", "", ("hrtimer", ev.fields.get("hrtimer")), False
    if n in ("ipi_entry", "ipi_exit"):
        return "ipi", str(ev.fields.get("reason", "")), ("ipi", None), n == "ipi_entry"
    m = _VECTOR_RE.match(n)
    if m and m["name"] in _VECTOR_EVENTS:
        return "vector", m["name"], ("vector", m["name"]), m["edge"] == "entry"
    return None


@dataclass
class _Frame:
    kind: str
    name: str
    key: tuple[str, object]
    ident: int | None
    start: int
    own: bool = False  # the probe's own timer callback


def _infer_tid(evs: Sequence[Event], spike: Spike) -> int | None:
    """The task running at wake time: next_pid of the last sched_switch before wake."""
    for ev in reversed(evs):
        if ev.name == "sched_switch" and ev.ts <= spike.wake_ns:
            pid = int(ev.fields.get("next_pid", 0))  # type: ignore[arg-type]
            return pid or None
    return None


def _frame_of(
    ev: Event, ctx: tuple[str, str, tuple[str, object], bool], resolve: Callable[[int], str] | None
) -> _Frame:
    """The frame an entry event opens."""
    kind, name, key, _ = ctx
    f = ev.fields
    ident: int | None = None
    if kind == "irq":
        ident = int(f.get("irq", -1))  # type: ignore[arg-type]
    elif kind == "softirq":
        ident = key[1]  # type: ignore[assignment]
    elif kind == "hrtimer":
        fn = f.get("function")
        name = (
            resolve(fn)
            if (resolve and isinstance(fn, int))
            else (f"{fn:#x}" if isinstance(fn, int) else "?")
        )
    return _Frame(kind, name, key, ident, ev.ts)


_Task = tuple[int, str, int | None]  # pid, comm, prio


def _state_before(
    evs: Sequence[Event], k: int, resolve: Callable[[int], str] | None
) -> tuple[_Task, list[_Frame], int] | None:
    """(current task, open frames, inferred switches) just before evs[k], found by
    scanning back to the last sched_switch; None when there is none before k (or k is 0).

    Interrupt frames do not span a context switch, so the frames still open at k are the
    entries after that switch whose exits come before k.
    """
    if k <= 0:
        return None
    closed: dict[tuple[str, object], int] = {}
    open_rev: list[_Frame] = []
    cur: _Task | None = None
    for j in range(k - 1, -1, -1):
        ev = evs[j]
        n = ev.name
        if n == "sched_switch":
            f = ev.fields
            cur = (int(f["next_pid"]), str(f["next_comm"]), int(f["next_prio"]))  # type: ignore[arg-type]
            break
        if n.endswith(("_entry", "_exit")):
            ctx = _ctx_of(ev)
            if ctx is None:
                continue
            key = ctx[2]
            if not ctx[3]:
                closed[key] = closed.get(key, 0) + 1
            elif closed.get(key):
                closed[key] -= 1
            else:
                open_rev.append(_frame_of(ev, ctx, resolve))
    if cur is None:
        return None
    stack = open_rev[::-1][-17:]
    implicit = 0
    last = evs[k - 1]
    moved = last.name != "sched_switch" and last.pid >= 0 and last.pid != cur[0]
    if moved and not (last.pid == 0 and stack):
        # The replay would have named it when its first event of this run was seen.
        m = k - 1
        while m > 0 and evs[m - 1].pid == last.pid:
            m -= 1
        comm, prio = _latest_name(evs, last.pid, m)
        cur = (last.pid, comm, prio)
        implicit = 1
    return cur, stack, implicit


def _latest_name(evs: Sequence[Event], pid: int, before: int) -> tuple[str, int | None]:
    """(comm, prio) of the last wake-up of `pid` before evs[before], else ("?", None)."""
    for j in range(before - 1, -1, -1):
        ev = evs[j]
        if ev.name in ("sched_waking", "sched_wakeup") and ev.fields.get("pid") == pid:
            return str(ev.fields["comm"]), int(ev.fields["prio"])  # type: ignore[arg-type]
    return "?", None


def attribute_spike(
    events: Sequence[Event],
    spike: Spike,
    *,
    gap_ns: int = DEFAULT_GAP_NS,
    idle_allowance_ns: int = 0,
    resolve: Callable[[int], str] | None = None,
    trace_start_ns: int | None = None,
    virtualized: bool | None = None,
    lead_ns: int | None = DEFAULT_LEAD_NS,
) -> Cause:
    """Explain one spike from the CPU's events covering [deadline - margin, wake].

    `events` are that CPU's events in time order (extra ones outside the window are
    ignored). `idle_allowance_ns` is the idle-exit time considered normal (the
    deepest cpuidle state's exit latency); idle time beyond it is unexplained.
    `lead_ns`: the full replay starts this long before the deadline; the state at that
    point (current task, open interrupt frames) comes from a cheap backward scan to the
    last context switch. None replays the whole window (same result, slower on busy CPUs).
    """
    d, w = spike.deadline_ns, spike.wake_ns
    cause = Cause(spike.cpu, d, w, w - d, spike.tid, spike.source, "full", virtualized=virtualized)
    evs = [e for e in events if e.ts <= w]
    after = next((e for e in events if e.ts > w), None)  # reveals an unseen switch-in
    if not evs or (trace_start_ns is not None and trace_start_ns > d):
        cause.coverage = "none" if not evs or evs[-1].ts < d else "partial"
    if not evs:
        cause.unexplained_ns = cause.latency_ns
        cause.notes.append("no trace events in the window")
        return cause
    tid = spike.tid if spike.tid is not None else _infer_tid(evs, spike)
    cause.tid = tid

    # Who runs at the start of the replay: the last switch before the deadline, else
    # the prev task of the first switch, else the probe itself (it never slept).
    cur: tuple[int, str, int | None] | None = None
    for ev in evs:
        if ev.name == "sched_switch":
            f = ev.fields
            cur = (int(f["prev_pid"]), str(f["prev_comm"]), int(f["prev_prio"]))  # type: ignore[arg-type]
            break
    if cur is None:
        cur = (tid or -1, "?", None)

    comps: dict[tuple[str, object], Component] = {}
    stack: list[_Frame] = []
    unexplained = 0
    names: dict[int, tuple[str, int | None]] = {}  # pid -> (comm, prio) seen in the window
    implicit = 0
    begin, t_prev = 0, evs[0].ts
    if lead_ns is not None:
        k = bisect.bisect_left(evs, d - max(lead_ns, 2 * gap_ns), key=lambda e: e.ts)
        state = _state_before(evs, k, resolve)
        if state is not None:
            cur, stack, implicit = state
            begin, t_prev = k, evs[k - 1].ts

    def add(
        kind: str,
        name: str,
        ident: int | None,
        dur: int,
        prio: int | None = None,
        count: bool = False,
    ) -> None:
        key = (kind, ident if kind in ("irq", "task", "softirq") else name)
        c = comps.get(key)
        if c is None:
            c = comps[key] = Component(kind, name, ident, 0, 0, prio)
        c.duration_ns += dur
        if count:
            c.count += 1

    def account(t0: int, t1: int) -> None:
        nonlocal unexplained
        a, b = max(t0, d), min(t1, w)
        if b <= a:
            return
        dur = b - a
        if stack:
            fr = stack[-1]
            kind = "wake_path" if fr.own else fr.kind
            name = "own timer" if fr.own else fr.name
            ident = fr.ident
            prio = None
        else:
            pid, comm, prio = cur
            if pid == 0 and cause.waking_ns is not None:
                kind, name, ident = "wake_path", "leaving idle", None  # probe already woken
            elif pid == 0:
                kind, name, ident = "idle", "idle", None
            elif tid is not None and pid == tid:
                kind, name, ident = "wake_path", "scheduling", None
            else:
                kind, name, ident = "task", comm, pid
        if kind == "idle":
            unexplained += dur  # the allowance is subtracted at the end
            add("idle", "idle", None, dur)
            return
        if kind in _SHORT_KINDS and (t1 - t0) > gap_ns:
            unexplained += dur
            add("gap", f"in {kind} {name}".strip(), None, dur)
            return
        add(kind, name, ident, dur, prio)

    for i in range(begin, len(evs)):
        ev = evs[i]
        n = ev.name
        f = ev.fields
        if n in ("sched_waking", "sched_wakeup"):
            names[int(f["pid"])] = (str(f["comm"]), int(f["prio"]))  # type: ignore[arg-type]
        if n != "sched_switch" and ev.pid >= 0 and ev.pid != cur[0] and not (ev.pid == 0 and stack):
            # Every event carries the pid of the task current on its CPU. A different
            # pid means a switch we did not see (some kernels do not trace switches out
            # of idle): it happened in (t_prev, ev.ts]; give that interval to the new task.
            comm, prio = names.get(ev.pid) or _latest_name(evs, ev.pid, i)
            cur = (ev.pid, comm, prio)
            implicit += 1
            if tid is not None and ev.pid == tid and t_prev >= d and cause.switch_in_ns is None:
                cause.switch_in_ns = t_prev - d
        account(t_prev, ev.ts)
        t_prev = ev.ts
        if n == "sched_switch":
            cur = (int(f["next_pid"]), str(f["next_comm"]), int(f["next_prio"]))  # type: ignore[arg-type]
            if tid is not None and cur[0] == tid and ev.ts >= d and cause.switch_in_ns is None:
                cause.switch_in_ns = ev.ts - d
            continue
        if n in ("sched_waking", "sched_wakeup") and tid is not None and f.get("pid") == tid:
            if ev.ts >= d - gap_ns:
                attr = "waking_ns" if n == "sched_waking" else "wakeup_ns"
                if getattr(cause, attr) is None:
                    setattr(cause, attr, ev.ts - d)
            if n == "sched_waking" and stack and stack[-1].kind == "hrtimer":
                fr = stack[-1]  # the probe's own sleep timer: part of its wake path
                if not fr.own and fr.start >= d:
                    c = comps.get(("hrtimer", fr.name))
                    if c is not None and c.count:
                        c.count -= 1
                fr.own = True
                if cause.timer_expire_ns is None and fr.start >= d - gap_ns:
                    cause.timer_expire_ns = fr.start - d
            continue
        if n == "cpu_idle":
            state = int(f.get("state", 0))  # type: ignore[arg-type]
            if state == 0xFFFFFFFF and ev.ts >= d and cause.idle_exit_ns is None:
                cause.idle_exit_ns = ev.ts - d
            continue
        ctx = _ctx_of(ev)
        if ctx is None:
            continue
        if ctx[3]:
            fr = _frame_of(ev, ctx, resolve)
            if len(stack) > 16:
                stack.clear()  # lost exits (dropped events): start over
            stack.append(fr)
            if ev.ts >= d:
                add(fr.kind, fr.name, fr.ident, 0, count=True)
        else:
            key = ctx[2]
            for j in range(len(stack) - 1, -1, -1):
                if stack[j].key == key:
                    del stack[j:]
                    break
    if after is not None and after.pid > 0 and after.pid != cur[0] and after.pid == tid:
        cur = (after.pid, "?", None)
        implicit += 1
        if cause.switch_in_ns is None and t_prev >= d:
            cause.switch_in_ns = t_prev - d
    account(t_prev, w)
    if implicit:
        cause.notes.append(f"{implicit} context switch(es) inferred from event pids")
    if tid is None:
        cause.notes.append("measuring thread not identified")

    idle = comps.get(("idle", "idle"))
    if idle is not None and idle_allowance_ns:
        allowed = min(idle.duration_ns, idle_allowance_ns)
        unexplained -= allowed
        cause.notes.append(f"{fmt_ns(allowed)} of idle counted as normal idle exit")
    # Drop zero-time entries of things that ended before the deadline.
    cause.components = sorted(
        (c for c in comps.values() if c.duration_ns > 0 or c.count), key=lambda c: -c.duration_ns
    )
    cause.unexplained_ns = max(0, unexplained)
    cause.accounted_ns = cause.latency_ns - cause.unexplained_ns
    if cause.coverage == "partial":
        cause.notes.append("trace starts after the deadline: the start of the window is missing")
    return cause


# -- a whole run -----------------------------------------------------------------------


class _EventSource:
    """Adapts a TraceCapture or a {cpu: [Event]} mapping to windowed access."""

    def __init__(self, events: object):
        self.src = events
        self._ts: dict[int, list[int]] = {}

    def cpus(self) -> list[int]:
        if isinstance(self.src, Mapping):
            return sorted(self.src)
        return list(self.src.cpus)  # type: ignore[attr-defined]

    def window(self, cpu: int, t0: int, t1: int) -> list[Event]:
        if isinstance(self.src, Mapping):
            evs = self.src.get(cpu, [])
            if cpu not in self._ts:
                self._ts[cpu] = [e.ts for e in evs]
            ts = self._ts[cpu]
            return list(evs[bisect.bisect_left(ts, t0) : bisect.bisect_right(ts, t1)])
        return self.src.window(cpu, t0, t1)  # type: ignore[attr-defined,no-any-return]

    def all_events(self) -> Iterable[Event]:
        for c in self.cpus():
            if isinstance(self.src, Mapping):
                yield from self.src.get(c, [])
            else:
                yield from self.src.events(c)  # type: ignore[attr-defined]

    def first_ts(self, cpu: int) -> int | None:
        if isinstance(self.src, Mapping):
            evs = self.src.get(cpu, [])
            return evs[0].ts if evs else None
        return self.src.first_ts(cpu)  # type: ignore[attr-defined,no-any-return]

    def resolver(self) -> Callable[[int], str] | None:
        return getattr(self.src, "resolve", None)


def attribute_run(
    events: object,
    samples_or_spikes: str | Path | Iterable[Spike] | Iterable[tuple[int, int, int]] | None,
    start_monotonic_ns: int = 0,
    *,
    threshold_ns: int = 100_000,
    channel_cpus: Sequence[int | None] | None = None,
    channel_tids: Sequence[int | None] | None = None,
    at_is_deadline: bool = True,
    margin_ns: int = DEFAULT_MARGIN_NS,
    lookahead_ns: int = 2_000_000,
    gap_ns: int = DEFAULT_GAP_NS,
    idle_allowance_ns: int = 0,
    virtualized: bool | None = None,
    resolve: Callable[[int], str] | None = None,
    lead_ns: int | None = DEFAULT_LEAD_NS,
) -> list[Cause]:
    """One Cause per spike of a probe run, in time order.

    `events`: a TraceCapture (TraceCapture.load() of an engine's --trace-dir) or
    {cpu: [Event, ...]} in time order. `samples_or_spikes`: a --samples file path,
    (channel, at_ns, value_ns) tuples, Spike objects, or None to take the spikes
    from `rtlab spike ...` trace markers. `channel_cpus[i]`/`channel_tids[i]` map
    a samples channel index to its CPU/thread (from the probe header).
    """
    src = _EventSource(events)
    if samples_or_spikes is None:
        spikes = [
            s
            for s in spikes_from_markers(src.all_events(), start_monotonic_ns or None)
            if s.latency_ns > threshold_ns
        ]
    else:
        items = (
            read_samples(samples_or_spikes)
            if isinstance(samples_or_spikes, (str, Path))
            else list(samples_or_spikes)
        )
        spikes = [s for s in items if isinstance(s, Spike)]
        raw = [s for s in items if not isinstance(s, Spike)]
        if raw:
            cpus = channel_cpus if channel_cpus is not None else src.cpus()
            spikes += spikes_from_samples(
                raw, start_monotonic_ns, threshold_ns, cpus, channel_tids, at_is_deadline
            )
    resolve = resolve or src.resolver()
    out = []
    for s in sorted(spikes, key=lambda s: (s.deadline_ns, s.cpu)):
        evs = src.window(s.cpu, s.deadline_ns - margin_ns, s.wake_ns + lookahead_ns)
        out.append(
            attribute_spike(
                evs,
                s,
                gap_ns=gap_ns,
                idle_allowance_ns=idle_allowance_ns,
                resolve=resolve,
                trace_start_ns=src.first_ts(s.cpu),
                virtualized=virtualized,
                lead_ns=lead_ns,
            )
        )
    return out


def summarize(causes: Sequence[Cause]) -> dict[str, object]:
    """Counts of the top cause over many spikes, for a report line."""
    tops: dict[str, int] = {}
    for c in causes:
        key = c.top()
        tops[key] = tops.get(key, 0) + 1
    return {
        "spikes": len(causes),
        "unexplained_ns": sum(c.unexplained_ns for c in causes),
        "latency_ns": sum(c.latency_ns for c in causes),
        "top_causes": dict(sorted(tops.items(), key=lambda kv: -kv[1])),
    }


def is_virtualized(cpuinfo: str | None = None) -> bool | None:
    """True when /proc/cpuinfo has the 'hypervisor' flag (x86); None when unknown."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            return None
    for line in cpuinfo.splitlines():
        if line.startswith("flags"):
            return " hypervisor" in line
    return None
