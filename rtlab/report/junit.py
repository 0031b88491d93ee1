# SPDX-License-Identifier: MIT
"""JUnit XML for CI systems (Jenkins, GitLab, GitHub test reporters).

One `<testsuite>` per run; with an SLO one `<testcase>` per channel per clause
(classname `rtlab.<run>.<phase>.<channel>`, name = the clause), failed ones
carry a `<failure>` with the measured value: type `slo` (violated), `slo-undecided`
(not decided: the run cannot show the clause met or violated; never a pass) or
`invalid` (not checked). Without an SLO, one testcase per
channel checks that the measurement is valid: samples were measured, no period
was missed, the run completed with real-time scheduling in effect, its numbers
are consistent (rtlab.results.validate). An SLO is never "met" on a result that
failed validation (analysis.slo).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence
from typing import TYPE_CHECKING

from rtlab.analysis.slo import evaluate_slo
from rtlab.probes.registry import shape as probe_shape
from rtlab.report.export_base import Exporter
from rtlab.results.validate import first_problem

if TYPE_CHECKING:  # pragma: no cover
    from rtlab.analysis.slo import Slo, SloReport
    from rtlab.results.model import RunResult


def _validity_cases(result: RunResult, suite: ET.Element) -> tuple[int, int]:

    found = first_problem(result)
    invalid = f"numbers failed validation: {found}" if found is not None else None
    tests = failures = 0
    for phase, ch in result.channels():
        tests += 1
        case = ET.SubElement(suite, "testcase", classname=f"rtlab.{result.run_id}.{phase.name}",
                             name=f"{ch.name}: valid measurement", time="0")
        problems = []
        if ch.samples == 0:
            problems.append("no samples")
        if ch.missed:
            problems.append(f"{ch.missed} missed periods")
        if result.status != "completed":
            problems.append(f"run status {result.status}")
        if invalid is not None:
            problems.append(invalid)
        if result.rt_valid is False:
            problems.append("not real-time valid")
        if problems:
            failures += 1
            msg = "; ".join(problems)
            ET.SubElement(case, "failure", message=msg, type="invalid").text = msg
    return tests, failures


# a check not met, by its status: violated, not decided (the data cannot tell; it fails
# the gate all the same), or not checked (numbers that failed validation)
_FAILURE_TYPE = {"violated": "slo", "undecided": "slo-undecided", "invalid": "invalid"}


def junit_xml(results: Sequence[RunResult], slo: Slo | None = None,
              report: SloReport | None = None) -> bytes:
    """JUnit XML of one or several runs, checked against `slo` (or its evaluated `report`)."""

    if slo is not None and report is None:
        report = evaluate_slo(slo, results, shape_of=probe_shape)
    root = ET.Element("testsuites", name="rtlab")
    total = total_fail = 0
    for result in results:
        suite = ET.SubElement(root, "testsuite", name=f"rtlab run {result.run_id}",
                              hostname=str(result.system.get("hostname") or ""))
        if report is None:
            tests, failures = _validity_cases(result, suite)
        else:
            tests = failures = 0
            for o in report.outcomes:
                if o.run_id != result.run_id:
                    continue
                tests += 1
                case = ET.SubElement(suite, "testcase",
                                     classname=f"rtlab.{o.run_id}.{o.phase}.{o.channel}",
                                     name=o.clause.text, time="0")
                if not o.passed:  # violated, not decided or not checked: never a pass
                    failures += 1
                    ET.SubElement(case, "failure", message=o.reason,
                                  type=_FAILURE_TYPE.get(o.status, "slo")).text = o.reason
                else:
                    ET.SubElement(case, "system-out").text = o.reason
        suite.set("tests", str(tests))
        suite.set("failures", str(failures))
        suite.set("errors", "0")
        suite.set("skipped", "0")
        total += tests
        total_fail += failures
    root.set("tests", str(total))
    root.set("failures", str(total_fail))
    ET.indent(root)
    return b'<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="utf-8") + b"\n"


class JunitExporter(Exporter):
    name, extension, media_type = "junit", "xml", "application/xml"

    def __init__(self, slo: Slo | None = None) -> None:
        self.slo = slo

    def serialize(self, result: RunResult) -> bytes:
        return junit_xml([result], self.slo)
