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
import struct
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from rtlab.trace.ringbuf import Event

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


@dataclass(frozen=True)
class Spike:
    """One late wake-up: times are absolute CLOCK_MONOTONIC ns."""

    cpu: int
    deadline_ns: int
    wake_ns: int
    tid: int | None = None  # the measuring thread; inferred from sched_switch when None
    source: str = "samples"

    @property
    def latency_ns(self) -> int:
        return self.wake_ns - self.deadline_ns


@dataclass
class Component:
    """Time of one interfering thing inside [deadline, wake] (exclusive of nested ones)."""

    kind: str  # irq | softirq | vector | hrtimer | ipi | task | idle | wake_path | gap
    name: str
    ident: int | None = None  # irq number, softirq vector, pid
    duration_ns: int = 0
    count: int = 0
    prio: int | None = None  # kernel prio for tasks (0..99 RT, 100..139 normal)

    def label(self) -> str:
        if self.kind == "irq":
            return f"irq {self.ident} {self.name}"
        if self.kind == "softirq":
            return f"softirq {self.name}"
        if self.kind == "task":
            pr = f" {_prio_text(self.prio)}" if self.prio is not None else ""
            return f"task {self.name}[{self.ident}]{pr}"
        return f"{self.kind} {self.name}".strip()

    def to_dict(self) -> dict[str, object]:
        return {
            "kind": self.kind,
            "name": self.name,
            "id": self.ident,
            "duration_ns": self.duration_ns,
            "count": self.count,
            "prio": self.prio,
        }


def _prio_text(prio: int) -> str:
    return f"rt{99 - prio}" if prio < 100 else f"nice{prio - 120}"


def _fmt_ns(ns: int) -> str:
    if abs(ns) >= 1_000_000:
        return f"{ns / 1e6:.2f} ms"
    if abs(ns) >= 1_000:
        return f"{ns / 1e3:.0f} µs"
    return f"{ns} ns"


UNEXPLAINED_LABELS = {
    None: "host/hypervisor or SMI",
    True: "host/hypervisor",
    False: "SMI/firmware/hardware",
}


@dataclass
class Cause:
    """Why one spike was late. Offsets (`*_ns` of milestones) are relative to the deadline."""

    cpu: int
    deadline_ns: int
    wake_ns: int
    latency_ns: int
    tid: int | None
    source: str
    coverage: str  # full | partial | none
    timer_expire_ns: int | None = None  # the probe's hrtimer callback started
    waking_ns: int | None = None  # sched_waking of the probe thread
    wakeup_ns: int | None = None  # sched_wakeup
    switch_in_ns: int | None = None  # sched_switch to the probe thread
    idle_exit_ns: int | None = None  # cpu_idle leave after the deadline
    components: list[Component] = field(default_factory=list)
    unexplained_ns: int = 0
    accounted_ns: int = 0
    notes: list[str] = field(default_factory=list)
    virtualized: bool | None = None

    def by_kind(self, kind: str) -> list[Component]:
        return [c for c in self.components if c.kind == kind]

    def interference(self) -> list[Component]:
        """Named causes (everything except the probe's own wake path), largest first."""
        return sorted(
            (c for c in self.components if c.kind not in ("wake_path", "idle", "gap")),
            key=lambda c: -c.duration_ns,
        )

    def top(self) -> str:
        """The largest share: 'unexplained' or a component label."""
        best = max(self.interference(), key=lambda c: c.duration_ns, default=None)
        if best is None or self.unexplained_ns >= best.duration_ns:
            return "unexplained"
        return best.label()

    def summary(self, max_items: int = 4) -> str:
        parts = []
        what = UNEXPLAINED_LABELS[self.virtualized]
        items: list[tuple[int, str]] = []
        if self.unexplained_ns > 0:
            items.append(
                (self.unexplained_ns, f"{_fmt_ns(self.unexplained_ns)} unexplained ({what})")
            )
        for c in self.interference():
            if c.duration_ns >= 1000 or c.duration_ns * 100 >= self.latency_ns:
                n = f" ×{c.count}" if c.count > 1 else ""
                items.append((c.duration_ns, f"{c.label()} {_fmt_ns(c.duration_ns)}{n}"))
        wp = sum(c.duration_ns for c in self.by_kind("wake_path"))
        if wp * 10 >= self.latency_ns:
            items.append((wp, f"own wake path {_fmt_ns(wp)}"))
        items.sort(key=lambda t: -t[0])
        parts = [t for _, t in items[:max_items]]
        if len(items) > max_items:
            parts.append(f"+{len(items) - max_items} more")
        if self.coverage == "none":
            parts = ["no trace for this window"]
        return f"{_fmt_ns(self.latency_ns)}: " + (", ".join(parts) if parts else "nothing traced")

    def to_dict(self) -> dict[str, object]:
        return {
            "cpu": self.cpu,
            "deadline_ns": self.deadline_ns,
            "wake_ns": self.wake_ns,
            "latency_ns": self.latency_ns,
            "tid": self.tid,
            "source": self.source,
            "coverage": self.coverage,
            "milestones": {
                "timer_expire_ns": self.timer_expire_ns,
                "waking_ns": self.waking_ns,
                "wakeup_ns": self.wakeup_ns,
                "switch_in_ns": self.switch_in_ns,
                "idle_exit_ns": self.idle_exit_ns,
            },
            "components": [c.to_dict() for c in self.components],
            "unexplained_ns": self.unexplained_ns,
            "accounted_ns": self.accounted_ns,
            "top": self.top(),
            "summary": self.summary(),
            "notes": list(self.notes),
        }


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
        cause.notes.append(f"{_fmt_ns(allowed)} of idle counted as normal idle exit")
    # Drop zero-time entries of things that ended before the deadline.
    cause.components = sorted(
        (c for c in comps.values() if c.duration_ns > 0 or c.count), key=lambda c: -c.duration_ns
    )
    cause.unexplained_ns = max(0, unexplained)
    cause.accounted_ns = cause.latency_ns - cause.unexplained_ns
    if cause.coverage == "partial":
        cause.notes.append("trace starts after the deadline: the start of the window is missing")
    return cause


