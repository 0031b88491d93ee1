# SPDX-License-Identifier: MIT
"""The README's two commands are what CI runs and what the Makefile does: `make run`
sets up for running only, `make test` for testing, and `.ci/run` is `make test`."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from tests.support.paths import REPO


def readme_commands() -> list[str]:
    text = (REPO / "README.md").read_text()
    block = re.search(r"^## Two commands\n.*?^```sh\n(.*?)^```", text, re.S | re.M)
    assert block, "README.md has no `## Two commands` block"
    return [line.split("#")[0].strip() for line in block.group(1).splitlines()
            if line.strip()]


def test_ci_runs_exactly_the_readme_test_command() -> None:
    assert readme_commands() == ["make run", "make test"]
    lines = [line.strip() for line in (REPO / ".ci" / "run").read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    assert lines[-1] == "make test"


@pytest.mark.skipif(shutil.which("make") is None, reason="GNU make is not installed")
@pytest.mark.parametrize(("target", "mode", "then"), [
    ("run", "run", ".venv/bin/rtlab run"),
    ("test", "test", "./scripts/test.sh"),
])
def test_each_command_sets_up_for_itself(target: str, mode: str, then: str) -> None:
    r = subprocess.run(["make", "-n", "-C", str(REPO), target], capture_output=True,
                       text=True, timeout=60, check=True)
    lines = [line for line in r.stdout.splitlines() if not line.startswith("make")]
    assert lines[0].endswith(f"./scripts/setup.sh {mode}"), lines
    assert then in lines[1], lines
