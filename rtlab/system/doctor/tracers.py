# SPDX-License-Identifier: MIT
"""Which of the kernel's tracers this machine or board has, and what each enables in
rtlab: timerlat the kernel's own split of timer latency, osnoise/hwlat the hardware
noise probe; without them the ordinary tracepoints of `--trace` still explain spikes."""

from __future__ import annotations

from rtlab.system.doctor.check import Check, Code, Context, Finding, Severity

_TRACEFS = ("sys/kernel/tracing", "sys/kernel/debug/tracing")

# what rtlab does with each tracer it uses
USES: dict[str, str] = {
    "timerlat": "the kernel's split of timer latency (IRQ, thread, return to user): "
                "--trace-tracer timerlat",
    "osnoise": "hardware noise with interrupts off (OSNOISE_IRQ_DISABLE): --probe hwnoise",
    "hwlat": "hardware/firmware noise with interrupts off: --probe hwnoise",
}


def read_tracers(ctx: Context) -> tuple[str | None, list[str], bool]:
    """(the tracefs directory found, its available tracers, whether osnoise can run with
    interrupts off); (None, [], False) without a readable tracefs."""
    for rel in _TRACEFS:
        text = ctx.sys.read(f"{rel}/available_tracers")
        if text is not None:
            options = ctx.sys.read(f"{rel}/osnoise/options") or ""
            irq_off = "OSNOISE_IRQ_DISABLE" in options.replace("NO_OSNOISE_IRQ_DISABLE",
                                                               "OSNOISE_IRQ_DISABLE")
            return "/" + rel, text.split(), irq_off
    return None, [], False


class TracersCheck(Check):
    """The kernel's own latency tracers: where they exist rtlab can record the kernel's
    view beside its own (timerlat) and measure what the hardware steals with interrupts
    off (osnoise, hwlat)."""

    id = "tracers"
    title = "Kernel tracers (timerlat, osnoise, hwlat)"

    def run(self, ctx: Context) -> Finding:
        root, tracers, irq_off = read_tracers(ctx)
        facts: dict[str, object] = {"tracefs": root, "available_tracers": tracers,
                                    "osnoise_irq_disable": irq_off}
        if root is None:
            return self.problem(
                Severity.INFO, Code.NO_TRACEFS, "tracefs not readable: no kernel tracer",
                advice="mount it (mount -t tracefs nodev /sys/kernel/tracing) and run as "
                       "root to use --trace, --trace-tracer and --probe hwnoise", facts=facts)
        used = [t for t in USES if t in tracers]
        if not used:
            return self.problem(
                Severity.INFO, Code.NO_LATENCY_TRACERS,
                f"tracers: {' '.join(tracers) or 'none'}; none of timerlat, osnoise, hwlat: "
                "--trace still explains spikes from the ordinary tracepoints",
                advice="for the kernel's own split and --probe hwnoise build the kernel with "
                       "CONFIG_TIMERLAT_TRACER, CONFIG_OSNOISE_TRACER, CONFIG_HWLAT_TRACER",
                facts=facts)
        hw = ("osnoise with interrupts off" if "osnoise" in tracers and irq_off
              else "hwlat" if "hwlat" in tracers else None)
        facts["hwnoise_tracer"] = hw
        parts = [f"{t} -> {USES[t]}" for t in used]
        summary = (f"tracers: {' '.join(tracers)}; " + "; ".join(parts)
                   + (f" (hwnoise uses {hw})" if hw else ""))
        return self.finding(Severity.INFO, summary, facts=facts)
