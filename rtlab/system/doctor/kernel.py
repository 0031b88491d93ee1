# SPDX-License-Identifier: MIT
"""Kernel build and boot: preemption model, tick, CPU isolation."""

from __future__ import annotations

from rtlab.cpulist import format_cpulist, parse_cpulist
from rtlab.engine.transport import LocalTransport
from rtlab.errors import RtlabError
from rtlab.system.doctor.check import Check, Code, Context, Finding, Severity
from rtlab.system.facts import Preemption, read_preemption


def _read_preemption(ctx: Context) -> Preemption:
    """The engine decides (`rtlab-probe sys preempt`): the same answer every probe's
    header records as system.preempt, so doctor and provenance always agree. A board's
    engine decides live on the board (`ctx.engine`); a copied tree is read by this
    machine's engine with `--root`."""
    if ctx.engine is not None:
        return read_preemption(ctx.engine)

    root = None if ctx.sys.live else str(ctx.sys.root)
    return read_preemption(LocalTransport(), root=root)


class PreemptionCheck(Check):
    """Without PREEMPT_RT, interrupt handlers, softirqs and spinlocked kernel sections cannot
    be preempted, so a woken RT task waits for them (up to milliseconds)."""

    id = "preempt"
    title = "Kernel preemption model"

    def run(self, ctx: Context) -> Finding:
        try:
            p = _read_preemption(ctx)
        except RtlabError as exc:
            return self.unknown(f"preemption model not read: {exc.one_line()}")
        facts: dict[str, object] = {
            "model": None if p.model == "unknown" else p.model,
            "model_source": p.source,
            "dynamic": p.dynamic,
            "live_error": p.live_error,
            "uname_v": p.version,
            "sys_kernel_realtime": p.realtime,
            "config_source": p.config,
        }
        if p.model == "rt":
            return self.finding(
                Severity.OK, f"PREEMPT_RT kernel (from {p.source})", facts=facts,
                codes=(Code.PREEMPT_RT,)
            )
        if p.model == "unknown":
            why = "no kernel config"
            if p.dynamic:
                why += f", live mode unreadable: {p.live_error}"
            return self.problem(
                Severity.UNKNOWN, Code.PREEMPT_MODE_UNREADABLE,
                f"not PREEMPT_RT; preemption mode unknown ({why})",
                advice="expose the config (CONFIG_IKCONFIG_PROC=y or /boot/config-$(uname -r))"
                + ("; mount debugfs to read the live mode" if p.dynamic else ""),
                facts=facts)
        rt_advice = (
            "boot a PREEMPT_RT kernel (CONFIG_PREEMPT_RT=y; Debian: "
            "apt install linux-image-rt-amd64 / -rt-arm64)"
        )
        if p.model in ("full", "lazy"):
            return self.problem(
                Severity.WARNING, Code.PREEMPT_FULL, f"not PREEMPT_RT; preemption {p.described}",
                advice=rt_advice, facts=facts)
        if p.dynamic:
            rt_advice += "; meanwhile add preempt=full to the kernel command line"
        return self.problem(
            Severity.CRITICAL, Code.PREEMPT_NONE, f"not PREEMPT_RT; preemption {p.described}",
            advice=rt_advice, facts=facts)


class TickCheck(Check):
    """The periodic tick interrupts every busy CPU HZ times a second; only NO_HZ_FULL with
    nohz_full= stops it on CPUs that run a single task."""

    id = "hz-tick"
    title = "Timer tick (HZ, NO_HZ_FULL)"

    def run(self, ctx: Context) -> Finding:
        cfg = ctx.kconfig
        cmd_nohz = ctx.cmdline.get("nohz_full")
        if not cfg:
            return self.unknown(
                "kernel config not readable (/proc/config.gz, /boot/config-*)",
                {"cmdline_nohz_full": cmd_nohz},
            )
        hz = cfg.get("CONFIG_HZ")
        mode = (
            "full"
            if cfg.get("CONFIG_NO_HZ_FULL") == "y"
            else "idle"
            if cfg.get("CONFIG_NO_HZ_IDLE") == "y"
            else "periodic"
            if cfg.get("CONFIG_HZ_PERIODIC") == "y"
            else "unknown"
        )
        facts = {
            "hz": int(hz) if hz and hz.isdigit() else hz,
            "tickless": mode,
            "cmdline_nohz_full": cmd_nohz,
        }
        summary = f"HZ={hz}, tick mode {mode}"
        if cmd_nohz and mode != "full":
            return self.problem(
                Severity.WARNING, Code.NOHZ_FULL_NOT_BUILT,
                summary + "; nohz_full= given but CONFIG_NO_HZ_FULL is not built, so it is ignored",
                advice="build with CONFIG_NO_HZ_FULL=y", facts=facts)
        if mode != "full":
            return self.problem(
                Severity.INFO, Code.NO_NOHZ_FULL, summary + " (the tick runs on busy CPUs)",
                advice="for isolated CPUs: build with CONFIG_NO_HZ_FULL=y and "
                "boot with nohz_full=<isolated CPUs>",
                facts=facts)
        return self.ok(summary, facts)


