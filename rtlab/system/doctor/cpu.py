# SPDX-License-Identifier: MIT
"""CPU and platform: the cores, SMT, caches, idle states, frequency, clocksource,
virtualization, mitigations, NUMA."""

from __future__ import annotations

import os
import struct

from rtlab.cpulist import format_cpulist, parse_cpulist
from rtlab.engine.transport import LocalTransport
from rtlab.errors import RtlabError
from rtlab.machine_text import processor
from rtlab.system.cpumodel import CpuModels, read_cpu_models
from rtlab.system.doctor.check import Check, Code, Context, Finding, Severity

CPU = "sys/devices/system/cpu"
DEEP_IDLE_US = 10  # an idle state with a longer exit latency is worth a warning


def _read_cpu_models(ctx: Context) -> CpuModels:
    """The engine names the cores (`rtlab-probe sys cpumodel`), with the one table of ARM
    ids that also writes every probe's header: a board's engine on the board
    (`ctx.engine`), this machine's on a copied tree with `--root`."""
    if ctx.engine is not None:
        return read_cpu_models(ctx.engine)
    return read_cpu_models(LocalTransport(), root=None if ctx.sys.live else str(ctx.sys.root))


class CpuModelCheck(Check):
    """Latency depends on the core: a small in-order core (Cortex-A53, A55) wakes and switches
    more slowly than a big out-of-order one, and on big.LITTLE the same work gives different
    latencies on the two kinds of CPU."""

    id = "cpu-model"
    title = "Processor cores"
    per_cpu = True

    def run(self, ctx: Context) -> Finding:
        try:
            found = _read_cpu_models(ctx)
        except RtlabError as exc:
            return self.unknown(f"CPU model not read: {exc.one_line()}")
        groups = found.cpu_models or ()
        facts: dict[str, object] = {
            "cpu_model": found.cpu_model,
            "cpu_models": [{"cpus": format_cpulist(c), "model": m} for c, m in groups],
            "cpuinfo": found.cpuinfo,
        }
        if found.cpu_models is None:
            return self.unknown(f"{found.cpuinfo} not readable ({found.error})", facts)
        if not groups:
            if found.cpu_model:
                return self.ok(f"{found.cpu_model} (no core named per CPU "
                                    f"in {found.cpuinfo})", facts)
            return self.unknown(f"{found.cpuinfo} names no core", facts)
        text = processor(found.as_system()) or ""
        measured = set(ctx.cpus) or {c for cpus, _ in groups for c in cpus}
        kinds = [(format_cpulist(c & measured), m) for c, m in groups if c & measured]
        facts["measured"] = [{"cpus": c, "model": m} for c, m in kinds]
        if len(kinds) > 1:
            per = ", ".join(f"{c} {m}" for c, m in kinds)
            return self.finding(
                Severity.INFO,
                f"{found.cpu_model}: the measured CPUs are cores of {len(kinds)} kinds "
                f"(CPUs {per})",
                advice="measure each kind on its own (" + ", then ".join(
                    f"--cpus {c}" for c, _ in kinds) + ") and run the real-time work on "
                "the kind it was measured on",
                facts=facts,
            )
        if len(groups) > 1 and ctx.requested_cpus is not None and kinds:
            text += f"; measured CPUs {kinds[0][0]}: {kinds[0][1]}"
        return self.ok(text, facts)


