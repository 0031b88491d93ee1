# SPDX-License-Identifier: MIT
"""Kernel build and boot: preemption model, tick, CPU isolation."""

from __future__ import annotations

import re

from rtlab.cpulist import format_cpulist
from rtlab.system.doctor.base import Check, Code, Context, Finding, Severity
from rtlab.system.sysroot import parse_cpulist

_CONFIG_MODES = (
    ("CONFIG_PREEMPT_RT", "rt"),
    ("CONFIG_PREEMPT_LAZY", "lazy"),
    ("CONFIG_PREEMPT", "full"),
    ("CONFIG_PREEMPT_VOLUNTARY", "voluntary"),
    ("CONFIG_PREEMPT_NONE", "none"),
)


def _config_mode(cfg: dict[str, str]) -> str | None:
    for key, mode in _CONFIG_MODES:
        if cfg.get(key) == "y":
            return mode
    return None


class PreemptionCheck(Check):
    id = "preempt"
    title = "Kernel preemption model"
    why = (
        "Without PREEMPT_RT, interrupt handlers, softirqs and spinlocked kernel sections "
        "cannot be preempted, so a woken RT task waits for them (up to milliseconds)."
    )

    def run(self, ctx: Context) -> Finding:
        s = ctx.sys
        version = s.uname_version() or ""
        realtime = s.read("sys/kernel/realtime")
        cfg = ctx.kconfig
        facts: dict[str, object] = {
            "uname_v": version,
            "sys_kernel_realtime": realtime,
            "config_source": ctx.kconfig_with_source[1],
        }
        is_rt = (
            realtime == "1"
            or bool(re.search(r"PREEMPT[_ ]RT", version))
            or cfg.get("CONFIG_PREEMPT_RT") == "y"
        )
        if is_rt:
            facts["model"] = "rt"
            return self.finding(
                Severity.OK, "PREEMPT_RT kernel", facts=facts, codes=(Code.PREEMPT_RT,)
            )
        dynamic = "PREEMPT_DYNAMIC" in version or cfg.get("CONFIG_PREEMPT_DYNAMIC") == "y"
        facts["dynamic"] = dynamic
        mode: str | None = None
        source = ""
        if dynamic:
            rel = "sys/kernel/debug/sched/preempt"
            text = s.read(rel)
            if text is not None:
                m = re.search(r"\((\w+)\)", text)
                if m:
                    mode, source = m.group(1), "debugfs sched/preempt"
            else:
                reason = s.read_reason(rel)
                if reason == "missing":
                    reason = (
                        "no sched/preempt in debugfs"
                        if s.listdir("sys/kernel/debug")
                        else "debugfs not mounted"
                    )
                facts["debugfs_preempt"] = reason
            if mode is None and ctx.cmdline.get("preempt"):
                mode, source = ctx.cmdline["preempt"], "cmdline preempt="
        if mode is None:
            mode = _config_mode(cfg)
            source = "kernel config default" if mode else ""
        if mode is None and not cfg and not dynamic and "PREEMPT " in version + " ":
            mode, source = "full", "uname -v"
        facts.update({"model": mode, "model_source": source})
        if mode is None:
            return self.finding(
                Severity.UNKNOWN,
                "not PREEMPT_RT; preemption mode unknown (no kernel config, "
                "debugfs sched/preempt unreadable)",
                facts=facts,
                advice="expose the config (CONFIG_IKCONFIG_PROC=y or /boot/config-$(uname -r))",
                codes=(Code.PREEMPT_MODE_UNREADABLE,),
            )
        how = f"{mode} (from {source})"
        if dynamic and source != "debugfs sched/preempt":
            how += f"; live mode unreadable: {facts.get('debugfs_preempt', 'n/a')}"
        rt_advice = (
            "boot a PREEMPT_RT kernel (CONFIG_PREEMPT_RT=y; Debian: "
            "apt install linux-image-rt-amd64 / -rt-arm64)"
        )
        if mode in ("full", "lazy"):
            return self.finding(
                Severity.WARNING,
                f"not PREEMPT_RT; preemption {how}",
                advice=rt_advice,
                facts=facts,
                codes=(Code.PREEMPT_FULL,),
            )
        if dynamic:
            rt_advice += "; meanwhile add preempt=full to the kernel command line"
        return self.finding(
            Severity.CRITICAL,
            f"not PREEMPT_RT; preemption {how}",
            advice=rt_advice,
            facts=facts,
            codes=(Code.PREEMPT_NONE,),
        )


class TickCheck(Check):
    id = "hz-tick"
    title = "Timer tick (HZ, NO_HZ_FULL)"
    why = (
        "The periodic tick interrupts every busy CPU HZ times a second; only NO_HZ_FULL "
        "with nohz_full= stops it on CPUs that run a single task."
    )

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
            return self.finding(
                Severity.WARNING,
                summary + "; nohz_full= given but CONFIG_NO_HZ_FULL is not built, so it is ignored",
                advice="build with CONFIG_NO_HZ_FULL=y",
                facts=facts,
                codes=(Code.NOHZ_FULL_NOT_BUILT,),
            )
        if mode != "full":
            return self.finding(
                Severity.INFO,
                summary + " (the tick runs on busy CPUs)",
                advice="for isolated CPUs: build with CONFIG_NO_HZ_FULL=y and "
                "boot with nohz_full=<isolated CPUs>",
                facts=facts,
                codes=(Code.NO_NOHZ_FULL,),
            )
        return self.finding(Severity.OK, summary, facts=facts)


def _isolcpus_list(value: str | None) -> list[int]:
    if not value:
        return []
    parts = [p for p in value.split(",") if p and not p[0].isalpha()]
    try:
        return parse_cpulist(",".join(parts))
    except ValueError:
        return []


class IsolationCheck(Check):
    id = "isolation"
    title = "CPU isolation (isolcpus, nohz_full, rcu_nocbs, irqaffinity)"
    why = (
        "On a CPU that is not isolated, ordinary tasks, kernel threads, timers and RCU "
        "callbacks compete with the measured thread."
    )
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
            return self.finding(
                Severity.CRITICAL,
                f"isolation configured but not in effect for CPUs {format_cpulist(missing)}",
                advice="check the parameter syntax and that the kernel has "
                "CONFIG_CPU_ISOLATION (isolcpus) and CONFIG_NO_HZ_FULL (nohz_full); "
                "see dmesg | grep -i -e isol -e nohz",
                facts=facts,
                codes=(Code.ISOLATION_NOT_IN_EFFECT,),
            )
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
            return self.finding(
                sev, "no CPU is isolated", advice=advice, facts=facts, codes=(Code.NO_ISOLATION,)
            )
        outside = sorted(set(ctx.requested_cpus or []) - in_effect)
        if outside:
            return self.finding(
                Severity.WARNING,
                f"measured CPUs {format_cpulist(outside)} are not isolated "
                f"(isolated: {format_cpulist(in_effect)})",
                advice=f"measure on the isolated CPUs ({format_cpulist(in_effect)}) or " + advice,
                facts=facts,
                codes=(Code.CPUS_NOT_ISOLATED,),
            )
        notes = ""
        if want_isol or want_nohz:
            lacking = [k for k in ("rcu_nocbs", "irqaffinity") if k not in cmd]
            if lacking:
                notes = f" (no {', '.join(lacking)} on the cmdline)"
        return self.finding(
            Severity.OK, f"isolated in effect: {format_cpulist(in_effect)}" + notes, facts=facts
        )
