# SPDX-License-Identifier: MIT
"""Scenarios: the model (shield, loads, probes, phases), scenario files (TOML) with their
CPU expressions and matrix, and the built-in ones."""

from rtlab.scenario.builtin import builtins, find
from rtlab.scenario.loader import ScenarioFile, load_file, parse_text
from rtlab.scenario.model import (
    POLICIES,
    LoadSpec,
    Phase,
    ProbeSpec,
    Scenario,
    ShieldSpec,
    quick,
)
from rtlab.scenario.overrides import override_probes, scale_durations
from rtlab.scenario.units import format_duration, online_cpus, parse_cpu_list, parse_duration

BUILTIN = {"quick": quick}  # programmatic single-phase scenario (tests, library users)

__all__ = [
    "BUILTIN",
    "POLICIES",
    "LoadSpec",
    "Phase",
    "ProbeSpec",
    "Scenario",
    "ScenarioFile",
    "ShieldSpec",
    "builtins",
    "find",
    "format_duration",
    "load_file",
    "online_cpus",
    "override_probes",
    "parse_cpu_list",
    "parse_duration",
    "parse_text",
    "quick",
    "scale_durations",
]