class SmtCheck(Check):
    """SMT siblings share a core's execution units and L1/L2 caches, so work on a sibling slows
    and delays the measured thread."""

    id = "smt"
    title = "SMT (hyper-threading) siblings"
    per_cpu = True

    def run(self, ctx: Context) -> Finding:
        s = ctx.sys
        control = s.read(f"{CPU}/smt/control")
        siblings: dict[int, list[int]] = {}
        for cpu in ctx.cpus:
            lst = s.cpulist(f"{CPU}/cpu{cpu}/topology/thread_siblings_list")
            if lst is not None:
                siblings[cpu] = lst
        facts = {
            "smt_control": control,
            "siblings": {str(c): format_cpulist(v) for c, v in siblings.items()},
        }
        if not siblings:
            return self.unknown("no thread_siblings_list readable", facts)
        measured = set(ctx.cpus)
        busy = sorted(
            {
                o
                for c, lst in siblings.items()
                for o in lst
                if o != c and o not in measured and o not in ctx.isolated
            }
        )
        shared = sorted({c for c, lst in siblings.items() if len(lst) > 1})
        off = "echo off > /sys/devices/system/cpu/smt/control (or boot with nosmt)"
        if busy:
            facts["busy_siblings"] = format_cpulist(busy)
            return self.problem(
                Severity.WARNING, Code.SMT_SIBLING_BUSY,
                f"SMT on: siblings {format_cpulist(busy)} of the measured CPUs are busy "
                "(not isolated)",
                advice=f"isolate the whole core (add {format_cpulist(busy)} to isolcpus and "
                f"nohz_full and leave them idle) or turn SMT off: {off}",
                facts=facts)
        if shared and ctx.requested_cpus is None:
            return self.problem(
                Severity.WARNING, Code.SMT_ACTIVE,
                f"SMT on: CPUs {format_cpulist(shared)} share cores",
                advice=f"measure on one thread per core and keep its sibling idle, or {off}",
                facts=facts)
        if shared:
            pairs = sorted({format_cpulist(siblings[c]) for c in shared})
            inner = [p for p in pairs if len(set(parse_cpulist(p, strides=True)) & measured) > 1]
            if inner:
                return self.problem(
                    Severity.WARNING, Code.SMT_ACTIVE,
                    f"measured CPUs share cores: {', '.join(inner)}",
                    advice=f"measure on one thread per core, or {off}", facts=facts)
        return self.ok(
            "no busy SMT sibling" if shared else f"no SMT (control: {control or 'n/a'})", facts)


class CacheCheck(Check):
    """CPUs that share an L2 or L3 cache evict each other's data, so a memory-heavy neighbour
    adds cache-miss latency to the measured thread."""

    id = "cache"
    title = "Cache topology (shared L2/L3)"
    per_cpu = True

    def run(self, ctx: Context) -> Finding:
        s = ctx.sys
        groups: dict[str, set[str]] = {}
        shared_with_hk: dict[str, set[int]] = {}
        housekeeping = set(ctx.online) - ctx.isolated - set(ctx.cpus)
        for cpu in ctx.cpus:
            base = f"{CPU}/cpu{cpu}/cache"
            for index in s.listdir(base):
                if not index.startswith("index"):
                    continue
                level = s.read(f"{base}/{index}/level")
                ctype = s.read(f"{base}/{index}/type") or ""
                lst = s.cpulist(f"{base}/{index}/shared_cpu_list")
                if level is None or lst is None or ctype == "Instruction":
                    continue
                name = f"L{level}"
                groups.setdefault(name, set()).add(format_cpulist(lst))
                others = set(lst) & housekeeping
                if others and level != "1":
                    shared_with_hk.setdefault(name, set()).update(others)
        facts = {
            "shared": {k: sorted(v) for k, v in sorted(groups.items())},
            "shared_with_other_cpus": {
                k: format_cpulist(v) for k, v in sorted(shared_with_hk.items())
            },
        }
        if not groups:
            return self.unknown("no cache topology in sysfs", facts)
        text = "; ".join(
            f"{k} shared by {' | '.join(sorted(v))}" for k, v in sorted(groups.items()) if k != "L1"
        )
        if shared_with_hk:
            where = ", ".join(
                f"{k} with CPUs {format_cpulist(v)}" for k, v in sorted(shared_with_hk.items())
            )
            return self.problem(
                Severity.INFO, Code.CACHE_SHARED, f"measured CPUs share {where}",
                advice="pick measured CPUs whose L2 is not shared with busy CPUs; for the "
                "L3 use cache partitioning (resctrl / Intel CAT, AMD L3 QoS) if "
                "available",
                facts=facts)
        return self.ok(text or "no shared caches", facts)


def _dma_latency(ctx: Context) -> int | None:
    raw = ctx.sys.read_bytes("dev/cpu_dma_latency", 16)
    if raw is None:
        return None
    if len(raw) == 4:
        return int(struct.unpack("<i", raw)[0])
    try:
        text = raw.decode().strip()
        return int(text, 16) if text.startswith("0x") or not text.isdigit() else int(text)
    except ValueError:
        return None


def _dma_holders(ctx: Context) -> list[int]:
    holders: list[int] = []
    s = ctx.sys
    for pid, _comm in s.processes():
        for fd in s.listdir(f"proc/{pid}/fd"):
            if s.readlink(f"proc/{pid}/fd/{fd}") == "/dev/cpu_dma_latency":
                holders.append(pid)
                break
    return holders


