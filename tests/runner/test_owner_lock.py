# SPDX-License-Identifier: MIT
"""One owner of a system at a time, with real parts: real `rtlab run` processes, the
real engine's applier and lock, real IRQ affinities (the shields here move only IRQs:
cpuset = false, tasks = false, so the other users of this shared machine keep their
CPUs).

- two runs with IRQ-only shields: the second is refused with one line naming the
  first (pid, command line, since when), exit 1, nothing stored; the first completes
  and every IRQ affinity is back as it was;
- `rtlab shield --status` during a run shows the run's shield and who holds it;
- a run killed with its applier (a crash: journal left, owner dead): the next run,
  shielded or not, says "run `rtlab restore`"; `rtlab restore` undoes it exactly;
- a run whose host alone was killed: its applier restores by itself and the next run
  waits for it, never a confusing refusal.

No timing luck: every wait polls for a state (journal written, lock held, process
gone), and the first run lasts long enough for everything that happens during it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from rtlab.results.store import Store
from rtlab.system.applier import open_applier
from rtlab.system.journal_files import read_journal
from rtlab.system.target_lock import LOCK_NAME, TargetBusyError, lock_info, owner_label
from tests.support.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]

LONG_S = 45  # the first run: longer than anything the test does meanwhile

SCENARIO = """\
[scenario]
name = "owner-lock"

[shield]
user = "last"
system = "others"
cpuset = false
tasks = false
irqs = true
default_smp_affinity = true

[[probe]]
name = "measured"
probe = "timer"
cpus = "user"
policy = "fifo"
priority = 99
interval = "1ms"

[[phase]]
name = "only"
duration = "{duration}s"
"""

UNSHIELDED = """\
[scenario]
name = "owner-lock-plain"

[[probe]]
name = "measured"
probe = "timer"
cpus = "0"
policy = "fifo"
priority = 99
interval = "1ms"

[[phase]]
name = "only"
duration = "1s"
"""


def irq_state() -> dict[str, str]:
    """Every IRQ's smp_affinity_list and default_smp_affinity."""
    out = {}
    for d in sorted(Path("/proc/irq").iterdir()):
        f = d / "smp_affinity_list"
        if d.is_dir() and f.exists():
            try:
                out[d.name] = f.read_text().strip()
            except OSError:
                continue
    out["default"] = Path("/proc/irq/default_smp_affinity").read_text().strip()
    return out


def movable_irqs() -> bool:
    """Whether some IRQ may target the last CPU now (else the shield would move none)."""
    last = max(os.sched_getaffinity(0))
    from rtlab.cpulist import parse_cpulist

    return any(k != "default" and last in parse_cpulist(v) for k, v in irq_state().items())


