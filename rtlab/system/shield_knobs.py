# SPDX-License-Identifier: MIT
"""Runtime knobs of a shield: kernel settings a scenario's `[shield]` may change for a
run (timer migration, watchdogs, vmstat interval, cpuidle states, cpufreq governor and
minimum frequency, SMT siblings, transparent huge pages, NUMA balancing), declared once
here (checks, help), read on the target, planned as journaled `sys apply` writes and
verified in effect (docs/system.md, "Runtime knobs").

Pure like `shield_plan`: a plan and its check are computed from a `KnobState` (the
knobs' files as the target's engine read them, `read_knob_state`), so any machine's
files can be planned in a test. A knob the target lacks (no cpufreq, no cpuidle, no
SMT, no THP, the file absent) is skipped and named, never a failure; a value the target
cannot take (a governor it does not offer, a sibling CPU the shield needs) is a
UsageError before anything changes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

from rtlab.cpulist import format_cpulist, parse_cpulist
from rtlab.errors import UsageError

if TYPE_CHECKING:
    from rtlab.engine.transport import Transport
    from rtlab.system.facts import Facts

CPU_DIR = "/sys/devices/system/cpu"
TIMER_MIGRATION = "/proc/sys/kernel/timer_migration"
WATCHDOG = "/proc/sys/kernel/watchdog"
NMI_WATCHDOG = "/proc/sys/kernel/nmi_watchdog"
SOFT_WATCHDOG = "/proc/sys/kernel/soft_watchdog"
STAT_INTERVAL = "/proc/sys/vm/stat_interval"
NUMA_BALANCING = "/proc/sys/kernel/numa_balancing"
THP_ENABLED = "/sys/kernel/mm/transparent_hugepage/enabled"
THP_MODES = ("never", "madvise", "always")
STAT_INTERVAL_MAX = 3600
FREQ_MAX_KHZ = 100_000_000  # 100 GHz: no CPU's frequency reaches it

# What the knobs read on a target (`rtlab-probe sys snapshot` patterns).
STATE_PATTERNS: tuple[str, ...] = (
    TIMER_MIGRATION, WATCHDOG, NMI_WATCHDOG, SOFT_WATCHDOG, STAT_INTERVAL, NUMA_BALANCING,
    THP_ENABLED, f"{CPU_DIR}/online",
    f"{CPU_DIR}/cpu[0-9]*/online",
    f"{CPU_DIR}/cpu[0-9]*/topology/thread_siblings_list",
    f"{CPU_DIR}/cpu[0-9]*/cpuidle/state[0-9]*/latency",
    f"{CPU_DIR}/cpu[0-9]*/cpuidle/state[0-9]*/disable",
    f"{CPU_DIR}/cpu[0-9]*/cpuidle/state[0-9]*/name",
    *(f"{CPU_DIR}/cpu[0-9]*/cpufreq/{f}" for f in (
        "scaling_governor", "scaling_available_governors", "scaling_min_freq",
        "cpuinfo_min_freq", "cpuinfo_max_freq", "affected_cpus")),
)


@dataclass(frozen=True)
class KnobDecl:
    """One runtime knob: its `[shield]` key, the value it takes (for errors and help),
    what it changes, and its `rtlab shield` option."""

    name: str
    allowed: str
    changes: str
    option: str


GOVERNORS = ("performance", "powersave", "schedutil", "ondemand", "conservative",
             "userspace")

KNOBS: tuple[KnobDecl, ...] = (
    KnobDecl("timer_migration", "true or false",
             f"{TIMER_MIGRATION} (off: timers stay on the CPU that armed them)",
             "--timer-migration"),
    KnobDecl("watchdogs", "true or false",
             f"the soft and NMI lockup watchdogs ({WATCHDOG}; else nmi_watchdog and "
             "soft_watchdog)", "--watchdogs"),
    KnobDecl("vm_stat_interval", f"an integer 1..{STAT_INTERVAL_MAX} (seconds)",
             f"{STAT_INTERVAL} (the vmstat worker's period)", "--vm-stat-interval"),
    KnobDecl("idle_max_latency_us", "an integer 0.. (µs)",
             "on the user CPUs, every cpuidle state whose exit latency exceeds it is disabled "
             "(0: only polling states stay)", "--idle-max-latency"),
    KnobDecl("governor", "one of " + ", ".join(GOVERNORS) + " (that the CPUs offer)",
             "the user CPUs' cpufreq scaling_governor", "--governor"),
    KnobDecl("min_freq", "\"max\" (the CPU's cpuinfo_max_freq) or an integer in kHz",
             "the user CPUs' cpufreq scaling_min_freq", "--min-freq"),
    KnobDecl("smt", "true or false",
             "off: the SMT siblings of the user CPUs go offline (cpuK/online 0)", "--smt"),
    KnobDecl("thp", ", ".join(f'"{m}"' for m in THP_MODES),
             f"transparent huge pages ({THP_ENABLED})", "--thp"),
    KnobDecl("numa_balancing", "true or false",
             f"automatic NUMA balancing ({NUMA_BALANCING})", "--numa-balancing"),
)
KNOB_NAMES: tuple[str, ...] = tuple(k.name for k in KNOBS)
_DECL = {k.name: k for k in KNOBS}


def check_knob(name: str, value: object) -> Any:
    """The knob's value if `value` is one it takes (None: leave the system as it is);
    else ValueError with what is allowed."""
    if value is None:
        return None
    decl = _DECL[name]
    if name in ("timer_migration", "watchdogs", "smt", "numa_balancing"):
        if isinstance(value, bool):
            return value
    elif name in ("vm_stat_interval", "idle_max_latency_us"):
        hi = STAT_INTERVAL_MAX if name == "vm_stat_interval" else 2**31 - 1
        lo = 1 if name == "vm_stat_interval" else 0
        if isinstance(value, int) and not isinstance(value, bool) and lo <= value <= hi:
            return value
    elif name == "governor":
        # the kernel's governors (drivers/cpufreq): a name outside them is a typo on any
        # machine, refused before anything is planned (whether the CPUs offer it is
        # checked on the target)
        if value in GOVERNORS:
            return value
    elif name == "min_freq":
        if value == "max":
            return value
        if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= FREQ_MAX_KHZ:
            return value
    elif name == "thp" and value in THP_MODES:
        return value
    raise ValueError(f"{value!r} is not allowed; allowed: {decl.allowed}")


@dataclass(frozen=True)
class RuntimeKnobs:
    """The knobs a shield asks for; None: leave that setting as it is."""

    timer_migration: bool | None = None
    watchdogs: bool | None = None
    vm_stat_interval: int | None = None
    idle_max_latency_us: int | None = None
    governor: str | None = None
    min_freq: str | int | None = None  # "max" or kHz
    smt: bool | None = None
    thp: str | None = None
    numa_balancing: bool | None = None

    def asked(self) -> dict[str, Any]:
        """{name: value} of the knobs set, in declaration order."""
        return {f.name: getattr(self, f.name) for f in fields(self)
                if getattr(self, f.name) is not None}

    @classmethod
    def of(cls, obj: object) -> RuntimeKnobs:
        """The knobs of anything with these attributes (a scenario's ShieldSpec)."""
        return cls(**{n: getattr(obj, n, None) for n in KNOB_NAMES})


@dataclass(frozen=True)
class KnobState:
    """The knobs' files of a target as read (text without its trailing newline); a path
    missing here does not exist there (or could not be read)."""

    files: Mapping[str, str]

    def get(self, path: str) -> str | None:
        return self.files.get(path)

    def cpus(self) -> list[int]:
        """CPUs with a directory entry read (cpuN/...)."""
        found = {int(m.group(1)) for p in self.files
                 if (m := re.match(rf"{CPU_DIR}/cpu(\d+)/", p))}
        return sorted(found)

    def online(self, cpu: int) -> bool:
        v = self.get(f"{CPU_DIR}/cpu{cpu}/online")
        if v is not None:
            return v.strip() == "1"
        whole = self.get(f"{CPU_DIR}/online")
        return whole is None or cpu in parse_cpulist(whole)  # cpu0 often has no `online`

    def siblings(self, cpu: int) -> frozenset[int]:
        v = self.get(f"{CPU_DIR}/cpu{cpu}/topology/thread_siblings_list")
        return frozenset(parse_cpulist(v)) if v else frozenset({cpu})

    def idle_states(self, cpu: int) -> list[tuple[int, str, int, str]]:
        """(index, name, exit latency µs, disable text) of each cpuidle state of `cpu`."""
        out = []
        rx = re.compile(rf"{CPU_DIR}/cpu{cpu}/cpuidle/state(\d+)/latency$")
        for p, text in self.files.items():
            m = rx.match(p)
            if m and text.strip().isdigit():
                base = p.rsplit("/", 1)[0]
                out.append((int(m.group(1)), self.get(f"{base}/name") or f"state{m.group(1)}",
                            int(text), (self.get(f"{base}/disable") or "").strip()))
        return sorted(out)

    def freq(self, cpu: int, name: str) -> str | None:
        return self.get(f"{CPU_DIR}/cpu{cpu}/cpufreq/{name}")


def read_knob_state(transport: Transport) -> KnobState:
    """The knobs' files on the target, read by its engine (any user; changes nothing)."""
    from rtlab.engine.snapshot import record_bytes, snapshot

    files: dict[str, str] = {}
    for rec in snapshot(transport, STATE_PATTERNS):
        if rec.get("type") == "file":
            files[str(rec["path"])] = record_bytes(rec).decode(errors="replace").rstrip("\n")
    return KnobState(files)


@dataclass
class KnobPlan:
    """The knobs' operations: `first` (SMT: before the shield's moves, so that their
    restore comes last) and `ops` (after them); the knobs skipped (name -> why), the
    ones already as asked, and the CPUs taken offline."""

    knobs: RuntimeKnobs
    user: frozenset[int]
    first: list[dict[str, Any]] = field(default_factory=list)
    ops: list[dict[str, Any]] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    already: list[str] = field(default_factory=list)
    offline: frozenset[int] = frozenset()
    notes: list[str] = field(default_factory=list)


def _write(path: str, value: str, undo: str | None = None) -> dict[str, Any]:
    op: dict[str, Any] = {"op": "write", "path": path, "value": value}
    if undo is not None:
        op["undo"] = undo
    return op


def thp_mode(text: str | None) -> str | None:
    """The bracketed mode of `[always] madvise never`."""
    m = re.search(r"\[([a-z_]+)\]", text or "")
    return m.group(1) if m else None


def _onoff(text: str | None) -> bool | None:
    if text is None or not text.strip().lstrip("-").isdigit():
        return None
    return int(text) != 0


def plan_knobs(state: KnobState, knobs: RuntimeKnobs, user: Iterable[int],
               system: Iterable[int], facts: Facts | None = None) -> KnobPlan:
    """Journaled writes that put the knobs in place on the target whose files `state`
    holds (`facts`: its tasks and IRQs, for what taking a sibling offline breaks).
    UsageError for a value the target cannot take."""
    users, systems = frozenset(user), frozenset(system)
    kp = KnobPlan(knobs, users)
    asked = knobs.asked()

    def sysctl(name: str, path: str, value: str) -> None:
        now = state.get(path)
        if now is None:
            kp.skipped[name] = f"not on this kernel ({path} does not exist)"
        elif now.strip() == value:
            kp.already.append(name)
        else:
            kp.ops.append(_write(path, value))

    if "timer_migration" in asked:
        sysctl("timer_migration", TIMER_MIGRATION, "1" if knobs.timer_migration else "0")
    if "watchdogs" in asked:
        value = "1" if knobs.watchdogs else "0"
        if state.get(WATCHDOG) is not None:
            now = (state.get(WATCHDOG) or "").strip()
            if value == "0" and now != "0":
                # Before Linux 6.4 or so, reading nmi_watchdog/soft_watchdog while the
                # master switch is off sets them to 0 (the read stores what is in
                # effect): the restore of the master alone then leaves both off (seen on
                # the Debian 6.1 RT board). Journal the ones that are on (a no-op now),
                # so that their restore, after the master's, turns them on again.
                kp.ops += [_write(p, "1") for p in (NMI_WATCHDOG, SOFT_WATCHDOG)
                           if (state.get(p) or "").strip() == "1"]
            sysctl("watchdogs", WATCHDOG, value)
        else:
            parts = [p for p in (NMI_WATCHDOG, SOFT_WATCHDOG) if state.get(p) is not None]
            if not parts:
                kp.skipped["watchdogs"] = (f"not on this kernel (neither {WATCHDOG} nor "
                                           "nmi_watchdog/soft_watchdog exist)")
            for p in parts:
                if (state.get(p) or "").strip() != value:
                    kp.ops.append(_write(p, value))
            if parts and all((state.get(p) or "").strip() == value for p in parts):
                kp.already.append("watchdogs")
    if "vm_stat_interval" in asked:
        sysctl("vm_stat_interval", STAT_INTERVAL, str(knobs.vm_stat_interval))
    if "numa_balancing" in asked:
        now = state.get(NUMA_BALANCING)
        if now is not None and _onoff(now) == knobs.numa_balancing:
            kp.already.append("numa_balancing")
        else:
            sysctl("numa_balancing", NUMA_BALANCING, "1" if knobs.numa_balancing else "0")
    if "thp" in asked:
        now = thp_mode(state.get(THP_ENABLED))
        if now is None:
            kp.skipped["thp"] = f"no transparent huge pages here ({THP_ENABLED} does not exist)"
        elif now == knobs.thp:
            kp.already.append("thp")
        else:  # its content is no valid input: the restore writes the mode it had
            kp.ops.append(_write(THP_ENABLED, str(knobs.thp), undo=now))
    if "idle_max_latency_us" in asked:
        _plan_idle(kp, state, users, int(knobs.idle_max_latency_us or 0))
    if "governor" in asked:
        _plan_governor(kp, state, users, str(knobs.governor))
    if "min_freq" in asked:
        _plan_min_freq(kp, state, users, knobs.min_freq)
    if "smt" in asked:
        _plan_smt(kp, state, users, systems, bool(knobs.smt), facts)
    return kp


def _plan_idle(kp: KnobPlan, state: KnobState, users: frozenset[int], limit: int) -> None:
    bare = [c for c in sorted(users) if not state.idle_states(c)]
    if bare:
        kp.skipped["idle_max_latency_us"] = (f"no cpuidle states on CPU {format_cpulist(bare)}"
                                             " (no cpuidle driver)")
        return
    before = len(kp.ops)
    for cpu in sorted(users):
        for index, _name, latency, disable in state.idle_states(cpu):
            if latency > limit and disable != "1":
                kp.ops.append(_write(f"{CPU_DIR}/cpu{cpu}/cpuidle/state{index}/disable", "1"))
    if len(kp.ops) == before:
        kp.already.append("idle_max_latency_us")


def _no_cpufreq(kp: KnobPlan, state: KnobState, users: frozenset[int], name: str) -> bool:
    bare = [c for c in sorted(users) if state.freq(c, "scaling_governor") is None]
    if bare:
        kp.skipped[name] = f"no cpufreq on CPU {format_cpulist(bare)} (no cpufreq driver)"
    return bool(bare)


def _plan_governor(kp: KnobPlan, state: KnobState, users: frozenset[int], gov: str) -> None:
    if _no_cpufreq(kp, state, users, "governor"):
        return
    before = len(kp.ops)
    for cpu in sorted(users):
        offered = (state.freq(cpu, "scaling_available_governors") or "").split()
        if gov not in offered:
            raise UsageError(f"governor = {gov!r}: CPU {cpu} does not offer it; allowed: "
                             + (", ".join(offered) or "none listed"))
        if (state.freq(cpu, "scaling_governor") or "").strip() != gov:
            kp.ops.append(_write(f"{CPU_DIR}/cpu{cpu}/cpufreq/scaling_governor", gov))
        shared = set(parse_cpulist(state.freq(cpu, "affected_cpus") or str(cpu))) - users
        if shared:
            kp.notes.append(f"cpufreq: CPU {cpu} shares its policy with CPU "
                            f"{format_cpulist(shared)}: their governor and frequency "
                            "change too")
    if len(kp.ops) == before:
        kp.already.append("governor")


def _plan_min_freq(kp: KnobPlan, state: KnobState, users: frozenset[int],
                   want: str | int | None) -> None:
    if _no_cpufreq(kp, state, users, "min_freq"):
        return
    before = len(kp.ops)
    for cpu in sorted(users):
        lo, hi = state.freq(cpu, "cpuinfo_min_freq"), state.freq(cpu, "cpuinfo_max_freq")
        if not (lo and hi and lo.isdigit() and hi.isdigit()):
            kp.skipped["min_freq"] = f"CPU {cpu} reports no cpuinfo_min_freq/cpuinfo_max_freq"
            del kp.ops[before:]
            return
        khz = int(hi) if want == "max" else int(want or 0)
        if not int(lo) <= khz <= int(hi):
            raise UsageError(f"min_freq = {want!r}: out of range for CPU {cpu}; allowed: "
                             f"{lo}..{hi} kHz, or \"max\"")
        if (state.freq(cpu, "scaling_min_freq") or "").strip() != str(khz):
            # only the minimum moves: its restore writes the old minimum back, which is
            # never above the maximum (left as it was)
            kp.ops.append(_write(f"{CPU_DIR}/cpu{cpu}/cpufreq/scaling_min_freq", str(khz)))
    if len(kp.ops) == before:
        kp.already.append("min_freq")


def smt_siblings(state: KnobState, user: Iterable[int]) -> frozenset[int]:
    """The SMT siblings of the user CPUs (not themselves), online or not."""
    users = frozenset(user)
    out: set[int] = set()
    for cpu in users:
        out |= state.siblings(cpu)
    return frozenset(out - users)


def _plan_smt(kp: KnobPlan, state: KnobState, users: frozenset[int], systems: frozenset[int],
              on: bool, facts: Facts | None) -> None:
    sib = {c: state.siblings(c) - {c} for c in sorted(users)}
    if not on:
        for cpu, others in sib.items():
            both = sorted(others & users)
            if both:
                raise UsageError(f"smt = false: CPU {both[0]} is an SMT sibling of user CPU "
                                 f"{cpu} and a user CPU itself; allowed: user CPUs of "
                                 "distinct cores")
            mine = sorted(others & systems)
            if mine:
                raise UsageError(f"smt = false: CPU {mine[0]} is an SMT sibling of user CPU "
                                 f"{cpu} and a system CPU; allowed: a [shield] system set "
                                 f"without it (it goes offline)")
    every = sorted({s for others in sib.values() for s in others})
    if not every:
        kp.skipped["smt"] = (f"no SMT: CPU {format_cpulist(users)} has no sibling thread"
                             if on is False else
                             f"no offline SMT sibling of CPU {format_cpulist(users)} known "
                             "(an offline CPU's topology is not listed)")
        return
    value = "1" if on else "0"
    todo = [c for c in every if state.online(c) != on]
    if not todo:
        kp.already.append("smt")
        return
    missing = [c for c in todo if state.get(f"{CPU_DIR}/cpu{c}/online") is None]
    if missing:
        kp.skipped["smt"] = f"CPU {format_cpulist(missing)} cannot go offline (no online file)"
        return
    if not on and facts is not None:
        # a task or IRQ bound to the siblings alone loses its binding when they go: keep
        # it (a no-op now), so that its restore, after theirs, puts it back
        gone = frozenset(todo)
        for t in facts.tasks:
            if not t.per_cpu and t.affinity and t.affinity <= gone:
                kp.first.append({"op": "affinity", "tid": t.tid, "cpus": sorted(t.affinity)})
        for irq in facts.irqs:
            if irq.affinity and irq.affinity <= gone:
                kp.first.append(_write(f"/proc/irq/{irq.irq}/smp_affinity_list",
                                       format_cpulist(irq.affinity)))
    for c in todo:
        kp.first.append(_write(f"{CPU_DIR}/cpu{c}/online", value))
    if not on:
        kp.offline = frozenset(todo)
        kp.notes.append(f"SMT: CPU {format_cpulist(todo)} offline (sibling of user CPU "
                        f"{format_cpulist(users)}); the kernel moved what ran there")


def knobs_in_effect(state: KnobState, kp: KnobPlan) -> tuple[dict[str, Any], list[str]]:
    """Per knob asked: requested, in effect (read back now), ok, and why it was skipped;
    and the problems (knobs asked, not skipped, not in effect)."""
    out: dict[str, Any] = {}
    problems: list[str] = []
    users = sorted(kp.user)
    for name, want in kp.knobs.asked().items():
        entry: dict[str, Any] = {"requested": want, "in_effect": None, "ok": None,
                                 "skipped": kp.skipped.get(name)}
        if name in kp.skipped:
            out[name] = entry
            continue
        now: Any = None
        ok = False
        if name == "timer_migration":
            now = _onoff(state.get(TIMER_MIGRATION))
        elif name == "watchdogs":
            paths = [WATCHDOG] if state.get(WATCHDOG) is not None else \
                [p for p in (NMI_WATCHDOG, SOFT_WATCHDOG) if state.get(p) is not None]
            vals = [_onoff(state.get(p)) for p in paths]
            now = any(v for v in vals) if vals and None not in vals else None
        elif name == "vm_stat_interval":
            v = state.get(STAT_INTERVAL)
            now = int(v) if v and v.strip().isdigit() else None
        elif name == "numa_balancing":
            now = _onoff(state.get(NUMA_BALANCING))
        elif name == "thp":
            now = thp_mode(state.get(THP_ENABLED))
        elif name == "idle_max_latency_us":
            enabled = [lat for c in users for _, _, lat, dis in state.idle_states(c)
                       if dis != "1"]
            now = max(enabled) if enabled else 0
            ok = now <= int(want)
        elif name == "governor":
            govs = {c: (state.freq(c, "scaling_governor") or "").strip() for c in users}
            now = next(iter(govs.values())) if len(set(govs.values())) == 1 else \
                {str(c): g for c, g in govs.items()}
        elif name == "min_freq":
            mins = {c: state.freq(c, "scaling_min_freq") for c in users}
            wants = {c: (state.freq(c, "cpuinfo_max_freq") if want == "max" else str(want))
                     for c in users}
            vals = {int(v) for v in mins.values() if v and v.strip().isdigit()}
            now = min(vals) if vals else None
            ok = all((mins[c] or "").strip() == (wants[c] or "").strip() for c in users)
        elif name == "smt":
            sib = sorted(smt_siblings(state, users) | kp.offline)
            now = any(state.online(c) for c in sib)
        if name not in ("idle_max_latency_us", "min_freq"):
            ok = now == want
        entry.update(in_effect=now, ok=ok)
        if not ok:
            problems.append(f"{name} = {_toml_like(want)} is not in effect "
                            f"(reads {_toml_like(now)})")
        out[name] = entry
    return out, problems


_KNOB_PATHS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(re.escape(TIMER_MIGRATION) + "$"), "timer_migration"),
    (re.compile("/proc/sys/kernel/(nmi_|soft_)?watchdog$"), "watchdogs"),
    (re.compile(re.escape(STAT_INTERVAL) + "$"), "vm_stat_interval"),
    (re.compile(re.escape(NUMA_BALANCING) + "$"), "numa_balancing"),
    (re.compile(re.escape(THP_ENABLED) + "$"), "thp"),
    (re.compile(rf"{CPU_DIR}/cpu\d+/cpuidle/state\d+/disable$"), "idle_max_latency_us"),
    (re.compile(rf"{CPU_DIR}/cpu\d+/cpufreq/scaling_governor$"), "governor"),
    (re.compile(rf"{CPU_DIR}/cpu\d+/cpufreq/scaling_min_freq$"), "min_freq"),
    (re.compile(rf"{CPU_DIR}/cpu\d+/online$"), "smt"),
)


def knob_path(path: str) -> str | None:
    """The runtime knob a written file belongs to, or None."""
    return next((name for rx, name in _KNOB_PATHS if rx.match(path)), None)


def _toml_like(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return f'"{v}"'
    return str(v)


def skipped_note(kp: KnobPlan) -> str | None:
    """One line naming the knobs skipped (the target lacks them), or None."""
    if not kp.skipped:
        return None
    return "runtime knobs skipped (this system lacks them): " + "; ".join(
        f"{n}: {why}" for n, why in kp.skipped.items())
