# SPDX-License-Identifier: MIT
from __future__ import annotations

import re
from pathlib import Path

import pytest

from rtlab.analysis.slo import parse_slo
from rtlab.report.html import render_html, write_run_report
from tests.support.paths import DATA
from tests.support.synth import synthetic_result

from .browser import chromium, screenshot


def _rich_result():
    r = synthetic_result(windows=120, spike_prob=1e-5, phases=("idle", "load"))
    r.provenance["spikes"] = [{"cpu": 1, "at_ns": 5_000_000_000, "latency_ns": 1_500_000,
                               "summary": "irq/45-eth0 <script>alert(1)</script>"}]
    r.provenance["doctor"] = {
        "summary": {"worst": "critical", "counts": {"ok": 1, "warning": 1, "critical": 1}},
        "top": [{"check": "preempt", "severity": "critical", "title": "Kernel preemption model",
                 "summary": "not PREEMPT_RT", "advice": "boot a PREEMPT_RT kernel"}],
        "findings": [
            {"check": "swap", "severity": "ok", "title": "Swap", "summary": "no swap"},
            {"check": "smt", "severity": "warning", "title": "SMT siblings",
             "summary": "SMT on", "advice": "turn SMT off"},
            {"check": "preempt", "severity": "critical", "title": "Kernel preemption model",
             "summary": "not PREEMPT_RT", "advice": "boot a PREEMPT_RT kernel"}]}
    r.provenance["host"]["shield"] = {
        "requested": {"system": [0], "user": [1], "cpuset": True, "irqs": True},
        "in_effect": {"in_effect": {"ok": False, "cpus": {"1": {"own_tasks": [
                          {"tid": 812, "pid": 812, "what": "rtlab runner"},
                          {"tid": 813, "pid": 812, "what": "rtlab runner"}]}}},
                      "problems": ["CPU 1: IRQ 36 may be delivered there"],
                      "refused": [{"error": "cannot write /proc/irq/36/smp_affinity_list"}],
                      "plan": {"backend": "v1", "tasks_moved": 56, "kthreads_moved": 40,
                               "irqs_planned": [24, 25]}},
        "phase_checks": [
            {"phase": "idle", "ok": False, "problems": ["CPU 1: IRQ 36 may be delivered there"],
             "new_tasks": [], "new_tasks_total": 0, "irqs_fired": {"1": {"36": 12, "24": 400}}},
            {"phase": "load", "ok": False, "problems": ["CPU 1: 1 user task(s)"],
             "new_tasks": [{"tid": 4242, "pid": 4242, "comm": "sleep", "cpu": 1}],
             "new_tasks_total": 1, "irqs_fired": {}}],
        "released": {"restored": 117, "failed": 0}}
    r.system.update(preempt="none", preempt_live_error="debugfs not mounted",
                    preempt_source="kernel config default: /proc/config.gz "
                                   "(CONFIG_PREEMPT_NONE=y)")
    r.phases[1].spikes = [{"cpu": 0, "at_ns": 2_000_000_000, "latency_ns": 900_000,
                           "class": "irq", "summary": "irq/9-acpi ran 0.8 ms"}]
    r.phases[1].spike_summary = {"threshold_ns": 100_000, "spikes": 1, "attributed": 1,
                                 "top_causes": {"irq/9-acpi": 1}}
    r.provenance["loads"] = [{"kind": "stress-ng", "argv": ["stress-ng", "--cpu", "2"]}]
    return r


