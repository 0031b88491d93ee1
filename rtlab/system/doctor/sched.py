# SPDX-License-Identifier: MIT
"""Scheduler knobs: RT throttling, RT group scheduling, timer migration, watchdogs,
per-CPU kernel thread priorities, unbound workqueues."""

from __future__ import annotations

from rtlab.cpulist import format_cpulist, parse_cpumask
from rtlab.system.doctor.check import Check, Code, Context, Finding, Severity

_POLICY = {0: "OTHER", 1: "FIFO", 2: "RR", 3: "BATCH", 5: "IDLE", 6: "DEADLINE"}


class RtThrottlingCheck(Check):
    """RT throttling stops all real-time tasks of a CPU once they used the runtime of a period,
    so a busy-looping RT thread is frozen for the rest of the period."""

    id = "rt-throttle"
    title = "RT throttling (sched_rt_runtime_us / sched_rt_period_us)"

    def run(self, ctx: Context) -> Finding:
        s = ctx.sys
        runtime = s.read_int("proc/sys/kernel/sched_rt_runtime_us")
        period = s.read_int("proc/sys/kernel/sched_rt_period_us")
        facts = {
            "runtime_us": runtime,
            "period_us": period,
            "rr_timeslice_ms": s.read_int("proc/sys/kernel/sched_rr_timeslice_ms"),
        }
        if runtime is None or period is None:
            return self.unknown("kernel.sched_rt_runtime_us / _period_us not readable", facts)
        if runtime < 0:
            return self.problem(
                Severity.INFO, Code.RT_THROTTLING_OFF, "RT throttling disabled (runtime -1)",
                advice="keep it only while measuring on isolated CPUs; restore with sysctl "
                "kernel.sched_rt_runtime_us=950000 (a runaway RT loop can hang its CPU)",
                facts=facts)
        if runtime >= period:
            return self.ok(f"RT tasks may use the whole period ({runtime}/{period} µs)", facts)
        gap_ms = (period - runtime) / 1000
        summary = (
            f"RT throttling at {runtime}/{period} µs: a busy RT loop is stopped "
            f"{gap_ms:g} ms every {period / 1000:g} ms"
        )
        advice = (
            "for busy-looping RT probes on isolated CPUs: sysctl "
            "kernel.sched_rt_runtime_us=-1 for the duration of the run"
        )
        sev = Severity.WARNING if runtime * 100 < period * 95 else Severity.INFO
        return self.problem(sev, Code.RT_THROTTLING, summary, advice=advice, facts=facts)


def _cpu_cgroup(ctx: Context) -> tuple[str | None, str | None]:
    """(mount point of the v1 cpu controller, this process's path in it)."""
    s = ctx.sys
    path = None
    for line in (s.read("proc/self/cgroup") or "").splitlines():
        _hid, _, rest = line.partition(":")
        ctrls, _, cpath = rest.partition(":")
        if "cpu" in ctrls.split(","):
            path = cpath
    mount = None
    for line in (s.read("proc/self/mountinfo") or "").splitlines():
        pre, _, post = line.partition(" - ")
        fields, pfields = pre.split(), post.split()
        if (
            len(fields) > 4
            and len(pfields) > 2
            and pfields[0] == "cgroup"
            and ("cpu" in pfields[2].split(","))
        ):
            mount = fields[4]
    if mount is None:
        for cand in (
            "/sys/fs/cgroup/cpu",
            "/sys/fs/cgroup/cpu,cpuacct",
            "/sys/fs/cgroup/cpuacct,cpu",
        ):
            if s.exists(cand + "/cpu.rt_runtime_us"):
                mount = cand
                break
    return mount, path


