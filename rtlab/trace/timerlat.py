# SPDX-License-Identifier: MIT
"""The kernel's own latency split: the timerlat tracer's records, explained per activation.

Where a kernel has the timerlat tracer (PREEMPT_RT boards usually do), every period of
its per-CPU thread leaves a `ftrace/timerlat` record from the timer IRQ (context 0:
the IRQ latency), one from the woken thread (context 1: the thread latency) and, with
user-space workloads, one on the return to user space (context 2). The osnoise events
(`irq_noise`, `softirq_noise`, `thread_noise`, `nmi_noise`) name everything that ran on
the CPU meanwhile, each emitted when that noise ended, with its duration.

For an activation whose latency is above a threshold this module gives the split the
way rtla's auto-analysis reads it:

* IRQ part: the timer fired at `expiry` (= IRQ record time - IRQ latency); until the
  timer IRQ ran, either a higher IRQ (or an NMI) ran - named - or nothing that the
  trace shows: interrupts were off, or the CPU was leaving idle (the task the IRQ
  interrupted is idle), or, on a VM, the vCPU was not running;
* thread part: from the IRQ to the thread, who held the CPU: tasks (thread_noise,
  with sched_switch where a task left no noise record), IRQs, softirqs, NMIs, each
  with the time it took inside the window; the largest is the culprit.

The timestamps of osnoise's own `start` field are in the tracer's local clock, not in
the trace clock: a noise's interval is taken as [event time - duration, event time].

Also here: a reader of rtla's `timerlat top/hist -a` output for the cross-check of a
verdict (`parse_rtla_auto`): the auto-analysis text of rtla 6.3 and later, or, for rtla
6.1/6.2 (which only stop and save the trace), the saved `timerlat_trace.txt`.
Everything is a pure function of its inputs.
"""

from __future__ import annotations

import bisect
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from rtlab.trace.attribution import SOFTIRQ_NAMES
from rtlab.trace.causes import fmt_ns
from rtlab.trace.ringbuf import Event

CONTEXTS = ("irq", "thread", "user")  # timerlat's `context` field: 0, 1, 2
NOISE_EVENTS = ("irq_noise", "softirq_noise", "thread_noise", "nmi_noise")
EVENTS = ("ftrace/timerlat", *(f"osnoise/{n}" for n in NOISE_EVENTS), "sched/sched_switch")
TIMERLAT_COMM = "timerlat/"


@dataclass(frozen=True)
class Noise:
    """Something that ran on the CPU: kind irq|softirq|thread|nmi, its name and id
    (IRQ vector, softirq number, task pid), [start_ns, end_ns] in the trace clock."""

    kind: str
    name: str
    ident: int | None
    start_ns: int
    end_ns: int

    def label(self) -> str:
        if self.kind == "thread":
            return f"task {self.name}[{self.ident}]"
        if self.kind == "irq":
            return f"irq {self.name}:{self.ident}"
        return f"{self.kind} {self.name}"


@dataclass
class Blocker:
    """One culprit of a split with the time it held the CPU inside the window."""

    kind: str
    name: str
    ident: int | None
    duration_ns: int
    count: int = 1

    def label(self) -> str:
        return Noise(self.kind, self.name, self.ident, 0, 0).label()

    def to_dict(self) -> dict[str, object]:
        return {"kind": self.kind, "name": self.name, "id": self.ident,
                "duration_ns": self.duration_ns, "count": self.count}


