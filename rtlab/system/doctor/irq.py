# SPDX-License-Identifier: MIT
"""Interrupts: irqbalance and IRQ affinity against isolated CPUs."""

from __future__ import annotations

from rtlab.cpulist import format_cpulist
from rtlab.system.doctor.check import Check, Code, Context, Finding, Severity


class IrqbalanceCheck(Check):
    """irqbalance periodically rewrites IRQ affinities, and may move device interrupts onto the
    measured CPUs in the middle of a run."""

    id = "irqbalance"
    title = "irqbalance daemon"

    def run(self, ctx: Context) -> Finding:
        s = ctx.sys
        if not s.exists("proc"):
            return self.unknown("proc/ not readable")
        pids = [pid for pid, comm in s.processes() if comm == "irqbalance"]
        facts = {"pids": pids}
        if pids:
            iso = format_cpulist(ctx.isolated) or "<measured CPUs>"
            return self.problem(
                Severity.WARNING, Code.IRQBALANCE_RUNNING,
                f"irqbalance running (pid {', '.join(map(str, pids))})",
                advice="systemctl disable --now irqbalance, or ban the measured CPUs: "
                f"IRQBALANCE_BANNED_CPULIST={iso} in /etc/default/irqbalance",
                facts=facts)
        return self.ok("irqbalance not running", facts)


class IrqAffinityCheck(Check):
    """A device interrupt delivered to an isolated CPU preempts the measured thread for the
    hard IRQ handler (and its thread on PREEMPT_RT)."""

    id = "irq-affinity"
    title = "IRQ affinity vs isolated CPUs"
    per_cpu = True

    def applies(self, ctx: Context) -> bool:
        return bool(ctx.isolated)

    def run(self, ctx: Context) -> Finding:
        s = ctx.sys
        target = set(ctx.cpus) & ctx.isolated
        hits: dict[str, str] = {}
        irqs = [n for n in s.listdir("proc/irq") if n.isdigit()]
        for irq in irqs:
            lst = s.cpulist(f"proc/irq/{irq}/effective_affinity_list")
            if not lst:
                lst = s.cpulist(f"proc/irq/{irq}/smp_affinity_list")
            if lst and set(lst) & target:
                hits[irq] = format_cpulist(lst)
        facts = {
            "irqs_checked": len(irqs),
            "irqs_on_isolated": hits,
            "isolated_measured": format_cpulist(target),
            "cmdline_irqaffinity": ctx.cmdline.get("irqaffinity"),
        }
        if not irqs:
            return self.unknown("proc/irq not readable", facts)
        if hits:
            hk = format_cpulist(ctx.housekeeping)
            names = ", ".join(sorted(hits, key=int)[:8]) + (" ..." if len(hits) > 8 else "")
            return self.problem(
                Severity.WARNING, Code.IRQ_ON_ISOLATED,
                f"{len(hits)} IRQ(s) may hit isolated CPUs: {names}",
                advice=f"echo {hk} > /proc/irq/N/smp_affinity_list for each; boot with "
                f"irqaffinity={hk} and isolcpus=managed_irq,...",
                facts=facts)
        return self.ok(f"no IRQ targets the isolated CPUs {format_cpulist(target)}", facts)