def _isolcpus_list(value: str | None) -> list[int]:
    if not value:
        return []
    parts = [p for p in value.split(",") if p and not p[0].isalpha()]
    try:
        return parse_cpulist(",".join(parts), strides=True)
    except ValueError:
        return []


class IsolationCheck(Check):
    """On a CPU that is not isolated, ordinary tasks, kernel threads, timers and RCU callbacks
    compete with the measured thread."""

    id = "isolation"
    title = "CPU isolation (isolcpus, nohz_full, rcu_nocbs, irqaffinity)"
    per_cpu = True

    def run(self, ctx: Context) -> Finding:
        s, cmd = ctx.sys, ctx.cmdline
        want_isol = _isolcpus_list(cmd.get("isolcpus"))
        want_nohz = _isolcpus_list(cmd.get("nohz_full"))
        isolated = s.cpulist("sys/devices/system/cpu/isolated")
        nohz = s.cpulist("sys/devices/system/cpu/nohz_full")
        facts = {
            "cmdline": {
                k: cmd.get(k)
                for k in ("isolcpus", "nohz_full", "rcu_nocbs", "irqaffinity")
                if k in cmd
            },
            "isolated": format_cpulist(isolated or []),
            "nohz_full": format_cpulist(nohz or []),
            "cpus": format_cpulist(ctx.cpus),
        }
        if isolated is None and not s.exists("sys/devices/system/cpu"):
            return self.unknown("sys/devices/system/cpu not readable", facts)
        missing = sorted(
            (set(want_isol) - set(isolated or [])) | (set(want_nohz) - set(nohz or []))
        )
        if missing:
            return self.problem(
                Severity.CRITICAL, Code.ISOLATION_NOT_IN_EFFECT,
                f"isolation configured but not in effect for CPUs {format_cpulist(missing)}",
                advice="check the parameter syntax and that the kernel has "
                "CONFIG_CPU_ISOLATION (isolcpus) and CONFIG_NO_HZ_FULL (nohz_full); "
                "see dmesg | grep -i -e isol -e nohz",
                facts=facts)
        in_effect = ctx.isolated
        housekeeping = ctx.housekeeping
        # never suggest isolating the housekeeping CPU(s) that irqaffinity= points at
        suggest = sorted((set(ctx.requested_cpus or []) or (set(ctx.online) - {0}))
                         - set(housekeeping))
        sug = format_cpulist(suggest) or "<cpus>"
        advice = (
            f"boot with isolcpus=nohz,domain,managed_irq,{sug} nohz_full={sug} "
            f"rcu_nocbs={sug} irqaffinity={format_cpulist(housekeeping)}"
        )
        if not in_effect:
            sev = Severity.WARNING if ctx.requested_cpus else Severity.INFO
            return self.problem(
                sev, Code.NO_ISOLATION, "no CPU is isolated",
                advice=advice, facts=facts)
        outside = sorted(set(ctx.requested_cpus or []) - in_effect)
        if outside:
            return self.problem(
                Severity.WARNING, Code.CPUS_NOT_ISOLATED,
                f"measured CPUs {format_cpulist(outside)} are not isolated "
                f"(isolated: {format_cpulist(in_effect)})",
                advice=f"measure on the isolated CPUs ({format_cpulist(in_effect)}) or " + advice,
                facts=facts)
        notes = ""
        if want_isol or want_nohz:
            lacking = [k for k in ("rcu_nocbs", "irqaffinity") if k not in cmd]
            if lacking:
                notes = f" (no {', '.join(lacking)} on the cmdline)"
        return self.ok(f"isolated in effect: {format_cpulist(in_effect)}" + notes, facts)