@dataclass
class Split:
    """One activation above the threshold, split into its IRQ and thread parts."""

    cpu: int
    seqnum: int
    expiry_ns: int
    irq_latency_ns: int
    thread_latency_ns: int | None
    user_latency_ns: int | None = None
    interrupted: tuple[int, str] | None = None  # (pid, comm) the timer IRQ interrupted
    irq_blockers: list[Blocker] = field(default_factory=list)
    thread_blockers: list[Blocker] = field(default_factory=list)

    @property
    def latency_ns(self) -> int:
        return self.thread_latency_ns if self.thread_latency_ns is not None \
            else self.irq_latency_ns

    def irq_reason(self) -> str:
        if self.irq_blockers:
            return "a higher IRQ: " + ", ".join(b.label() for b in self.irq_blockers[:3])
        if self.interrupted is not None and self.interrupted[0] == 0:
            return "exit from idle, or the CPU was not running"
        return "interrupts off"

    def culprit(self) -> Blocker | None:
        """The largest cause: a thread-part blocker when the thread part is the larger
        part, else the IRQ part's (None: interrupts off / idle, nothing named)."""
        thread_part = (self.thread_latency_ns or 0) - self.irq_latency_ns
        if self.thread_blockers and thread_part >= self.irq_latency_ns:
            return self.thread_blockers[0]
        if self.irq_blockers:
            return self.irq_blockers[0]
        return self.thread_blockers[0] if self.thread_blockers else None

    def summary(self) -> str:
        s = f"IRQ late by {fmt_ns(self.irq_latency_ns)} ({self.irq_reason()})"
        if self.thread_latency_ns is not None:
            part = max(0, self.thread_latency_ns - self.irq_latency_ns)
            who = ", ".join(f"{b.label()} {fmt_ns(b.duration_ns)}"
                            for b in self.thread_blockers[:3]) or "nothing traced"
            s += f", thread late by {fmt_ns(part)} (blocked by {who})"
        if self.user_latency_ns is not None:
            s += f", return to user after {fmt_ns(self.user_latency_ns)}"
        return s

    def to_dict(self) -> dict[str, object]:
        c = self.culprit()
        return {
            "cpu": self.cpu, "seqnum": self.seqnum, "expiry_ns": self.expiry_ns,
            "irq_latency_ns": self.irq_latency_ns, "thread_latency_ns": self.thread_latency_ns,
            "user_latency_ns": self.user_latency_ns,
            "interrupted": list(self.interrupted) if self.interrupted else None,
            "irq_blockers": [b.to_dict() for b in self.irq_blockers],
            "thread_blockers": [b.to_dict() for b in self.thread_blockers],
            "culprit": c.to_dict() if c else None, "summary": self.summary(),
        }


@dataclass
class CpuTimerlat:
    """One CPU's latencies by context (ns, in activation order) and its splits."""

    cpu: int
    irq: list[int] = field(default_factory=list)
    thread: list[int] = field(default_factory=list)
    user: list[int] = field(default_factory=list)
    splits: list[Split] = field(default_factory=list)

    def distribution(self, context: str) -> dict[str, int | None]:
        """count, min, max, p50, p99, p99.9 of one context's latencies (ns). A percentile
        is the nearest rank, and None when too few samples support it (n·(1 − p) < 1), the
        rule every stored percentile follows (rtlab.results.summary.percentile)."""
        vals = sorted(getattr(self, context))
        n = len(vals)
        out: dict[str, int | None] = {"count": n, "min": vals[0] if vals else None}
        for key, q in (("p50", Fraction(1, 2)), ("p99", Fraction(99, 100)),
                       ("p99.9", Fraction(999, 1000))):
            out[key] = vals[math.ceil(q * n) - 1] if n and n * (1 - q) >= 1 else None
        out["max"] = vals[-1] if vals else None
        return out

    def culprits(self) -> dict[str, int]:
        """How many splits each culprit label heads, largest first."""
        n: dict[str, int] = {}
        for s in self.splits:
            c = s.culprit()
            key = c.label() if c else s.irq_reason()
            n[key] = n.get(key, 0) + 1
        return dict(sorted(n.items(), key=lambda kv: -kv[1]))


# -- decoding --------------------------------------------------------------------------


