# SPDX-License-Identifier: MIT
"""rtlab monitor: watch boards for days, checkpointed, exported to Prometheus (docs/monitor.md)."""
