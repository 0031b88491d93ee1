# SPDX-License-Identifier: MIT
"""Tests of the Python package rtlab.engine (builds, transports, sessions, JSON Lines);
the C binary rtlab-probe itself is tested end to end in tests/rtlab_probe/."""