def _noise_of(ev: Event) -> Noise | None:
    f = ev.fields
    dur = f.get("duration")
    if not isinstance(dur, int):
        return None
    start = ev.ts - dur  # osnoise's `start` is in its own clock
    if ev.name == "thread_noise":
        return Noise("thread", str(f.get("comm", "?")), _int(f.get("pid")), start, ev.ts)
    if ev.name == "irq_noise":
        return Noise("irq", str(f.get("desc", "?")), _int(f.get("vector")), start, ev.ts)
    if ev.name == "softirq_noise":
        vec = _int(f.get("vector"))
        name = SOFTIRQ_NAMES[vec] if vec is not None and 0 <= vec < len(SOFTIRQ_NAMES) \
            else str(vec)
        return Noise("softirq", name, vec, start, ev.ts)
    if ev.name == "nmi_noise":
        return Noise("nmi", "nmi", None, start, ev.ts)
    return None


def _int(v: object) -> int | None:
    return v if isinstance(v, int) else None


def _overlap(n: Noise, t0: int, t1: int) -> int:
    return max(0, min(n.end_ns, t1) - max(n.start_ns, t0))


def _group(parts: Iterable[tuple[Noise, int]]) -> list[Blocker]:
    out: dict[tuple[str, object], Blocker] = {}
    for n, d in parts:
        if d <= 0:
            continue
        key = (n.kind, n.ident if n.kind in ("thread", "irq", "softirq") else n.name)
        b = out.get(key)
        if b is None:
            out[key] = Blocker(n.kind, n.name, n.ident, d)
        else:
            b.duration_ns += d
            b.count += 1
    return sorted(out.values(), key=lambda b: -b.duration_ns)


def _switch_tenancy(switches: Sequence[Event], t0: int, t1: int,
                    timerlat_pid: int | None) -> list[tuple[Noise, int]]:
    """Tasks other than idle and the timerlat thread on the CPU in [t0, t1], from
    sched_switch (for tasks that left no thread_noise record)."""
    if not switches:
        return []
    ts = [e.ts for e in switches]
    i = bisect.bisect_right(ts, t0) - 1
    out: list[tuple[Noise, int]] = []
    cur: tuple[int, str] | None = None
    if i >= 0:
        f = switches[i].fields
        cur = (int(f["next_pid"]), str(f["next_comm"]))  # type: ignore[arg-type]
    t = t0
    for e in switches[i + 1:]:
        if e.ts > t1:
            break
        if cur and cur[0] not in (0, timerlat_pid):
            out.append((Noise("thread", cur[1], cur[0], t, e.ts), e.ts - t))
        f = e.fields
        cur = (int(f["next_pid"]), str(f["next_comm"]))  # type: ignore[arg-type]
        t = e.ts
    if cur and cur[0] not in (0, timerlat_pid):
        out.append((Noise("thread", cur[1], cur[0], t, t1), t1 - t))
    return out


