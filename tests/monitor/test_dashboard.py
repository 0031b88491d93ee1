# SPDX-License-Identifier: MIT
"""The Grafana dashboard and the Prometheus examples in docs/ ask only for what the
exporter exports."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from rtlab.monitor.exporter import ScrapeStats, make_registry
from rtlab.monitor.live import RECENT_S, LiveState

DOCS = Path(__file__).resolve().parents[2] / "docs"
DASHBOARD = DOCS / "grafana" / "rtlab-dashboard.json"
PROMETHEUS = DOCS / "prometheus" / "prometheus.yml"
RULES = DOCS / "prometheus" / "rtlab-rules.yml"

# PromQL words that are not metric names
PROMQL_WORDS = {
    "by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless",
    "bool", "offset", "sum", "max", "min", "avg", "count", "topk", "bottomk", "quantile",
    "rate", "irate", "increase", "delta", "max_over_time", "min_over_time",
    "avg_over_time", "histogram_quantile", "label_values", "abs", "clamp_min", "vector",
    "inf", "nan",
}
PROMETHEUS_OWN = {"up"}  # Prometheus' own series for every target
GRAFANA_VARS = {"__interval", "__rate_interval", "__range"}


@pytest.fixture(scope="module")
def exported() -> set[str]:
    """Every sample name one scrape can show (every optional metric present)."""
    live = LiveState()
    now = time.time()
    live.set_board("b", up=True, probe_ok=True, last_seen=now)
    live.update("b", "cpu0", 0, samples=1, missed=1, sum_ns=5000, buckets={1000: 1},
                windows=[(now, 5000)], min_ns=5000, max_ns=5000, now=now)
    stats = ScrapeStats()
    stats.record(0.01)
    text = generate_latest(make_registry(live.view, stats)).decode()
    return {s.name for fam in text_string_to_metric_families(text) for s in fam.samples}


def metric_names(expr: str) -> set[str]:
    """The metric names an expression reads (strings, label matchers, label lists,
    ranges and numbers left out)."""
    e = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    e = re.sub(r"\{[^}]*\}", "", e)
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", e)
    e = re.sub(r"\[[^\]]*\]", "", e)
    e = re.sub(r"\$\{?\w+\}?", "", e)
    e = re.sub(r"\b\d+(\.\d+)?(e-?\d+)?\b", "", e)
    if e.startswith("label_values("):  # a Grafana variable query: its label is no metric
        e = e.rsplit(",", 1)[0]
    return {t for t in re.findall(r"[A-Za-z_:][A-Za-z0-9_:]*", e)
            if t not in PROMQL_WORDS}


def dashboard() -> dict:
    return json.loads(DASHBOARD.read_text())


def expressions(dash: dict) -> list[str]:
    exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
    for v in dash["templating"]["list"]:
        if v["type"] == "query":
            exprs.append(v["definition"])
    return exprs


def test_metric_names_helper():
    assert metric_names('max by (board, cpu) (max_over_time(rtlab_x{board=~"$board"}'
                        "[$__range]))") == {"rtlab_x"}
    assert metric_names("histogram_quantile(0.999, sum by (le) (rate(a_bucket[5m])))") == \
        {"a_bucket"}
    assert metric_names("label_values(rtlab_board_up, board)") == {"rtlab_board_up"}


def test_dashboard_json_model():
    d = dashboard()
    for key in ("title", "uid", "panels", "templating", "time", "schemaVersion", "tags",
                "annotations", "refresh", "editable", "graphTooltip"):
        assert key in d, key
    assert 8 <= len(d["uid"]) <= 40 and isinstance(d["schemaVersion"], int)
    ids = [p["id"] for p in d["panels"]]
    assert len(ids) == len(set(ids))
    for p in d["panels"]:
        pos = p["gridPos"]
        assert set(pos) == {"h", "w", "x", "y"}
        assert pos["x"] >= 0 and pos["x"] + pos["w"] <= 24 and pos["h"] > 0
        assert p["type"] in {"timeseries", "stat", "bargauge", "state-timeline", "table"}
        assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        refs = [t["refId"] for t in p["targets"]]
        assert refs and len(refs) == len(set(refs))
        for t in p["targets"]:
            assert t["datasource"] == p["datasource"]


def test_datasource_is_a_variable_and_every_variable_is_defined():
    d = dashboard()
    defined = {v["name"] for v in d["templating"]["list"]}
    ds = [v for v in d["templating"]["list"] if v["type"] == "datasource"]
    assert [(v["name"], v["query"]) for v in ds] == [("datasource", "prometheus")]
    text = json.dumps(d["panels"]) + json.dumps(d["templating"])
    used = set(re.findall(r"\$\{?(\w+)", text))
    assert used - GRAFANA_VARS <= defined


def test_every_dashboard_expression_names_exported_metrics(exported):
    exprs = expressions(dashboard())
    assert exprs
    for expr in exprs:
        names = metric_names(expr)
        assert names, expr
        assert names <= exported, (expr, names - exported)


def test_dashboard_has_the_panels_a_lab_needs():
    exprs = " ".join(expressions(dashboard()))
    for needed in ("max_over_time(rtlab_latency_recent_max_seconds", "rtlab_latency_max_seconds",
                   "histogram_quantile(0.999", "rtlab_missed_periods_total",
                   "rtlab_board_up", "rtlab_board_gaps_total"):
        assert needed in exprs, needed


def rule_expressions() -> list[str]:
    return re.findall(r"^\s*expr:\s*(.+)$", RULES.read_text(), re.M)


def test_alert_rules_name_exported_metrics(exported):
    exprs = rule_expressions()
    assert len(exprs) >= 5
    for expr in exprs:
        names = metric_names(expr)
        assert names and names <= exported | PROMETHEUS_OWN, (expr, names - exported)


def seconds(text: str) -> float:
    m = re.fullmatch(r"(\d+)(s|m)", text)
    assert m, text
    return int(m.group(1)) * (60 if m.group(2) == "m" else 1)


def test_scrape_interval_well_below_the_recent_window():
    text = PROMETHEUS.read_text()
    intervals = re.findall(r"^\s*scrape_interval:\s*(\S+)", text, re.M)
    assert intervals
    for iv in intervals:
        assert seconds(iv) <= RECENT_S / 2, iv
    assert "rtlab-rules.yml" in text
    assert re.search(r"^\s*- job_name: rtlab$", text, re.M)
    assert re.findall(r"^\s*- [\w.-]+:9477$", text, re.M)