def alive(pid: int) -> bool:
    """Running (a zombie not reaped yet counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


@pytest.fixture
def env(require_root: None, probe_bin: str, store_path: Path) -> dict[str, str]:
    if (os.cpu_count() or 1) < 2 or max(os.sched_getaffinity(0)) == 0:
        pytest.skip("needs two CPUs")
    if not movable_irqs():
        pytest.skip("no IRQ may target the last CPU: an IRQ shield would change nothing")
    return dict(os.environ, RTLAB_PROBE=probe_bin, PYTHONPATH=str(ROOT))


def rtlab(env: dict[str, str], *args: str, timeout: float = 120
          ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rtlab", *args], env=env,
                          capture_output=True, text=True, timeout=timeout)


def start_run(env: dict[str, str], scenario: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "rtlab", "run", str(scenario), "--no-progress", "--no-report"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True)


def journal_dir() -> Path:
    return Path(os.environ["RTLAB_JOURNAL_DIR"])


def run_journal(pid: int) -> Path:
    return journal_dir() / f"run-{pid}.journal"


def shield_applied(pid: int) -> bool:
    """The run measures (its engine writes its raw stream: the shield was applied before
    it started), its journal holds its IRQ moves and it owns the target lock."""
    runs = Path(os.environ["RTLAB_STORE"]).parent / "runs"
    if not runs.is_dir() or not any(p.stat().st_size > 0 for p in runs.glob("*.jsonl")):
        return False
    path = run_journal(pid)
    try:
        info = read_journal(path)
    except FileNotFoundError:
        return False
    holder = lock_info(None, journal_dir() / LOCK_NAME)
    return info.held and holder.held and holder.owner_pid == pid


def require_irq_moves(run: subprocess.Popen[str]) -> None:
    """The run's journal holds IRQ moves; else another user of this machine moved every
    IRQ off the last CPU meanwhile (a test of its own): nothing to compare, skip."""
    info = read_journal(run_journal(run.pid))
    if not any("/proc/irq/" in str(e.get("path", "")) for e in info.entries):
        run.kill()
        run.wait()
        pytest.skip("another process moved the IRQs off the last CPU meanwhile")


def start_shielded(env: dict[str, str], scenario: Path, *, irq_moves: bool = True
                   ) -> tuple[subprocess.Popen[str], int]:
    """Start a long IRQ-shielded run and wait until its shield is applied (and, with
    `irq_moves`, holds IRQ moves): the run and its applier's pid. A run that fails to get
    there is killed (its applier then restores by itself)."""
    run = start_run(env, scenario)
    try:
        wait_for(lambda: shield_applied(run.pid) or run.poll() is not None, 60,
                 "the run's shield")
        assert run.poll() is None, run.communicate()
        if irq_moves:
            require_irq_moves(run)
        applier = read_journal(run_journal(run.pid)).pid or 0
        assert applier and alive(applier)
    except BaseException:
        if run.poll() is None:
            run.kill()
            run.wait()
        raise
    return run, applier


def one_error_line(proc: subprocess.CompletedProcess[str]) -> str:
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    return lines[0]


def stored(store_path: Path) -> list[object]:
    return list(Store.open(str(store_path)).list()) if store_path.exists() else []


def test_second_irq_shielded_run_refused_while_first_completes(
        env: dict[str, str], store_path: Path, tmp_path: Path) -> None:
    before = irq_state()
    long_sc, short_sc = tmp_path / "a.toml", tmp_path / "b.toml"
    long_sc.write_text(SCENARIO.format(duration=LONG_S))
    short_sc.write_text(SCENARIO.format(duration=1))
    first, _ = start_shielded(env, long_sc)
    try:
        during = irq_state()
        assert during != before, "the first run's IRQ shield should be in effect"

        # a second run: refused before it changes anything, one line naming the first
        second = rtlab(env, "run", str(short_sc), "--no-progress", "--no-report")
        assert first.poll() is None, "the first run must still be running"
        assert second.returncode == 1, (second.stdout, second.stderr)
        line = one_error_line(second)
        assert f"in use by rtlab run pid {first.pid}" in line, line
        assert f"`rtlab run {long_sc}" in line, line  # its command line
        assert " since 20" in line, line  # since when (UTC)
        assert "rtlab restore" not in line and "left over" not in line, line
        assert not list(journal_dir().glob("lock-*.journal"))
        assert [p.name for p in journal_dir().glob("*.journal")] == [f"run-{first.pid}.journal"]
        assert irq_state() == during, "the refused run must not have touched the IRQs"
        assert stored(store_path) == [], "a refused run stores nothing"

        # the run's shield as `rtlab shield --status` shows it (read-only)
        st = rtlab(env, "shield", "--status", "--json")
        assert st.returncode == 0, st.stderr
        status = json.loads(st.stdout)
        assert status["applied"] is True
        held_by = status["held_by"]
        assert held_by["owner_pid"] == first.pid and held_by["held"]
        assert held_by["command"].startswith(f"rtlab run {long_sc}")
        assert held_by["since"].startswith("20") and held_by["journal"].endswith(
            f"run-{first.pid}.journal")
        assert status["requested"]["cpus"] == str(max(os.sched_getaffinity(0)))
        assert status["requested"]["irqs"] is True
        text = rtlab(env, "shield", "--status")
        assert text.returncode == 0, text.stderr
        assert f"held by a running rtlab run pid {first.pid}" in text.stdout, text.stdout
        assert "requested: CPU" in text.stdout
        # `rtlab restore` has nothing stale to undo and leaves the run alone
        rs = rtlab(env, "restore")
        assert rs.returncode == 0 and "nothing to restore" in rs.stdout, rs.stdout + rs.stderr
        assert f"pid {first.pid}" in rs.stdout
        assert irq_state() == during
    except BaseException:
        first.kill()
        first.wait()
        raise
    # the first run completes undisturbed, and its IRQs are back exactly
    _out, err = first.communicate(timeout=LONG_S + 120)
    assert first.returncode == 0, err
    rows = stored(store_path)
    assert len(rows) == 1 and rows[0].status == "completed"  # type: ignore[attr-defined]
    assert irq_state() == before
    assert not list(journal_dir().glob("*.journal"))
    assert not lock_info(None, journal_dir() / LOCK_NAME).held


def test_crashed_run_names_rtlab_restore(
        env: dict[str, str], store_path: Path, tmp_path: Path) -> None:
    """Host and applier killed (-9): the journal stays, its owner is dead. Every next
    run says "run `rtlab restore`" (not "cannot pin ... cpuset"), and restore undoes it."""
    before = irq_state()
    sc = tmp_path / "a.toml"
    sc.write_text(SCENARIO.format(duration=LONG_S))
    run, applier = start_shielded(env, sc)
    os.kill(applier, signal.SIGKILL)  # the applier first: nothing restores
    run.kill()
    run.wait()
    wait_for(lambda: not alive(applier), 30, "the applier to be gone")
    assert irq_state() != before, "the crash should have left the IRQ moves"
    info = read_journal(run_journal(run.pid))
    assert info.stale and info.owner and f"pid {run.pid}" in info.owner

    try:
        for scenario in (SCENARIO.format(duration=1), UNSHIELDED):
            sc.write_text(scenario)
            nxt = rtlab(env, "run", str(sc), "--no-progress", "--no-report")
            assert nxt.returncode == 1, (nxt.stdout, nxt.stderr)
            line = one_error_line(nxt)
            assert "run `rtlab restore` first" in line and str(run_journal(run.pid)) in line, line
            assert "cannot pin" not in line
        st = rtlab(env, "shield", "--status", "--json")  # read-only, even now
        assert st.returncode == 0, st.stdout + st.stderr
        assert json.loads(st.stdout)["applied"] is False, st.stdout  # a stale journal: none
        assert stored(store_path) == []
    finally:
        rs = rtlab(env, "restore")
    assert rs.returncode == 0, rs.stdout + rs.stderr
    assert f"session of pid {applier}" in rs.stdout
    assert irq_state() == before
    assert not list(journal_dir().glob("*.journal"))


def test_next_run_waits_for_a_killed_runs_applier(
        env: dict[str, str], store_path: Path, tmp_path: Path) -> None:
    """kill -9 of the host alone: its applier restores by itself, then lets go of the
    lock. Held still (here: stopped), the lock names a dead owner: a taker waits for it
    instead of refusing, and says so when it gives up."""
    before = irq_state()
    sc = tmp_path / "a.toml"
    sc.write_text(SCENARIO.format(duration=LONG_S))
    run, applier = start_shielded(env, sc, irq_moves=False)
    try:
        os.kill(applier, signal.SIGSTOP)  # it cannot restore yet
        run.kill()
        run.wait()

        from rtlab.engine.transport import LocalTransport

        t = LocalTransport(env["RTLAB_PROBE"])
        lock = (str(journal_dir() / LOCK_NAME), owner_label("test"))
        holder = lock_info(None, lock[0])
        assert holder.held and holder.restoring and holder.owner_pid == run.pid
        with pytest.raises(TargetBusyError) as exc:
            open_applier(t, tmp_path / "taker.journal", lock=lock, wait_s=1.0)
        msg = exc.value.message
        assert f"still being restored after rtlab run pid {run.pid} on " in msg, msg
        assert f"applier (pid {applier})" in msg and "rtlab restore" not in msg
        assert not (tmp_path / "taker.journal").exists()
    finally:
        os.kill(applier, signal.SIGCONT)  # now it restores and lets go
        if run.poll() is None:
            run.kill()
            run.wait()
    # the next run waits for it if it is not done yet, then runs
    sc.write_text(SCENARIO.format(duration=1))
    nxt = rtlab(env, "run", str(sc), "--no-progress", "--no-report")
    assert nxt.returncode == 0, nxt.stderr
    wait_for(lambda: not alive(applier), 30, "the killed run's applier to be gone")
    assert irq_state() == before
    assert not list(journal_dir().glob("*.journal"))