def analyze_cpu(events: Sequence[Event], cpu: int, threshold_ns: int) -> CpuTimerlat:
    """The latencies and the splits of one CPU's events (in time order)."""
    res = CpuTimerlat(cpu)
    noises: list[Noise] = []
    switches: list[Event] = []
    irq_ts: dict[int, int] = {}  # seqnum -> time of its IRQ record
    acts: dict[int, Split] = {}
    pending: list[tuple[Split, int, int]] = []  # split, IRQ record ts, thread record ts
    timerlat_pid: int | None = None
    for ev in events:
        n = ev.name
        if n == "timerlat":
            f = ev.fields
            seq, ctx, lat = _int(f.get("seqnum")), _int(f.get("context")), \
                _int(f.get("timer_latency"))
            if seq is None or ctx is None or lat is None:
                continue
            if ctx == 0:
                res.irq.append(lat)
                irq_ts[seq] = ev.ts
                comm = "idle" if ev.pid == 0 else "?"
                acts[seq] = Split(cpu, seq, ev.ts - lat, lat, None, interrupted=(ev.pid, comm))
            elif ctx == 1:
                res.thread.append(lat)
                timerlat_pid = ev.pid
                sp = acts.get(seq)
                if sp is not None:
                    sp.thread_latency_ns = lat
                    if lat > threshold_ns or sp.irq_latency_ns > threshold_ns:
                        pending.append((sp, irq_ts[seq], ev.ts))
            elif ctx == 2:
                res.user.append(lat)
                sp = acts.get(seq)
                if sp is not None:
                    sp.user_latency_ns = lat
            continue
        if n == "sched_switch":
            switches.append(ev)
            continue
        noise = _noise_of(ev)
        if noise is not None:
            noises.append(noise)
    ends = [x.end_ns for x in noises]
    for sp, t_irq, thr_ts in pending:
        d = sp.expiry_ns
        # IRQ part: noise that ended between the expiry and the timer IRQ's record
        lo, hi = bisect.bisect_left(ends, d), bisect.bisect_right(ends, t_irq)
        sp.irq_blockers = _group((x, _overlap(x, d, t_irq)) for x in noises[lo:hi]
                                 if x.kind in ("irq", "nmi", "softirq"))
        if sp.interrupted and sp.interrupted[0] != 0:
            name = _task_at(switches, t_irq)
            if name is not None:
                sp.interrupted = (sp.interrupted[0], name)
        # thread part: what ran from the IRQ to the thread (its own IRQ included: rtla
        # counts it as "Timerlat IRQ duration"; idle is leaving idle, not a culprit)
        lo, hi = bisect.bisect_left(ends, t_irq), bisect.bisect_right(ends, thr_ts)
        parts = [(x, _overlap(x, t_irq, thr_ts)) for x in noises[lo:hi]
                 if not (x.kind == "thread" and (x.ident == 0 or x.ident == timerlat_pid))]
        # a task that held the CPU all along may end its noise after the thread ran
        # (it was preempted): take the noise still open at thr_ts from sched_switch
        if not any(x.kind == "thread" for x, _ in parts):
            parts += _switch_tenancy(switches, t_irq, thr_ts, timerlat_pid)
        sp.thread_blockers = _group(parts)
        res.splits.append(sp)
    return res


def _task_at(switches: Sequence[Event], t: int) -> str | None:
    ts = [e.ts for e in switches]
    i = bisect.bisect_right(ts, t) - 1
    return str(switches[i].fields.get("next_comm")) if i >= 0 else None


def analyze(capture: object, threshold_ns: int) -> dict[int, CpuTimerlat]:
    """Per CPU of a TraceCapture (recorded with the timerlat tracer) or of a
    {cpu: [Event, ...]} mapping: the latency distributions and the splits of the
    activations whose IRQ or thread latency is above `threshold_ns`."""
    if isinstance(capture, Mapping):
        per_cpu = {int(c): list(evs) for c, evs in capture.items()}
    else:
        per_cpu = {c: capture.events(c) for c in capture.cpus}  # type: ignore[attr-defined]
    return {c: analyze_cpu(evs, c, threshold_ns) for c, evs in sorted(per_cpu.items())}


# -- rtla's -a output ------------------------------------------------------------------


@dataclass
class RtlaVerdict:
    """What rtla's auto mode named for the activation that stopped it."""

    cpu: int | None
    kind: str  # thread | irq | softirq | nmi | none
    name: str | None
    ident: int | None
    latency_ns: int | None
    source: str  # "auto-analysis" (rtla >= 6.3) or "saved trace" (rtla 6.1/6.2)


_AA_HIT = re.compile(r"^## CPU (\d+) hit stop tracing, analyzing it ##")
_AA_SECTION = re.compile(r"^\s*(Blocking thread|IRQ interference|Softirq interference|"
                         r"Thread interference|NMI interference)")
_AA_ITEM = re.compile(r"^\s+(\S.*?):(\d+)\s+([\d.]+) us")
_AA_ITEM_BARE = re.compile(r"^\s+(\S.*?):(\d+)\s*$")
_AA_TOTAL = re.compile(r"^\s*(IRQ|Thread) latency:\s+([\d.]+) us \(100%\)")
_TRACE_LINE = re.compile(r"^\s*(?P<task>.+?)-(?P<pid>\d+)\s+\[(?P<cpu>\d+)\]\s+\S+\s+"
                         r"(?P<ts>[\d.]+):\s+(?P<rest>.*)$")
