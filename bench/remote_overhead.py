#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""What a run on a board costs beside the same run locally (root).

The board is tests/netns_boards/nsboard.py's namespace board: dropbear listening in a
network namespace on this machine, reached with the OpenSSH client through an
ssh_config file ($RTLAB_SSH_CONFIG), like the board tests. It shares this
machine's kernel and CPUs, so what is measured is the SSH path (connection,
engine provisioning, streaming), not a slower board.

1. Set-up overhead. `rtlab run --probe timer --cpus 0 --duration 2s --no-report
   --no-progress` locally and with `--target BOARD`, in interleaved rounds (the
   order flips every round), each run with its own store in a temporary
   directory. Wall time of the whole command, time.monotonic() just before the
   start and just after it is reaped. The engine is on the board before the
   rounds: a first remote run into an empty engine directory copies it there
   (reported as the cold run), then the rounds measure the warm case. Each round
   also times a bare `ssh BOARD true` (one SSH connection) for scale.

2. Streaming cost on the board. The timer probe at 1 kHz on every online CPU
   (`--interval 1ms`, default 20 s) locally and on the board, interleaved. While
   it runs, every `--poll` seconds this script reads the CPU time of the board's
   processes, found by the namespace (`ip netns pids NS`, not by name): the
   dropbear processes carrying the connection, the engine's `sys apply`
   (journal/lifeline holder), and the engine's threads, told apart by their
   scheduling policy (/proc/PID/task/TID/stat field 41: the measuring threads
   are SCHED_FIFO; the others are SCHED_OTHER and all carry the same name, so
   the reporter is the SCHED_OTHER thread created after the measuring threads,
   the lifeline thread the one created before them). Locally the engine is found
   among the descendants of the `rtlab` process. CPU time is the scheduler's
   exact runtime (/proc/.../schedstat, ns) beside utime+stime (clock ticks), both
   summed over the window in which the engine process was seen, as a % of one
   CPU over that window. Streamed bytes per second: size of the raw JSON Lines
   file rtlab stored / the run's duration.

Usage (as root, after `make setup`):
    .venv/bin/python bench/remote_overhead.py --rounds 5 --stream-rounds 3 --stream-duration 20
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))

from benchlib import default_probe  # noqa: E402

from tests.netns_boards.nsboard import NsBoard, available, ns_board  # noqa: E402

TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")
RT_POLICIES = {1, 2, 6}  # SCHED_FIFO, SCHED_RR, SCHED_DEADLINE


# ---------------------------------------------------------------- running rtlab


@dataclass
class Env:
    tmp: Path
    board: NsBoard
    engine_dir: Path

    def environ(self) -> dict[str, str]:
        return {**os.environ, "PYTHONPATH": str(REPO), "RTLAB_PROBE": default_probe(),
                "RTLAB_SSH_CONFIG": str(self.board.ssh_config),
                "RTLAB_ENGINE_DIR": str(self.engine_dir),
                "XDG_DATA_HOME": str(self.tmp / "xdg"), "COLUMNS": "200"}

    def argv(self, where: str, store: Path, extra: list[str]) -> list[str]:
        argv = [sys.executable, "-m", "rtlab", "run", "--probe", "timer", *extra,
                "--no-report", "--no-progress", "--store", str(store)]
        if where == "remote":
            argv += ["--target", self.board.name]
        return argv


_seq = 0


def new_store(tmp: Path, tag: str) -> Path:
    global _seq
    _seq += 1
    d = tmp / f"{_seq:03d}-{tag}"
    d.mkdir(parents=True)
    return d / "store.db"


def check_rc(proc: subprocess.CompletedProcess[str] | subprocess.Popen[str], what: str,
             out: str) -> None:
    if proc.returncode != 0:
        raise SystemExit(f"{what} exited {proc.returncode}:\n{out[-2000:]}")


def timed_run(env: Env, where: str, extra: list[str]) -> float:
    store = new_store(env.tmp, where)
    argv = env.argv(where, store, extra)
    t0 = time.monotonic()
    proc = subprocess.run(argv, env=env.environ(), capture_output=True, text=True,
                          check=False)
    wall = time.monotonic() - t0
    check_rc(proc, f"{where} run", proc.stdout + proc.stderr)
    return wall