def test_self_contained_and_complete() -> None:
    text = render_html([_rich_result()], slo=parse_slo("max < 50us"))
    assert "<script" not in text.replace("&lt;script", "")  # no JS at all, content escaped
    assert not re.search(r"(src|href)\s*=\s*['\"]?(https?:|//)", text)
    assert "<link" not in text and "@import" not in text
    for needle in ("How to read this report", "Histograms per CPU", "Complementary CDF",
                   "Maxima over time", "Worst-case statistics", "Spike attributions",
                   "turn SMT off", "stress-ng", "in_effect", "phase idle", "phase load",
                   "SLO VIOLATED", "quiet isolcpus=1", "irq/9-acpi ran 0.8 ms",
                   "spikes &gt; 100 µs: 1",
                   # provenance a reader can read: CPU lists, doctor counts, shield in words
                   "0-1 / 1 / none", "1 critical, 1 warning, 1 ok (worst: critical)",
                   "measured (shielded) CPUs", "not completely", "IRQ 36 may be delivered",
                   "117 change(s) undone", "ok: Swap",
                   "own processes there (not leaks)", "CPU 1: rtlab runner [pid 812]<",
                   # the shield checked again after each phase, the busiest IRQ first
                   "checked again after phase idle", "no task new since the start",
                   "CPU 1: IRQ 24 ×400, IRQ 36 ×12",
                   "NEW tasks that may run on shielded CPUs: sleep[4242] (CPU 1)",
                   # where the preemption model was read
                   "none (kernel config default: /proc/config.gz (CONFIG_PREEMPT_NONE=y); "
                   "live mode unreadable: debugfs not mounted)",
                   # the doctor's top finding under the verdict
                   "what may explain these numbers", "boot a PREEMPT_RT kernel",
                   # extreme-value estimate with its uncertainty
                   "95 % interval", "bootstrap resamples"):
        assert needle in text, needle
    for python_repr in ("[0, 1]", "None /", "True<", "{&quot;worst&quot;"):
        assert python_repr not in text, python_repr
    assert text.count("<svg") >= 8


def test_several_runs_are_compared(tmp_path: Path) -> None:
    a = synthetic_result("aaaa0001", windows=60)
    b = synthetic_result("aaaa0002", windows=60, seed=3, median_ns=15_000, release="6.6")
    path = write_run_report([a, b], tmp_path / "r.html")
    assert path is not None
    text = path.read_text()
    assert "Comparison" in text and "aaaa0002</b> vs <b>aaaa0001" in text
    assert "histograms, configurations overlaid" in text and "median window max" in text


@pytest.mark.slow
@pytest.mark.skipif(chromium() is None, reason="chromium not installed (apt-get install chromium)")
def test_renders_in_headless_chromium(tmp_path: Path) -> None:
    from PIL import Image

    html = write_run_report([_rich_result()], tmp_path / "report.html",
                            slo=parse_slo("p99 < 1ms"))
    png = tmp_path / "shot.png"
    stderr = screenshot(html, png)
    assert png.exists(), stderr[-2000:]
    assert not re.search(r"Uncaught|CONSOLE\(\d+\)|console\.(error|warn)", stderr), stderr[-2000:]
    img = Image.open(png).convert("L")
    hist = img.histogram()
    dark = sum(hist[:128]) / (img.width * img.height)
    assert 0.005 < dark < 0.5  # text and plots drawn, not a blank or black page
    colors = Image.open(png).convert("RGB").getcolors(1 << 20) or []
    assert len(colors) > 50  # plots in colour, not just text


def test_imported_run_without_windows_renders() -> None:
    from rtlab.results.importers import import_file

    data = DATA
    r = import_file(data / "cyclictest.json", "cyclictest-json", "cccc0001")
    text = render_html([r])
    assert "no window maxima recorded" in text and "cyclictest" in text


def test_verdict_names_the_phase_of_the_worst_value() -> None:
    from rtlab.report.terminal import verdict

    r = synthetic_result(windows=10, phases=("idle", "load"))
    worst = r.phases[1].channels[1]
    worst.hist.add(5_000_000)  # one more sample, the worst of the run
    worst.samples, worst.sum_ns, worst.max_ns = (worst.samples + 1, worst.sum_ns + 5_000_000,
                                                 5_000_000)
    assert " on CPU1 in phase load at " in verdict(r)
    assert "in phase" not in verdict(synthetic_result(windows=10))