class IdleCheck(Check):
    """Waking from a deep idle state costs its exit latency (tens to hundreds of µs) before the
    woken task can run."""

    id = "idle"
    title = "CPU idle states and cpu_dma_latency"
    per_cpu = True

    def run(self, ctx: Context) -> Finding:
        s = ctx.sys
        driver = s.read(f"{CPU}/cpuidle/current_driver")
        governor = s.read(f"{CPU}/cpuidle/current_governor") or s.read(
            f"{CPU}/cpuidle/current_governor_ro"
        )
        states: dict[str, dict[str, object]] = {}
        deepest = 0
        deep_names: set[str] = set()
        qos = _dma_latency(ctx)
        holders = [p for p in _dma_holders(ctx) if p != _self_pid(ctx)]
        limit = qos if qos is not None else 2_000_000_000
        for cpu in ctx.cpus:
            base = f"{CPU}/cpu{cpu}/cpuidle"
            for st in s.listdir(base):
                if not st.startswith("state"):
                    continue
                name = s.read(f"{base}/{st}/name") or st
                lat = s.read_int(f"{base}/{st}/latency")
                disabled = s.read_int(f"{base}/{st}/disable") == 1
                states.setdefault(name, {"latency_us": lat, "disabled_on": []})
                if disabled:
                    states[name]["disabled_on"].append(cpu)  # type: ignore[union-attr]
                elif lat is not None and lat <= limit:
                    deepest = max(deepest, lat)
                    if lat > DEEP_IDLE_US:
                        deep_names.add(name)
        cmd = {
            k: ctx.cmdline[k]
            for k in ("idle", "intel_idle.max_cstate", "processor.max_cstate", "cpuidle.off")
            if k in ctx.cmdline
        }
        facts = {
            "driver": driver,
            "governor": governor,
            "states": states,
            "deepest_enabled_exit_latency_us": deepest,
            "cpu_dma_latency_us": qos,
            "cpu_dma_latency_holders": holders,
            "cmdline": cmd,
        }
        held = (
            "cpu_dma_latency unknown"
            if qos is None
            else "cpu_dma_latency not held"
            if qos >= 2_000_000_000
            else f"cpu_dma_latency held at {qos} µs"
        )
        if holders:
            held += f" (held by pid {', '.join(map(str, holders))})"
        if driver is None and not states:
            if not s.exists(CPU):
                return self.unknown("sys/devices/system/cpu not readable", facts)
            return self.finding(
                Severity.INFO, f"no cpuidle driver (arch default idle); {held}", facts=facts
            )
        summary = (
            f"driver {driver}, governor {governor}; deepest enabled exit latency "
            f"{deepest} µs; {held}"
        )
        if deep_names:
            return self.problem(
                Severity.WARNING, Code.DEEP_IDLE_STATES, summary,
                advice="hold /dev/cpu_dma_latency at 0 during the run (write a 32-bit 0 and "
                "keep it open), or disable deep states: echo 1 > /sys/devices/system/"
                "cpu/cpuN/cpuidle/stateK/disable, or boot with "
                "intel_idle.max_cstate=1 processor.max_cstate=1",
                facts=facts)
        return self.ok(summary, facts)


def _self_pid(ctx: Context) -> int:
    return os.getpid() if ctx.sys.live else -1


class CpufreqCheck(Check):
    """A governor that lowers the clock makes the first microseconds after a wake-up slower and
    varying; boost/turbo makes frequency depend on the other cores' load."""

    id = "cpufreq"
    title = "CPU frequency governor and boost"
    per_cpu = True

    def run(self, ctx: Context) -> Finding:
        s = ctx.sys
        govs: dict[str, list[int]] = {}
        driver = None
        for cpu in ctx.cpus:
            gov = s.read(f"{CPU}/cpu{cpu}/cpufreq/scaling_governor")
            if gov is not None:
                govs.setdefault(gov, []).append(cpu)
                driver = driver or s.read(f"{CPU}/cpu{cpu}/cpufreq/scaling_driver")
        boost = s.read_int(f"{CPU}/cpufreq/boost")
        no_turbo = s.read_int(f"{CPU}/intel_pstate/no_turbo")
        boost_on = boost == 1 or no_turbo == 0
        facts = {
            "driver": driver,
            "governors": {g: format_cpulist(c) for g, c in govs.items()},
            "boost": boost,
            "intel_pstate_no_turbo": no_turbo,
            "sched_util_clamp_min_rt_default": s.read_int(
                "proc/sys/kernel/sched_util_clamp_min_rt_default"
            ),
        }
        if not govs:
            if not s.exists(CPU):
                return self.unknown("sys/devices/system/cpu not readable", facts)
            return self.finding(
                Severity.INFO,
                "no cpufreq: the frequency is fixed or set by firmware / the hypervisor",
                facts=facts,
            )
        bad = {g: c for g, c in govs.items() if g != "performance"}
        text = ", ".join(f"{g} on {format_cpulist(c)}" for g, c in govs.items())
        if bad:
            return self.problem(
                Severity.WARNING, Code.CPUFREQ_GOVERNOR, f"governor {text} ({driver})",
                advice="cpupower frequency-set -g performance (or echo performance > "
                "/sys/devices/system/cpu/cpuN/cpufreq/scaling_governor)",
                facts=facts)
        if boost_on:
            return self.problem(
                Severity.INFO, Code.CPUFREQ_BOOST, f"governor {text}; boost/turbo on",
                advice="echo 0 > /sys/devices/system/cpu/cpufreq/boost (intel_pstate: "
                "echo 1 > /sys/devices/system/cpu/intel_pstate/no_turbo)",
                facts=facts)
        return self.ok(f"governor {text}", facts)


