# SPDX-License-Identifier: MIT
"""The run lifecycle (pre-flight, probes, signals, storing) and importing raw runs."""

from rtlab.runner.importer import import_jsonl
from rtlab.runner.preflight import Privileges, check_privileges
from rtlab.runner.run import Progress, RunOptions, RunOutcome, classify, run_scenario

__all__ = [
    "Privileges",
    "Progress",
    "RunOptions",
    "RunOutcome",
    "check_privileges",
    "classify",
    "import_jsonl",
    "run_scenario",
]
