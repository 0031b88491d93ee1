# SPDX-License-Identifier: MIT
"""The aarch64 board's processor is named (issue 23, part 6): its /proc/cpuinfo has no
"model name", only "CPU implementer 0x41" and "CPU part 0xd03" (qemu -cpu cortex-a53);
the board's engine decodes them into the run's provenance and the doctor's finding
(docs/engine-output.md#cpu-model)."""

from __future__ import annotations

import json
from pathlib import Path

from .boards import Board
from .test_rtlab_on_boards import rtlab, stored


def test_aarch64_board_run_and_doctor_name_the_cortex_a53(arm64_board: Board,
                                                         tmp_path: Path) -> None:
    info = arm64_board.ssh("cat", "/proc/cpuinfo", check=True).stdout
    parts = {line.split(":")[1].strip() for line in info.splitlines()
             if line.split(":")[0].strip() == "CPU part"}
    assert parts == {"0xd03"} and "model name" not in info, info  # what is decoded
    cpus = list(range(arm64_board.cpus))

    proc = rtlab(arm64_board.ssh_config, tmp_path, "run", "--probe", "timer", "--duration",
                 "2s", "--no-report", "--target", arm64_board.alias)
    assert proc.returncode == 0, proc.stderr
    (run,) = stored(tmp_path)
    system = run["provenance"]["engine"]["system"]
    assert system["cpu_model"] == "Cortex-A53"
    assert system["cpu_models"] == [{"cpus": cpus, "model": "Cortex-A53"}]
    # the run's doctor asked the same engine
    found = {f["check"]: f for f in run["provenance"]["doctor"]["findings"]}
    assert found["cpu-model"]["summary"] == "Cortex-A53", found["cpu-model"]

    doc = rtlab(arm64_board.ssh_config, tmp_path, "doctor", "--json", "--target",
                arm64_board.alias, store=False)
    assert doc.returncode == 0, doc.stderr
    f = next(f for f in json.loads(doc.stdout)["findings"] if f["check"] == "cpu-model")
    assert (f["severity"], f["summary"]) == ("ok", "Cortex-A53"), f
    assert f["facts"]["cpu_models"] == [{"cpus": f"0-{cpus[-1]}" if len(cpus) > 1 else "0",
                                         "model": "Cortex-A53"}]
    text = rtlab(arm64_board.ssh_config, tmp_path, "doctor", "--target", arm64_board.alias,
                 store=False)
    assert text.returncode == 0 and "Cortex-A53" in text.stdout, text.stderr
