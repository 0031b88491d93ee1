# SPDX-License-Identifier: MIT
"""Exit codes of `rtlab`, mirroring the engine's (docs/engine-output.md)."""

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    ERROR = 1
    USAGE = 2
    THRESHOLD = 3  # threshold / SLO exceeded
    SKIPPED = 4  # missing privilege or kernel feature
    INTERRUPTED = 130  # SIGINT / SIGTERM
