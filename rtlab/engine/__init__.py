# SPDX-License-Identifier: MIT
"""Spawning rtlab-probe (locally now, over SSH later) and reading its JSON Lines."""

from rtlab.engine.jsonl import (
    SUPPORTED_SCHEMAS,
    StreamCollector,
    UnknownSchemaError,
    parse_line,
)
from rtlab.engine.locate import find_probe
from rtlab.engine.transport import EngineProcess, LocalTransport, Transport

__all__ = [
    "SUPPORTED_SCHEMAS",
    "EngineProcess",
    "LocalTransport",
    "StreamCollector",
    "Transport",
    "UnknownSchemaError",
    "find_probe",
    "parse_line",
]
