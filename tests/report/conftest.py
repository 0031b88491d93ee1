# SPDX-License-Identifier: MIT
"""Report tests: their data directory and helpers (the private store is tests/conftest.py's)."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"
sys.path.insert(0, str(HERE))