# -- spike sources ---------------------------------------------------------------------

SAMPLES_MAGIC = b"RTLABSMP"


def read_samples(path: str | Path) -> list[tuple[int, int, int]]:
    """The probe's --samples file -> [(channel_index, at_ns, value_ns)] (see engine-output.md)."""
    data = Path(path).read_bytes()
    if len(data) < 16 or data[:8] != SAMPLES_MAGIC:
        raise ValueError(f"{path}: not an rtlab samples file")
    version, rsize = struct.unpack_from("<II", data, 8)
    if version != 1 or rsize < 24:
        raise ValueError(f"{path}: unsupported samples version {version} / record size {rsize}")
    out = []
    for off in range(16, len(data) - rsize + 1, rsize):
        ch, _res, at, val = struct.unpack_from("<IIQQ", data, off)
        out.append((ch, at, val))
    return out


def spikes_from_samples(
    samples: Iterable[tuple[int, int, int]],
    start_monotonic_ns: int,
    threshold_ns: int,
    channel_cpus: Sequence[int | None],
    channel_tids: Sequence[int | None] | None = None,
    at_is_deadline: bool = True,
) -> list[Spike]:
    """Samples above `threshold_ns` -> Spikes. `at_ns` is the deadline (or, with
    at_is_deadline=False, the wake time) relative to start_monotonic_ns."""
    out = []
    for ch, at, val in samples:
        if val <= threshold_ns or ch >= len(channel_cpus) or channel_cpus[ch] is None:
            continue
        t = start_monotonic_ns + at
        d, w = (t, t + val) if at_is_deadline else (t - val, t)
        tid = channel_tids[ch] if channel_tids and ch < len(channel_tids) else None
        out.append(Spike(int(channel_cpus[ch]), d, w, tid, "samples"))  # type: ignore[arg-type]
    return out


_MARKER_RE = re.compile(r"\brtlab spike\b(?P<kv>.*)$")


def parse_spike_marker(text: str, ts: int, start_monotonic_ns: int | None = None) -> Spike | None:
    """`rtlab spike cpu=N lat=NNN [deadline=ABS_NS | at=REL_NS] [tid=T]` -> Spike.

    `deadline` is absolute CLOCK_MONOTONIC ns, `at` the deadline relative to the
    run start. Without either, the marker's own time stamp is taken as the wake time
    (an upper bound: the marker is written after the wake-up).
    """
    m = _MARKER_RE.search(text)
    if not m:
        return None
    kv = dict(re.findall(r"(\w+)=(-?\d+)", m["kv"]))
    if "cpu" not in kv or "lat" not in kv:
        return None
    lat = int(kv["lat"])
    if "deadline" in kv:
        dl = int(kv["deadline"])
    elif "at" in kv and start_monotonic_ns is not None:
        dl = start_monotonic_ns + int(kv["at"])
    else:
        dl = ts - lat
    tid = int(kv["tid"]) if "tid" in kv else None
    return Spike(int(kv["cpu"]), dl, dl + lat, tid, "marker")


def spikes_from_markers(
    events: Iterable[Event], start_monotonic_ns: int | None = None
) -> list[Spike]:
    out = []
    for ev in events:
        if ev.name == "print":
            s = parse_spike_marker(str(ev.fields.get("buf", "")), ev.ts, start_monotonic_ns)
            if s:
                out.append(s)
    return out


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

    `events`: a TraceCapture (from Recorder.capture() or TraceCapture.load()) or
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
