# SPDX-License-Identifier: MIT
"""Helpers shared by the tests of every layer (tests/README.md): import them as
`tests.support.<module>`; nothing here is collected as a test."""
