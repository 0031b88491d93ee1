# SPDX-License-Identifier: MIT
"""Where things are, for tests that read files or start scripts."""

from __future__ import annotations

from pathlib import Path

SUPPORT = Path(__file__).resolve().parent
TESTS = SUPPORT.parent
REPO = TESTS.parent
# Recorded peer-tool output (cyclictest, jitterdebugger, oslat, rtla, sockperf): the
# importers', the reports' and the comparisons' test inputs (data/README.md).
DATA = SUPPORT / "data"
# The fake engine (run with this Python; tests/support/fake_probe.py).
FAKE = SUPPORT / "fake_probe.py"
# A SCHED_FIFO spinner that injects a known latency cause on one CPU.
SPINNER = SUPPORT / "spinner.py"