def timed_ssh(board: NsBoard) -> float:
    t0 = time.monotonic()
    proc = subprocess.run(board.ssh_argv("true"), capture_output=True, text=True, check=False)
    wall = time.monotonic() - t0
    check_rc(proc, "ssh BOARD true", proc.stderr)
    return wall


# ------------------------------------------------------------- reading /proc


@dataclass
class Task:
    ticks: int  # utime + stime
    run_ns: int  # schedstat: time on a CPU
    policy: int
    comm: str


@dataclass
class Proc:
    argv: list[str]
    tasks: dict[int, Task]


def _read(path: str) -> str:
    with open(path) as f:
        return f.read()


def read_proc(pid: int) -> Proc | None:
    try:
        argv = _read(f"/proc/{pid}/cmdline").split("\0")[:-1]
        tasks: dict[int, Task] = {}
        for name in os.listdir(f"/proc/{pid}/task"):
            base = f"/proc/{pid}/task/{name}"
            try:
                stat = _read(f"{base}/stat")
                sched = _read(f"{base}/schedstat")
            except OSError:
                continue  # the thread ended between listdir and read
            comm = stat[stat.index("(") + 1:stat.rindex(")")]
            rest = stat[stat.rindex(")") + 2:].split()  # rest[0] is field 3 (state)
            tasks[int(name)] = Task(ticks=int(rest[11]) + int(rest[12]),
                                    run_ns=int(sched.split()[0]), policy=int(rest[38]),
                                    comm=comm)
    except (OSError, ValueError):
        return None  # gone (or a zombie without tasks)
    return Proc(argv=argv, tasks=tasks)


def netns_pids(ns: str) -> list[int]:
    out = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True,
                         check=False).stdout
    return [int(p) for p in out.split()]


def descendants(root: int) -> list[int]:
    parent: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            stat = _read(f"/proc/{name}/stat")
        except OSError:
            continue
        parent[int(name)] = int(stat[stat.rindex(")") + 2:].split()[1])
    out: list[int] = []
    todo = [root]
    while todo:
        p = todo.pop()
        kids = [c for c, pp in parent.items() if pp == p]
        out += kids
        todo += kids
    return out


@dataclass
class Sample:
    t: float
    procs: dict[int, Proc]


def sample_while(proc: subprocess.Popen[str], find: Callable[[], list[int]],
                 poll_s: float) -> list[Sample]:
    samples: list[Sample] = []
    while proc.poll() is None:
        t = time.monotonic()
        procs = {p: pr for p in find() if (pr := read_proc(p)) is not None}
        samples.append(Sample(t, procs))
        time.sleep(max(0.0, poll_s - (time.monotonic() - t)))
    return samples


# --------------------------------------------------------------- accounting


def is_engine(argv: list[str]) -> bool:
    return bool(argv) and Path(argv[0]).name.startswith("rtlab-probe")


def is_probe_run(argv: list[str]) -> bool:
    return is_engine(argv) and "timer" in argv and "sys" not in argv


def classify(pid: int, pr: Proc, rt_tids: set[int]) -> dict[int, str]:
    """Role of each thread of one process; rt_tids: the threads of the engine seen at a
    real-time policy at any time (they are SCHED_OTHER again while they exit)."""
    if pr.argv and Path(pr.argv[0]).name == "dropbear":
        return dict.fromkeys(pr.tasks, "dropbear")
    if not is_engine(pr.argv):
        return dict.fromkeys(pr.tasks, "other")
    if not is_probe_run(pr.argv):
        return dict.fromkeys(pr.tasks, "engine sys")
    roles: dict[int, str] = {}
    for tid in pr.tasks:
        if tid == pid:
            roles[tid] = "engine main"
        elif tid in rt_tids:
            roles[tid] = "measuring"
        elif rt_tids and tid > max(rt_tids):
            roles[tid] = "reporter"  # created after the measuring threads
        elif rt_tids and tid < min(rt_tids):
            roles[tid] = "lifeline"  # created before them (--stdin-lifeline)
        else:
            roles[tid] = "engine other"
    return roles