class RtGroupCheck(Check):
    """With CONFIG_RT_GROUP_SCHED every cpu cgroup has its own RT budget; in a group with
    cpu.rt_runtime_us 0, SCHED_FIFO fails with EPERM even for root."""

    id = "rt-group"
    title = "RT group scheduling (cpu cgroup cpu.rt_runtime_us)"

    def run(self, ctx: Context) -> Finding:
        s = ctx.sys
        built = ctx.kconfig.get("CONFIG_RT_GROUP_SCHED")
        mount, path = _cpu_cgroup(ctx)
        facts: dict[str, object] = {
            "config_rt_group_sched": built,
            "cpu_cgroup_mount": mount,
            "cgroup": path,
        }
        if built == "n":
            return self.ok("CONFIG_RT_GROUP_SCHED not set", facts)
        if mount is None or path is None:
            if built == "y":
                return self.finding(
                    Severity.INFO,
                    "RT group scheduling built, no cgroup v1 cpu controller found for this process",
                    facts=facts,
                )
            return self.unknown("no cgroup v1 cpu controller and no kernel config", facts)
        chain = []
        cur = path.rstrip("/")
        while True:
            rel = f"{mount}{cur}/cpu.rt_runtime_us"
            chain.append((cur or "/", s.read_int(rel)))
            if not cur:
                break
            cur = cur.rsplit("/", 1)[0]
        facts["rt_runtime_us"] = {p: v for p, v in chain}
        own = chain[0][1]
        if own is None:
            return self.unknown(f"cpu.rt_runtime_us of {path} not readable", facts)
        zero = [p for p, v in chain if v == 0]
        if zero:
            return self.problem(
                Severity.CRITICAL, Code.RT_GROUP_ZERO,
                f"cpu cgroup {zero[0]} has cpu.rt_runtime_us=0: SCHED_FIFO fails with EPERM",
                advice=f"give it RT runtime, parents first (echo 950000 > {mount}<group>/"
                f"cpu.rt_runtime_us for each group down to {path}), or move the shell "
                f"to the root group: echo $$ > {mount}/cgroup.procs",
                facts=facts)
        return self.ok(f"cpu cgroup {path}: rt_runtime_us={own}", facts)


class TimerMigrationCheck(Check):
    """With timer migration on, timers of idle CPUs are moved to busy ones, so unrelated timer
    callbacks can land on the measured CPU."""

    id = "timer-migration"
    title = "Timer migration (kernel.timer_migration)"

    def run(self, ctx: Context) -> Finding:
        value = ctx.sys.read_int("proc/sys/kernel/timer_migration")
        facts = {"timer_migration": value}
        if value is None:
            return self.unknown("kernel.timer_migration not readable", facts)
        if value:
            return self.problem(
                Severity.INFO, Code.TIMER_MIGRATION, "timer_migration=1",
                advice="sysctl kernel.timer_migration=0", facts=facts)
        return self.ok("timer_migration=0", facts)


class WatchdogCheck(Check):
    """The hard lockup watchdog fires a perf NMI on every CPU periodically and the soft lockup
    watchdog a timer plus a stopper thread, both on the measured CPUs."""

    id = "watchdog"
    title = "Lockup watchdogs (NMI, soft lockup)"
    per_cpu = True

    def run(self, ctx: Context) -> Finding:
        s = ctx.sys
        nmi = s.read_int("proc/sys/kernel/nmi_watchdog")
        soft = s.read_int("proc/sys/kernel/soft_watchdog")
        enabled = s.read_int("proc/sys/kernel/watchdog")
        mask_text = s.read("proc/sys/kernel/watchdog_cpumask")
        mask = s.cpulist("proc/sys/kernel/watchdog_cpumask")
        facts = {
            "nmi_watchdog": nmi,
            "soft_watchdog": soft,
            "watchdog": enabled,
            "watchdog_cpumask": mask_text,
            "watchdog_thresh": s.read_int("proc/sys/kernel/watchdog_thresh"),
        }
        if nmi is None and soft is None and enabled is None:
            return self.unknown("kernel.*watchdog sysctls not readable", facts)
        on_cpus = set(ctx.cpus) if mask is None else set(mask) & set(ctx.cpus)
        housekeeping = format_cpulist(ctx.housekeeping)
        if nmi and enabled != 0:
            return self.problem(
                Severity.WARNING, Code.NMI_WATCHDOG, "NMI (hard lockup) watchdog on",
                advice="sysctl kernel.nmi_watchdog=0 (boot: nmi_watchdog=0)", facts=facts)
        if soft and enabled != 0 and on_cpus:
            return self.problem(
                Severity.INFO, Code.SOFT_WATCHDOG,
                f"soft lockup watchdog on CPUs {format_cpulist(on_cpus)}",
                advice=f"sysctl kernel.watchdog_cpumask={housekeeping} (boot: nowatchdog "
                "or nosoftlockup)",
                facts=facts)
        return self.ok("no lockup watchdog on the measured CPUs", facts)


