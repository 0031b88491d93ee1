# SPDX-License-Identifier: MIT
"""Reports: the terminal summary, the verdict line and the exporters."""

from rtlab.report.exporters import EXPORTERS, Exporter, get_exporter
from rtlab.report.terminal import build_tables, render, verdict

__all__ = ["EXPORTERS", "Exporter", "build_tables", "get_exporter", "render", "verdict"]