@dataclass
class Cost:
    window_s: float
    run_ns: dict[str, int] = field(default_factory=dict)
    ticks: dict[str, int] = field(default_factory=dict)
    comms: set[str] = field(default_factory=set)
    policies: dict[str, set[int]] = field(default_factory=dict)

    def pct(self, *roles: str, ticks: bool = False) -> float:
        if ticks:
            cpu = sum(self.ticks.get(r, 0) for r in roles) * TICK_S
        else:
            cpu = sum(self.run_ns.get(r, 0) for r in roles) / 1e9
        return 100.0 * cpu / self.window_s


def account(samples: list[Sample]) -> Cost:
    """CPU time per role over the window in which the engine's probe process was seen."""
    seen = [i for i, s in enumerate(samples)
            if any(is_probe_run(pr.argv) for pr in s.procs.values())]
    if len(seen) < 2:
        raise SystemExit("the engine was not seen running (poll faster or run longer)")
    i0, i1 = seen[0], seen[-1]
    cost = Cost(window_s=samples[i1].t - samples[i0].t)
    start: dict[tuple[int, int], Task] = {}
    last: dict[tuple[int, int], tuple[str, Task]] = {}
    for pid, pr in samples[i0].procs.items():
        for tid, k in pr.tasks.items():
            start[pid, tid] = k
    rt_tids: dict[int, set[int]] = {}
    for s in samples[i0:i1 + 1]:
        for pid, pr in s.procs.items():
            rt_tids.setdefault(pid, set()).update(
                t for t, k in pr.tasks.items() if k.policy in RT_POLICIES)
    for s in samples[i0:i1 + 1]:
        for pid, pr in s.procs.items():
            roles = classify(pid, pr, rt_tids[pid])
            for tid, k in pr.tasks.items():
                last[pid, tid] = (roles[tid], k)
                cost.policies.setdefault(roles[tid], set()).add(k.policy)
    for key, (role, k) in last.items():
        z = start.get(key, Task(0, 0, k.policy, k.comm))
        cost.run_ns[role] = cost.run_ns.get(role, 0) + k.run_ns - z.run_ns
        cost.ticks[role] = cost.ticks.get(role, 0) + k.ticks - z.ticks
        if role not in ("dropbear", "other"):
            cost.comms.add(k.comm)
    return cost


NON_MEASURING = ("dropbear", "engine sys", "engine main", "lifeline", "reporter",
                 "engine other", "other")


@dataclass
class StreamRun:
    where: str
    cost: Cost
    wall_s: float
    raw_bytes: int
    duration_s: float
    samples: int
    missed: int

    @property
    def bytes_per_s(self) -> float:
        return self.raw_bytes / self.duration_s


def stream_run(env: Env, where: str, cpus: str, args: argparse.Namespace) -> StreamRun:
    store = new_store(env.tmp, f"stream-{where}")
    argv = env.argv(where, store, ["--cpus", cpus, "--interval", args.interval,
                                   "--duration", f"{args.stream_duration:g}s"])
    out = store.parent / "out.txt"
    with open(out, "w") as f:
        t0 = time.monotonic()
        proc = subprocess.Popen(argv, env=env.environ(), stdout=f, stderr=subprocess.STDOUT,
                                text=True)
        if where == "remote":
            samples = sample_while(proc, lambda: netns_pids(env.board.netns), args.poll)
        else:
            samples = sample_while(proc, lambda: descendants(proc.pid), args.poll)
        wall = time.monotonic() - t0
    check_rc(proc, f"{where} streaming run", out.read_text())
    raws = [p for p in (store.parent / "runs").glob("*.jsonl")]
    if len(raws) != 1:
        raise SystemExit(f"expected one raw file in {store.parent / 'runs'}, found {raws}")
    lines = [json.loads(ln) for ln in raws[0].read_text().splitlines() if ln.strip()]
    result = next((r for r in reversed(lines) if r.get("type") == "result"), None)
    if result is None:
        raise SystemExit(f"no result record in {raws[0]}")
    return StreamRun(where, account(samples), wall, raws[0].stat().st_size,
                     args.stream_duration,
                     sum(ch["samples"] for ch in result["channels"]),
                     sum(ch["missed"] for ch in result["channels"]))


# ------------------------------------------------------------------ output


