# SPDX-License-Identifier: MIT
"""The ledger's HTML section and page (rtlab.report.html_tune), from ledgers of
simulated tunes: every knob is there with its verdict, each statistic's change with its
interval, the recommendation, its costs and the confirmation; hostile text from the
ledger is escaped; the page loads nothing from outside."""

from __future__ import annotations

import copy
import re
from html.parser import HTMLParser
from typing import Any

import pytest

from rtlab.report.html_tune import VERDICT_CLASS, html_section, render_tune_html
from rtlab.tune.design import StatResult
from tests.tune.test_export import CANDIDATES, EFFECTS, simulated_tune

EVIL = "<script>alert('x')</script>&<img src=x onerror=alert(1)>"


@pytest.fixture(scope="module")
def ledger() -> dict[str, Any]:
    led, _ = simulated_tune(EFFECTS, CANDIDATES, skipped={"smt-off": "no SMT siblings"},
                            not_tested=["stat-interval"])
    return led


class _Tags(HTMLParser):
    """Every start tag with its attributes, and the text."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def _parse(html: str) -> _Tags:
    p = _Tags()
    p.feed(html)
    p.close()
    return p


def test_every_knob_and_its_verdict(ledger: dict[str, Any]) -> None:
    html = html_section(ledger)
    text = " ".join(_parse(html).text)
    for row in ledger["knobs"]:
        assert row["knob"] in text
        assert row["verdict"] in text
    verdicts = {r["knob"]: r["verdict"] for r in ledger["knobs"]}
    assert verdicts["watchdogs-off"] == "hurts" and verdicts["smt-off"] == "skipped"
    assert "no SMT siblings" in text and "the budget does not reach it" in text
    # each measured statistic: its change and interval as the ledger has them
    for row in ledger["knobs"]:
        for st in (row.get("stats") or {}).values():
            r = StatResult.from_dict(st)
            if r.ratio is not None:
                assert f"{(r.ratio - 1) * 100:+.1f} %" in text
            if r.ci is not None:
                assert f"[{(r.ci[0] - 1) * 100:+.1f} %, {(r.ci[1] - 1) * 100:+.1f} %]" in text
    rec = ledger["recommended"]
    assert rec["label"] in text
    for cost in rec["costs"]:
        assert cost in text
    assert "isolcpus=managed_irq,domain,3" in text
    conf = ledger["confirmation"]
    assert conf is not None and conf["verdict"] == "helps"
    assert f"confirmed: {conf['verdict']}" in text
    for run in conf["runs"]["baseline"] + conf["runs"]["final"]:
        assert run in text
    for inter in ledger["interactions"]:
        assert inter in text


def test_verdict_colours(ledger: dict[str, Any]) -> None:
    html = html_section(ledger)
    # "cannot tell" is not coloured as "no change"
    assert VERDICT_CLASS["inconclusive"] != VERDICT_CLASS["no effect"]
    tags = _parse(html).tags
    classes = [a.get("class") or "" for _, a in tags]
    assert any("bad" in c for c in classes)  # watchdogs-off hurts
    assert any("ok" in c for c in classes)  # the shield helps


def test_hostile_text_is_escaped(ledger: dict[str, Any]) -> None:
    led = copy.deepcopy(ledger)
    led["target"] = EVIL
    led["tune"] = EVIL
    for row in led["knobs"]:
        row["title"] = EVIL
        row["proposed_by"] = [EVIL]
        if row.get("why"):
            row["why"] = EVIL
        for st in (row.get("stats") or {}).values():
            st["note"] = EVIL + "'\" onmouseover='x"
    led["recommended"]["costs"] = [EVIL]
    led["interactions"] = [EVIL]
    for html in (html_section(led), render_tune_html(led)):
        p = _parse(html)
        assert not [t for t, _ in p.tags if t in ("script", "img")]
        assert not any(k.startswith("on") for _, a in p.tags for k in a)
        assert EVIL in " ".join(p.text) or EVIL in "".join(p.text)
        assert "<script>" not in html


def test_page_is_self_contained(ledger: dict[str, Any]) -> None:
    page = render_tune_html(ledger)
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    assert "<style>" in page
    assert not re.search(r"(src|href)\s*=", page)
    assert "://" not in page
    assert html_section(ledger) in page


def test_nothing_recommended() -> None:
    led, _ = simulated_tune({}, ["governor"], tune_id="tune-inert", target=None)
    text = " ".join(_parse(html_section(led)).text)
    assert "the baseline" in text and "No confirmation" in text
    assert "this machine" in text
