# SPDX-License-Identifier: MIT
"""End-to-end tests of the C engine binary `rtlab-probe` (engine/): the real binary run
as a process, its JSON Lines checked against the schema. Its C unit tests are
engine/tests/; the Python package rtlab.engine is tested in tests/engine/."""