_PARAVIRT = ("kvm-clock", "xen", "hyperv_clocksource_tsc_page", "hyperv_clocksource_msr")
_SLOW = ("hpet", "acpi_pm", "pit", "jiffies", "refined-jiffies")


class ClocksourceCheck(Check):
    """Every timestamp and timer reads the clocksource: the TSC/arch counter costs tens of ns
    from user space, HPET or ACPI PM timer reads cost about a microsecond."""

    id = "clocksource"
    title = "Clocksource and TSC stability"

    def run(self, ctx: Context) -> Finding:
        s = ctx.sys
        base = "sys/devices/system/clocksource/clocksource0"
        cur = s.read(f"{base}/current_clocksource")
        avail = (s.read(f"{base}/available_clocksource") or "").split()
        flags = ctx.flags
        tsc_flags = sorted(
            f
            for f in ("constant_tsc", "nonstop_tsc", "tsc_known_freq", "tsc_reliable")
            if f in flags
        )
        facts = {
            "current": cur,
            "available": avail,
            "tsc_flags": tsc_flags,
            "cmdline_tsc": ctx.cmdline.get("tsc"),
            "cmdline_clocksource": ctx.cmdline.get("clocksource"),
        }
        if cur is None:
            return self.unknown("current_clocksource not readable", facts)
        x86 = "tsc" in flags
        advice = (
            "if the TSC is in fact reliable (constant_tsc, nonstop_tsc, one socket) "
            "boot with tsc=reliable, or clocksource=tsc; look at "
            "dmesg | grep -i clocksource for why it was dropped"
        )
        if cur in _SLOW:
            code = Code.TSC_UNSTABLE if x86 and "tsc" not in avail else Code.CLOCKSOURCE_SLOW
            note = " (tsc not available: marked unstable?)" if code is Code.TSC_UNSTABLE else ""
            return self.problem(
                Severity.WARNING, code, f"clocksource {cur}{note}",
                advice=advice, facts=facts)
        if cur == "tsc" and not {"constant_tsc", "nonstop_tsc"} <= set(tsc_flags):
            return self.problem(
                Severity.WARNING, Code.TSC_UNSTABLE,
                f"clocksource tsc without constant_tsc/nonstop_tsc "
                f"(flags: {', '.join(tsc_flags) or 'none'})",
                advice="keep deep C-states and frequency changes off, or use a platform with "
                "an invariant TSC",
                facts=facts)
        if cur in _PARAVIRT:
            return self.problem(
                Severity.INFO, Code.CLOCKSOURCE_SLOW,
                f"paravirtual clocksource {cur} (available: {' '.join(avail)})",
                advice="prefer tsc when the host exposes a stable one (clocksource=tsc)",
                facts=facts)
        return self.ok(
            f"clocksource {cur}" + (f" ({', '.join(tsc_flags)})" if cur == "tsc" else ""), facts)


def _steal_percent(ctx: Context) -> float | None:
    text = ctx.sys.read("proc/stat")
    if not text:
        return None
    for line in text.splitlines():
        if line.startswith("cpu "):
            values = [int(v) for v in line.split()[1:]]
            total = sum(values[:8])
            if total and len(values) > 7:
                return round(100.0 * values[7] / total, 3)
    return None


