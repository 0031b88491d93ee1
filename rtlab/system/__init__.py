# SPDX-License-Identifier: MIT
"""System layer: reading facts off a (possibly remote or copied) system, doctor checks,
and planning of the CPU shield."""