def mmm(xs: list[float], f: str = "{:.2f}") -> str:
    return (f"{f.format(min(xs))} / {f.format(statistics.median(xs))} / "
            f"{f.format(max(xs))}")


def loadavg() -> str:
    return " ".join(_read("/proc/loadavg").split()[:3])


@contextmanager
def workspace(keep: str | None) -> Iterator[Path]:
    if keep:
        p = Path(keep)
        p.mkdir(parents=True, exist_ok=True)
        yield p
        return
    d = Path(tempfile.mkdtemp(prefix="rtlab-remote-bench-"))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def bench_setup(env: Env, args: argparse.Namespace) -> None:
    extra = ["--cpus", "0", "--duration", f"{args.setup_duration:g}s"]
    print(f"== set-up: rtlab run --probe timer {' '.join(extra)} --no-report --no-progress "
          f"[--target {env.board.name}], {args.rounds} interleaved rounds, "
          "wall time by time.monotonic()")
    before = set(env.engine_dir.glob("rtlab-probe-*")) if env.engine_dir.exists() else set()
    cold = timed_run(env, "remote", extra)
    copied = set(env.engine_dir.glob("rtlab-probe-*")) - before
    print(f"cold remote run (engine copied to an empty directory: "
          f"{'yes' if copied else 'NO, it was there'}): {cold:.2f} s  load {loadavg()}")
    warm_local = timed_run(env, "local", extra)
    print(f"warm-up local run (not counted): {warm_local:.2f} s")
    walls: dict[str, list[float]] = {"local": [], "remote": [], "ssh": []}
    diffs: list[float] = []
    for r in range(args.rounds):
        order = ("local", "remote") if r % 2 == 0 else ("remote", "local")
        engines = set(env.engine_dir.glob("rtlab-probe-*"))
        got = {w: timed_run(env, w, extra) for w in order}
        if set(env.engine_dir.glob("rtlab-probe-*")) != engines:
            print(f"round {r + 1}: the engine was copied again (rebuilt meanwhile?)")
        got["ssh"] = timed_ssh(env.board)
        for w, v in got.items():
            walls[w].append(v)
        diffs.append(got["remote"] - got["local"])
        print(f"round {r + 1} ({order[0]} first): local {got['local']:.2f} s  "
              f"remote {got['remote']:.2f} s  diff {diffs[-1]:+.2f} s  "
              f"ssh BOARD true {got['ssh']:.3f} s  load {loadavg()}", flush=True)
    med_l, med_r = statistics.median(walls["local"]), statistics.median(walls["remote"])
    print("\n| wall time (s) | min / median / max |\n|---|---|")
    print(f"| local | {mmm(walls['local'])} |")
    print(f"| remote (engine on the board) | {mmm(walls['remote'])} |")
    print(f"| remote − local, pair by pair | {mmm(diffs, '{:+.2f}')} |")
    print(f"| `ssh BOARD true` | {mmm(walls['ssh'], '{:.3f}')} |")
    print(f"\nmedian difference remote − local: {statistics.median(diffs):+.2f} s "
          f"(difference of the medians {med_r - med_l:+.2f} s)")
    print(f"cold remote run: {cold:.2f} s = {cold - med_l:+.2f} s over the local median, "
          f"{cold - med_r:+.2f} s over the warm remote median (the copy and first check)")


