# SPDX-License-Identifier: MIT
"""The run lifecycle (pre-flight, shield, loads, phases, signals, storing) and importing
raw runs."""

from rtlab.runner.control import RunControl
from rtlab.runner.importer import import_jsonl
from rtlab.runner.outcome import classify
from rtlab.runner.preflight import Privileges, check_privileges
from rtlab.runner.run import new_comparison_id, run_scenario, run_variants
from rtlab.runner.run_options import Progress, RunOptions, RunOutcome

__all__ = [
    "Privileges",
    "Progress",
    "RunControl",
    "RunOptions",
    "RunOutcome",
    "check_privileges",
    "classify",
    "import_jsonl",
    "new_comparison_id",
    "run_scenario",
    "run_variants",
]
