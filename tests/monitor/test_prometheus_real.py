# SPDX-License-Identifier: MIT
"""The shipped Prometheus files against Prometheus itself: `promtool` checks the example
configuration and alert rules, unit-tests what the rules fire on, and a real Prometheus
server scrapes a real monitor while a stall of known length hits the measured CPU
between two scrapes: `max_over_time` of the recent maximum, as the docs tell users to
query it, finds the stall."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from tests.support.paths import REPO, SPINNER
from tests.support.waiting import wait_for

PROM_DIR = REPO / "docs" / "prometheus"
CPU = 1

if shutil.which("promtool") is None or shutil.which("prometheus") is None:
    pytest.skip("needs Prometheus (`scripts/setup.sh test` unpacks Debian's prometheus into "
                ".venv)", allow_module_level=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["promtool", *args], capture_output=True, text=True, timeout=120)


def test_the_example_configuration_and_rules_are_valid() -> None:
    r = promtool("check", "config", str(PROM_DIR / "prometheus.yml"))
    assert r.returncode == 0, r.stdout + r.stderr
    r = promtool("check", "rules", str(PROM_DIR / "rtlab-rules.yml"))
    assert r.returncode == 0, r.stdout + r.stderr


def test_the_rules_fire_on_what_they_are_for(tmp_path: Path) -> None:
    # a 250 µs spike inside one minute of 20 µs: the latency alert fires while the spike
    # is within the 5-minute range, and not before it
    tests = tmp_path / "rules_test.yml"
    shutil.copy(PROM_DIR / "rtlab-rules.yml", tmp_path / "rtlab-rules.yml")
    series = {"board": "b1", "cpu": "1", "probe": "timer", "instance": "h:9477", "job": "rtlab"}
    lab = ",".join(f'{k}="{v}"' for k, v in series.items())
    tests.write_text(textwrap.dedent(f"""\
        rule_files: [rtlab-rules.yml]
        evaluation_interval: 15s
        tests:
          - interval: 15s
            input_series:
              - series: 'rtlab_latency_recent_max_seconds{{{lab}}}'
                values: '0.00002x8 0.00025 0.00002x40'
              - series: 'rtlab_board_up{{board="b1",instance="h:9477",job="rtlab"}}'
                values: '1x20 0x40'
              - series: 'rtlab_board_gaps_total{{board="b1",instance="h:9477",job="rtlab"}}'
                values: '0x20 1x40'
              - series: 'rtlab_board_reboots_total{{board="b1",instance="h:9477",job="rtlab"}}'
                values: '0x20 1x40'
            alert_rule_test:
              - eval_time: 1m
                alertname: RtlabLatencyAboveBudget
                exp_alerts: []
              - eval_time: 3m
                alertname: RtlabLatencyAboveBudget
                exp_alerts:
                  - exp_labels: {{{", ".join(f"{k}: {v!r}" for k, v in series.items())},
                                  severity: warning}}
                    exp_annotations:
                      summary: 'b1 CPU 1: latency 250us above the 100 µs budget'
              - eval_time: 4m
                alertname: RtlabBoardDown
                exp_alerts: []
              - eval_time: 11m
                alertname: RtlabBoardDown
                exp_alerts:
                  - exp_labels: {{board: b1, instance: 'h:9477', job: rtlab,
                                  severity: critical}}
                    exp_annotations:
                      summary: 'b1 has not been measured for 5 minutes'
              # a gap (and a reboot) is counted when the board is back (at 5 min)
              - eval_time: 4m
                alertname: RtlabBoardGap
                exp_alerts: []
              - eval_time: 6m
                alertname: RtlabBoardGap
                exp_alerts:
                  - exp_labels: {{board: b1, instance: 'h:9477', job: rtlab,
                                  severity: warning}}
                    exp_annotations:
                      summary: 'b1 was not measured for part of the last 15 minutes'
              - eval_time: 4m
                alertname: RtlabBoardRebooted
                exp_alerts: []
              - eval_time: 6m
                alertname: RtlabBoardRebooted
                exp_alerts:
                  - exp_labels: {{board: b1, instance: 'h:9477', job: rtlab,
                                  severity: warning}}
                    exp_annotations:
                      summary: 'b1 rebooted in the last 15 minutes'
        """))
    r = promtool("test", "rules", str(tests))
    assert r.returncode == 0, r.stdout + r.stderr


def query(port: int, expr: str) -> list[dict]:
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=10) as r:
        doc = json.loads(r.read())
    assert doc["status"] == "success", doc
    return doc["data"]["result"]


def test_a_real_prometheus_finds_a_stall_between_its_scrapes(
        require_root: None, probe_bin: str, tmp_path: Path) -> None:
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs two CPUs")
    mport, pport = free_port(), free_port()
    env = dict(os.environ, RTLAB_PROBE=probe_bin, PYTHONPATH=str(REPO),
               XDG_DATA_HOME=str(tmp_path / "xdg"))
    mon = subprocess.Popen(
        [sys.executable, "-m", "rtlab", "monitor", "--cpus", str(CPU), "--listen",
         f"127.0.0.1:{mport}", "--state-dir", str(tmp_path / "state"), "--store",
         str(tmp_path / "s.db"), "--quiet"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        start_new_session=True)
    # the shipped configuration's scrape job, pointed at this monitor, scraped every 5 s
    cfg = tmp_path / "prometheus.yml"
    cfg.write_text(textwrap.dedent(f"""\
        global: {{scrape_interval: 5s, evaluation_interval: 5s}}
        scrape_configs:
          - job_name: rtlab
            metrics_path: /metrics
            static_configs: [{{targets: ['127.0.0.1:{mport}']}}]
        """))
    prom = subprocess.Popen(
        ["prometheus", f"--config.file={cfg}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
         f"--web.listen-address=127.0.0.1:{pport}", "--log.level=warn"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        sel = f'{{job="rtlab",board="local",cpu="{CPU}"}}'
        wait_for(lambda: query(pport, f"rtlab_samples_total{sel} > 1000"), 90,
                 "Prometheus to scrape samples", poll=0.5, ignore=(OSError,))
        assert query(pport, 'up{job="rtlab"}')[0]["value"][1] == "1"
        # 40 ms at SCHED_FIFO 99 on the measured CPU (the monitor's thread runs at 80),
        # right after a scrape: over before the next one
        time.sleep(0.5)
        subprocess.run([sys.executable, str(SPINNER), str(CPU), "99", "40000", "1",
                        "0.0001"], check=True, timeout=30)
        res = wait_for(lambda: query(
            pport, f"max_over_time(rtlab_latency_recent_max_seconds{sel}[5m]) >= 0.037"),
            60, "the stall in max_over_time of the recent maximum", poll=0.5,
            ignore=(OSError,))
        assert float(res[0]["value"][1]) < 1.0  # the stall, not something absurd
        # the running maximum agrees, and missed periods were counted
        assert query(pport, f"rtlab_latency_max_seconds{sel} >= 0.037")
        assert query(pport, f"increase(rtlab_missed_periods_total{sel}[5m]) > 0")
        # every query of the shipped Grafana dashboard, its variables filled in as Grafana
        # would, is valid PromQL and finds this monitor's series
        dash = json.loads((REPO / "docs" / "grafana" / "rtlab-dashboard.json").read_text())
        fill = {"$board": "local", "$cpu": str(CPU), "$__range": "5m",
                "$__rate_interval": "1m", "$__interval": "15s"}
        for panel in dash["panels"]:
            for target in panel.get("targets", []):
                expr = target["expr"]
                for k, v in fill.items():
                    expr = expr.replace(k, v)
                assert query(pport, expr), f"panel {panel['title']!r}: {expr} finds nothing"
        url = (f"http://127.0.0.1:{pport}/api/v1/label/board/values?"
               + urllib.parse.urlencode({"match[]": "rtlab_board_up"}))
        with urllib.request.urlopen(url, timeout=10) as r:  # the $board variable's values
            assert json.loads(r.read())["data"] == ["local"]
    finally:
        for p in (prom, mon):
            p.send_signal(signal.SIGINT)
        for p in (prom, mon):
            try:
                p.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
    assert mon.returncode == 130, mon.stderr.read() if mon.stderr else ""
