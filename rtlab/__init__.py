# SPDX-License-Identifier: MIT
"""rtlab: real-time Linux latency lab (host side)."""

__version__ = "0.1.0"