_KTHREADS = ("ksoftirqd/", "ktimers/", "rcuc/", "rcuop/", "rcuog/", "migration/", "irq/")


class KthreadCheck(Check):
    """A measured RT thread at or below the priority of IRQ threads, ktimers or rcuc waits for
    them; above them, it can starve the work it depends on."""

    id = "kthreads"
    title = "Kernel thread priorities (ksoftirqd, ktimers, rcuc, irq threads)"

    def run(self, ctx: Context) -> Finding:
        s = ctx.sys
        summary: dict[str, dict[str, int]] = {}
        for pid, comm in s.processes():
            kind = next((k for k in _KTHREADS if comm.startswith(k)), None)
            if kind is None:
                continue
            sched = s.sched_of(pid)
            if sched is None:
                continue
            policy, prio = sched
            label = _POLICY.get(policy, str(policy)) + (f" {prio}" if prio else "")
            bucket = summary.setdefault(kind.rstrip("/"), {})
            bucket[label] = bucket.get(label, 0) + 1
        facts = {"threads": summary}
        if not summary:
            return self.unknown("no per-CPU kernel threads visible in proc/", facts)
        text = "; ".join(
            f"{k}: " + ", ".join(f"{n}x {lab}" for lab, n in sorted(v.items()))
            for k, v in sorted(summary.items())
        )
        return self.problem(
            Severity.INFO, Code.KTHREAD_PRIORITIES, text,
            advice="run the measured thread above the threads it does not depend on "
            "(e.g. SCHED_FIFO 95 > irq threads at 50); raise the IRQ thread that "
            "delivers your event: chrt -f -p 96 <pid of irq/N-name>",
            facts=facts)


class WorkqueueCheck(Check):
    """Unbound kernel work (writeback, crypto, ...) runs on any CPU in the workqueue cpumask,
    including isolated CPUs unless they are removed from it."""

    id = "workqueue"
    title = "Unbound workqueue CPU mask"

    def applies(self, ctx: Context) -> bool:
        return bool(ctx.isolated)

    def run(self, ctx: Context) -> Finding:
        text = ctx.sys.read("sys/devices/virtual/workqueue/cpumask")
        facts: dict[str, object] = {"cpumask": text}
        if text is None:
            return self.unknown("sys/devices/virtual/workqueue/cpumask not readable", facts)
        try:
            mask = set(parse_cpumask(text))
        except ValueError:
            return self.unknown(f"unparsable workqueue cpumask {text!r}", facts)
        on = sorted(mask & ctx.isolated)
        facts["isolated_in_mask"] = format_cpulist(on)
        if on:
            hk = ctx.housekeeping
            hk_mask = format(sum(1 << c for c in hk), "x")
            return self.problem(
                Severity.WARNING, Code.WORKQUEUE_ON_ISOLATED,
                f"unbound workqueues may run on isolated CPUs {format_cpulist(on)}",
                advice=f"echo {hk_mask} > /sys/devices/virtual/workqueue/cpumask", facts=facts)
        return self.ok("unbound workqueues kept off isolated CPUs", facts)