_TL_REC = re.compile(r"^#(\d+)\s+context\s+(\w+)\s+timer_latency\s+(\d+) ns")
_NOISE_REC = re.compile(r"^(irq_noise|softirq_noise|thread_noise|nmi_noise):\s+(.*?):(-?\d+)\s+"
                        r"start\s+[\d.]+\s+duration\s+(\d+) ns")


def parse_rtla_auto(stdout: str, saved_trace: str | None = None) -> list[RtlaVerdict]:
    """The culprits rtla's `timerlat top/hist -a US` named: one per CPU that hit the
    stop, from its auto-analysis text (rtla >= 6.3), else from the saved trace
    (`timerlat_trace.txt`, rtla 6.1/6.2, which stop and save but do not analyze)."""
    out = _parse_aa(stdout)
    if out or saved_trace is None:
        return out
    v = _parse_saved_trace(saved_trace)
    return [v] if v is not None else []


def _parse_aa(text: str) -> list[RtlaVerdict]:
    out: list[RtlaVerdict] = []
    cur: RtlaVerdict | None = None
    section: str | None = None
    best = -1.0
    for line in text.splitlines():
        m = _AA_HIT.match(line)
        if m:
            cur = RtlaVerdict(int(m[1]), "none", None, None, None, "auto-analysis")
            out.append(cur)
            section, best = None, -1.0
            continue
        if cur is None:
            continue
        m = _AA_TOTAL.match(line)
        if m:
            cur.latency_ns = round(float(m[2]) * 1000)
            section = None
            continue
        m = _AA_SECTION.match(line)
        if m:
            section = m[1]
            continue
        if section is None:
            continue
        kind = {"Blocking thread": "thread", "Thread interference": "thread",
                "IRQ interference": "irq", "Softirq interference": "softirq",
                "NMI interference": "nmi"}[section]
        m = _AA_ITEM.match(line)
        dur = float(m[3]) if m else None
        if m is None:
            m = _AA_ITEM_BARE.match(line)  # the blocking thread of an IRQ stop: no time
        if m is None:
            continue
        if section == "Blocking thread" and dur is None:
            dur = float("inf")
        if dur is not None and dur > best:
            best = dur
            cur.kind, cur.name, cur.ident = kind, m[1].strip(), int(m[2])
    return out


def _parse_saved_trace(text: str) -> RtlaVerdict | None:
    """The last activation of rtla's saved trace text: the task (or IRQ) that held the
    CPU longest between its IRQ record and its thread record."""
    last: dict[str, object] | None = None
    acts: dict[int, dict[str, object]] = {}
    for line in text.splitlines():
        m = _TRACE_LINE.match(line)
        if not m:
            continue
        rest = m["rest"]
        t = _TL_REC.match(rest)
        if t:
            seq = int(t[1])
            a = acts.setdefault(seq, {"cpu": int(m["cpu"]), "noise": [], "open": True})
            if t[2] == "irq":
                a["irq"] = int(t[3])
            elif t[2] == "thread":
                a["thread"] = int(t[3])
                a["open"] = False
                last = a
            for other in acts.values():
                if other is not a and t[2] == "irq":
                    other["open"] = False
            continue
        n = _NOISE_REC.match(rest)
        if n:
            for a in acts.values():
                if a["open"]:
                    a["noise"].append((n[1], n[2], int(n[3]), int(n[4])))  # type: ignore[attr-defined]
    if last is None:
        return None
    noise = [x for x in last["noise"]  # type: ignore[attr-defined]
             if not (x[0] == "thread_noise" and (x[2] == 0 or x[1].startswith(TIMERLAT_COMM)))]
    lat = last.get("thread")
    if not noise:
        return RtlaVerdict(last["cpu"], "none", None, None, lat, "saved trace")  # type: ignore[arg-type]
    kind, name, ident, _ = max(noise, key=lambda x: x[3])
    return RtlaVerdict(last["cpu"], kind.removesuffix("_noise"), name, ident,  # type: ignore[arg-type]
                       lat, "saved trace")  # type: ignore[arg-type]
