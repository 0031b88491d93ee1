# SPDX-License-Identifier: MIT
"""A full run through the runner's API alone (rtlab.runner.job), as `rtlab tune` or a
script drives it: no `rtlab.cli` module is imported, the run is measured by the real
engine, stored, and comes back with its outcome and exit code."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rtlab.results.store import Store
from tests.support.env import subprocess_env

ROOT = Path(__file__).resolve().parents[2]

# run in a fresh interpreter, so that what it imported is only what the runner needs
SCRIPT = r"""
import json, sys
from rtlab.runner.job import RunJob, Watch, run_job
from rtlab.runner.prepare import RunRequest

seen = []
job = RunJob(request=RunRequest(probe="timer", duration="1s", cpus="1", interval="1ms"),
             store=sys.argv[1], command_line=("api-test",))
done = run_job(job, Watch(on_stored=lambda board, outcome, where: seen.append(where),
                          on_event=lambda line: None))
print(json.dumps({
    "cli": sorted(m for m in sys.modules if m == "rtlab.cli" or m.startswith("rtlab.cli.")),
    "runs": [r.run_id for r in done.results],
    "status": [r.status for r in done.results],
    "exit": int(done.exit_code()),
    "stored": seen,
    "display": done.store_display,
    "boards": [b.target for b in done.boards],
}))
"""


def test_full_run_through_the_runner_api(require_root: None, probe_bin: str,
                                         tmp_path: Path) -> None:
    store = tmp_path / "api.db"
    env = subprocess_env({"RTLAB_PROBE": probe_bin, "XDG_DATA_HOME": str(tmp_path / "xdg")})
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(store)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["cli"] == []  # the run needed nothing of the command line's modules
    assert out["boards"] == [None]  # this machine
    assert len(out["runs"]) == 1 and out["status"] == ["completed"]
    assert out["exit"] == 0
    assert out["stored"] == [out["display"]]  # told as it was stored, and where
    s = Store.open(str(store), create=False)
    try:
        result = s.get(out["runs"][0])
    finally:
        s.close()
    assert result.provenance["host"]["command_line"] == ["api-test"]
    assert [ch.cpu for ch in result.phases[0].channels] == [1]
    assert result.phases[0].channels[0].samples > 0


def test_bad_request_is_refused_before_anything_starts(tmp_path: Path) -> None:
    """The runner's own checks: one line, the documented exit code, nothing created."""
    from rtlab.errors import UsageError
    from rtlab.runner.job import RunJob, run_job
    from rtlab.runner.peers import ReflectorRequest
    from rtlab.runner.prepare import RunRequest

    store = tmp_path / "never.db"
    cases = [
        (RunJob(request=RunRequest(probe="timer"), targets=("b1", "b1"), store=str(store)),
         "the same --target is given twice"),
        (RunJob(request=RunRequest(probe="timer"), targets=("b1", "b2"), peer="10.0.0.1:9",
                store=str(store)), "--peer and --reflector go with one --target"),
        (RunJob(request=RunRequest(probe="timer"),
                reflector=ReflectorRequest(cpu=-1), store=str(store)),
         "--reflector-cpu -1: out of range"),
    ]
    for job, words in cases:
        with pytest.raises(UsageError, match=words.replace("(", r"\(")) as info:
            run_job(job)
        assert int(info.value.code) == 2
    assert list(tmp_path.iterdir()) == []
