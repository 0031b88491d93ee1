# SPDX-License-Identifier: MIT
"""Boards over real SSH without a foreign kernel: a network namespace on this machine
with dropbear listening in it (nsboard.py). The emulated boards with their own kernels
are tests/lab."""
