# SPDX-License-Identifier: MIT
"""Scenarios: the model (phases, probes, loads) and the built-in ones."""

from rtlab.scenario.model import POLICIES, Phase, ProbeSpec, Scenario, quick
from rtlab.scenario.units import format_duration, online_cpus, parse_cpu_list, parse_duration

BUILTIN = {"quick": quick}

__all__ = [
    "BUILTIN",
    "POLICIES",
    "Phase",
    "ProbeSpec",
    "Scenario",
    "format_duration",
    "online_cpus",
    "parse_cpu_list",
    "parse_duration",
    "quick",
]