class VirtualizationCheck(Check):
    """In a virtual machine the host can deschedule a vCPU for milliseconds; the guest cannot
    prevent it, so the maximum latency is set by the host."""

    id = "virt"
    title = "Virtualization and steal time"

    def run(self, ctx: Context) -> Finding:
        s = ctx.sys
        hv_flag = "hypervisor" in ctx.flags
        hv_type = s.read("sys/hypervisor/type")
        product = s.read("sys/class/dmi/id/product_name")
        vendor = s.read("sys/class/dmi/id/sys_vendor")
        steal = _steal_percent(ctx)
        dmi_vm = any(
            k in f"{product} {vendor}".lower()
            for k in (
                "kvm",
                "qemu",
                "vmware",
                "virtualbox",
                "hvm domu",
                "virtual machine",
                "firecracker",
                "cloud hypervisor",
                "bochs",
            )
        )
        facts = {
            "hypervisor_flag": hv_flag,
            "sys_hypervisor_type": hv_type,
            "dmi_product": product,
            "dmi_vendor": vendor,
            "steal_percent": steal,
        }
        if not (hv_flag or hv_type or dmi_vm):
            if not ctx.flags and product is None and not s.exists("proc/cpuinfo"):
                return self.unknown("cpuinfo and DMI not readable", facts)
            return self.ok("bare metal (no hypervisor detected)", facts)
        what = hv_type or product or "hypervisor flag in cpuinfo"
        codes: tuple[Code, ...] = (Code.VIRTUALIZED,)
        if steal:
            codes += (Code.STEAL_TIME,)
        return self.finding(
            Severity.WARNING,
            f"virtual machine ({what}); steal time "
            f"{'n/a' if steal is None else f'{steal}%'} since boot",
            advice="take final numbers on bare metal; in a VM pin each vCPU to an isolated host "
            "CPU, run the vCPU threads SCHED_FIFO on a PREEMPT_RT host, and compare p99/"
            "p99.9 rather than max",
            facts=facts,
            codes=codes,
        )


class MitigationsCheck(Check):
    """Mitigations add work to every kernel entry/exit and context switch (retpolines, IBRS,
    buffer clearing, flushes), which adds to wake-up latency."""

    id = "mitigations"
    title = "CPU vulnerability mitigations"

    def run(self, ctx: Context) -> Finding:
        s = ctx.sys
        base = f"{CPU}/vulnerabilities"
        entries = {n: s.read(f"{base}/{n}") or "" for n in s.listdir(base)}
        cmd = ctx.cmdline.get("mitigations")
        mitigated = sorted(n for n, v in entries.items() if v.startswith("Mitigation"))
        vulnerable = sorted(n for n, v in entries.items() if v.startswith("Vulnerable"))
        facts = {
            "cmdline_mitigations": cmd,
            "mitigated": mitigated,
            "vulnerable": vulnerable,
            "status": entries,
        }
        if not entries:
            return self.unknown("no sys/devices/system/cpu/vulnerabilities", facts)
        summary = (
            f"{len(mitigated)} mitigated ({', '.join(mitigated) or '-'}), "
            f"{len(vulnerable)} vulnerable; cmdline mitigations={cmd or '(default)'}"
        )
        if mitigated:
            return self.problem(
                Severity.INFO, Code.MITIGATIONS, summary,
                advice="mitigations=off on the kernel command line removes their cost but "
                "trades away security: only on a machine that runs trusted code",
                facts=facts)
        return self.ok(summary, facts)


class NumaCheck(Check):
    """Automatic NUMA balancing unmaps pages to sample accesses, so a real-time task takes page
    faults; remote-node memory is slower."""

    id = "numa"
    title = "NUMA nodes and automatic NUMA balancing"
    per_cpu = True

    def run(self, ctx: Context) -> Finding:
        s = ctx.sys
        nodes = s.cpulist("sys/devices/system/node/online")
        balancing = s.read_int("proc/sys/kernel/numa_balancing")
        cpu_nodes = {}
        for cpu in ctx.cpus:
            for name in s.listdir(f"{CPU}/cpu{cpu}"):
                if name.startswith("node") and name[4:].isdigit():
                    cpu_nodes[str(cpu)] = int(name[4:])
        facts = {"nodes": nodes, "numa_balancing": balancing, "cpu_node": cpu_nodes}
        if nodes is None and balancing is None:
            return self.unknown("no NUMA information", facts)
        summary = f"{len(nodes or [0])} node(s); numa_balancing={balancing}"
        if balancing:
            return self.problem(
                Severity.WARNING, Code.NUMA_BALANCING, summary,
                advice="sysctl kernel.numa_balancing=0 (boot: numa_balancing=disable)", facts=facts)
        return self.ok(summary, facts)