def bench_stream(env: Env, args: argparse.Namespace) -> None:
    online = sorted(os.sched_getaffinity(0))
    cpus = ",".join(str(c) for c in online)
    print(f"\n== streaming: rtlab run --probe timer --cpus {cpus} --interval {args.interval} "
          f"--duration {args.stream_duration:g}s, {args.stream_rounds} interleaved rounds, "
          f"poll {args.poll:g} s; CPU as % of one CPU over the window the engine was seen "
          "(schedstat runtime; utime+stime in brackets)")
    runs: list[StreamRun] = []
    for r in range(args.stream_rounds):
        order = ("local", "remote") if r % 2 == 0 else ("remote", "local")
        for where in order:
            s = stream_run(env, where, cpus, args)
            runs.append(s)
            c = s.cost
            parts = "  ".join(
                f"{role} {c.pct(role):.3f} ({c.pct(role, ticks=True):.2f})"
                for role in (*NON_MEASURING, "measuring") if role in c.run_ns)
            print(f"round {r + 1} {where:6s} window {c.window_s:5.2f} s  "
                  f"non-measuring total {c.pct(*NON_MEASURING):.3f} %  [{parts}]  "
                  f"{s.bytes_per_s:.0f} B/s  samples {s.samples} missed {s.missed}  "
                  f"wall {s.wall_s:.2f} s  load {loadavg()}",
                  flush=True)
    comms = sorted({c for s in runs for c in s.cost.comms})
    policies: dict[str, set[int]] = {}
    for s in runs:
        for role, ps in s.cost.policies.items():
            policies.setdefault(role, set()).update(ps)
    print("\nthread names seen in the engine processes: " + ", ".join(comms)
          + "; scheduling policies seen by role (0 OTHER, 1 FIFO): "
          + ", ".join(f"{r} {sorted(p)}" for r, p in sorted(policies.items())))

    def col(where: str, *roles: str, ticks: bool = False) -> str:
        xs = [s.cost.pct(*roles, ticks=ticks) for s in runs if s.where == where]
        return mmm(xs, "{:.3f}") if any(r in s.cost.run_ns for s in runs
                                         if s.where == where for r in roles) else "—"

    print("\n| % of one CPU, min / median / max | local | remote (board side) |")
    print("|---|---|---|")
    rows = [("engine reporter thread", ("reporter",)),
            ("engine main + lifeline threads", ("engine main", "lifeline", "engine other")),
            ("engine `sys apply` (journal holder)", ("engine sys",)),
            ("dropbear (SSH server)", ("dropbear",)),
            ("other processes", ("other",)),
            ("**all but the measuring threads**", NON_MEASURING),
            ("the measuring threads (for scale)", ("measuring",))]
    for label, roles in rows:
        print(f"| {label} | {col('local', *roles)} | {col('remote', *roles)} |")
    print(f"| all but the measuring threads, utime+stime | "
          f"{col('local', *NON_MEASURING, ticks=True)} | "
          f"{col('remote', *NON_MEASURING, ticks=True)} |")
    for where in ("local", "remote"):
        bps = [s.bytes_per_s for s in runs if s.where == where]
        print(f"streamed ({where}): {mmm(bps, '{:.0f}')} B/s (raw JSON Lines / "
              f"{args.stream_duration:g} s)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n".join(__doc__.splitlines()[2:]))
    ap.add_argument("--rounds", type=int, default=5, help="set-up rounds (default 5)")
    ap.add_argument("--setup-duration", type=float, default=2.0,
                    help="seconds of each set-up run (default 2)")
    ap.add_argument("--stream-rounds", type=int, default=3,
                    help="streaming rounds (default 3)")
    ap.add_argument("--stream-duration", type=float, default=20.0,
                    help="seconds of each streaming run (default 20)")
    ap.add_argument("--interval", default="1ms", help="timer period of the streaming runs")
    ap.add_argument("--poll", type=float, default=0.2,
                    help="seconds between reads of /proc during a streaming run")
    ap.add_argument("--skip-setup", action="store_true")
    ap.add_argument("--skip-stream", action="store_true")
    ap.add_argument("--keep", metavar="DIR", help="work in DIR and keep it (stores, board)")
    args = ap.parse_args()
    why = available()
    if why:
        print(f"cannot run: {why}", file=sys.stderr)
        return 4
    if not Path(default_probe()).exists():
        print("no rtlab-probe: run `make setup` first", file=sys.stderr)
        return 4
    with workspace(args.keep) as tmp, ns_board(tmp / "board", tag="rb") as board:
        env = Env(tmp=tmp, board=board, engine_dir=tmp / "board-engine")
        print(f"board {board.name}: dropbear in netns {board.netns} at {board.addr}; "
              f"{os.cpu_count()} CPUs; load {loadavg()}")
        if not args.skip_setup:
            bench_setup(env, args)
        if not args.skip_stream:
            if args.skip_setup:  # the engine goes on the board first, outside the figures
                timed_run(env, "remote", ["--cpus", "0", "--duration", "1s"])
            bench_stream(env, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
