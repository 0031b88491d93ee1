# SPDX-License-Identifier: MIT
"""Loads on a board: started, owned and stopped there by the board's engine.

A board has no Python, often no stress-ng, and no chrt, taskset or pkill, so every
load process on it is started by the static engine (docs/engine.md):

* kind `stress` (and `rt-competitor`) through `rtlab-probe --stdin-lifeline exec --
  CMD ...`: CMD (the same stress-ng command line a local run builds, with the board's
  CPU numbers) leads its own process group there and dies with the exec process;
* kind `builtin` as `rtlab-probe --stdin-lifeline load ...`, the engine's own CPU +
  memory load;
* kind `osadl-mid` as the engine's own load too, its network part sent to a peer (this
  machine or another board): rtlab.loads.osadl_board; which form a load takes on its
  target: rtlab.loads.on_target.

Each prints, first, a JSON line with the group's pid, pgid and start time read on the
board; the group is journaled with the run's recorder (`spawned`: the board's journal,
whose applier restores by itself when rtlab disappears). The local ssh process keeps
the remote stdin open: that is the lifeline. Closing it is the stop (the engine sends
SIGTERM to the group, SIGKILL after 2 s, reaps everything and writes a last record);
the death of rtlab or of the SSH connection closes it too. Nothing here reads this
machine's /proc for a board's process: what is known of the board's processes comes
from the engine's records, or from its `sys snapshot` of the board's /proc.

Tools are checked on the board before anything starts (`command -v` in a fixed
`sh -c` script); a missing stress-ng is one line saying how to install it, and that
`kind = "builtin"` gives the engine's own load instead. It is substituted only where
the scenario's load asks for it (`fallback = "builtin"`, rtlab.loads.fallback).
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rtlab.cpulist import format_cpulist
from rtlab.engine.snapshot import snapshot
from rtlab.errors import MissingToolError, RtlabError, SkippedError, UsageError
from rtlab.exitcodes import ExitCode
from rtlab.loads import proc as procmod
from rtlab.loads.engine_loads import BuiltinLoad, RtCompetitorLoad
from rtlab.loads.lifecycle import Command, Load, LoadError, Proc, SpawnRecorder
from rtlab.loads.stress import StressLoad

if TYPE_CHECKING:
    from rtlab.engine.transport import Transport

# The kinds a board can run; `net` needs network namespaces and sockperf there.
BOARD_KINDS = ("stress", "builtin", "rt-competitor", "osadl-mid")
BOARD_TEMP_DIR = "/tmp"  # stress-ng's --temp-path on a board when temp_dir is not given
START_TIMEOUT_S = 30.0  # for the first record (SSH session set-up on a loaded machine)
VERIFY_TIMEOUT_S = 30.0  # for stress-ng's workers to appear on the board
CHECK_TIMEOUT_S = 60.0
STOP_GRACE_S = 6.0  # the board's SIGTERM..SIGKILL (2 s), its reaping and the link

# tool -> (Debian package, Yocto package, Yocto layer, Buildroot option)
BOARD_PACKAGES: dict[str, tuple[str, str, str, str]] = {
    "stress-ng": ("stress-ng", "stress-ng", "meta-oe", "BR2_PACKAGE_STRESS_NG"),
    "unshare": ("util-linux", "util-linux", "", "BR2_PACKAGE_UTIL_LINUX_UNSHARE"),
    "ip": ("iproute2", "iproute2", "", "BR2_PACKAGE_IPROUTE2"),
}

# Which of the tools named as "$@" are missing: one name a line. Fixed text: the names
# arrive as arguments, nothing is ever pasted into the script.
_CHECK_SCRIPT = 'for t in "$@"; do command -v "$t" >/dev/null 2>&1 || echo "$t"; done'


def board_kind_error(kind: str, target: str) -> str | None:
    """Why a load of this kind cannot run on a board (None: it can)."""
    if kind in BOARD_KINDS:
        return None
    return (f"load kind {kind!r} on {target}: not available on boards yet (it needs "
            "network namespaces and sockperf there); kinds for boards: "
            + ", ".join(BOARD_KINDS))


def board_tools(load: Load) -> list[str]:
    """The programs a load needs on a board besides the engine."""
    if isinstance(load, StressLoad):
        return ["stress-ng", *(["unshare", "ip"] if load.params["sock"] else [])]
    return []


def missing_on_board(transport: Transport, tools: Sequence[str]) -> list[str]:
    """The tools that `command -v` does not find on the target (its login PATH)."""
    if not tools:
        return []
    r = transport.run_command(["sh", "-c", _CHECK_SCRIPT, "rtlab-check", *tools],
                              timeout_s=CHECK_TIMEOUT_S, what="the check of the load tools")
    if r.returncode != 0:
        last = (r.stderr.strip().splitlines() or [f"exit {r.returncode}"])[-1]
        raise RtlabError(f"cannot check the load tools on {transport.target}: {last}")
    return [t for t in r.stdout.split() if t in tools]


def missing_error(target: str, missing: Sequence[str]) -> MissingToolError:
    """One line: what is missing on which board, how to install it, what to use instead."""
    verb = "is" if len(missing) == 1 else "are"
    hints = []
    for tool in missing:
        deb, yocto, layer, br = BOARD_PACKAGES[tool]
        hints.append(f'Debian: apt-get install {deb}; Yocto: IMAGE_INSTALL:append = " {yocto}"'
                     + (f" ({layer})" if layer else "") + f"; Buildroot: {br}=y")
    if "stress-ng" in missing:
        hints.append('or add fallback = "builtin" to the load (the engine\'s own CPU+memory '
                     'load when stress-ng is missing), or use kind = "builtin"')
    return MissingToolError(f"{', '.join(missing)} {verb} not installed on {target}",
                            tuple(missing), hint="; ".join(hints))


@dataclass
class BoardCommand:
    """One process of a load on a board: `argv` is what runs there (recorded as the
    load's command line), `args` the engine's arguments that start it."""

    name: str
    argv: list[str]
    args: list[str]
    workers: bool = False


@dataclass(eq=False)
class RemoteProc(Proc):
    """A load process on a board, seen through the local ssh process that started it.
    `pgid`/`starttime`/`pid` are the board's (from the engine's first record)."""

    transport: Any = None
    board_pid: int = -1
    exec_pid: int | None = None  # the engine process that owns the group (`exec`)
    board_command: list[str] = field(default_factory=list)
    records: list[dict[str, Any]] = field(default_factory=list)
    header: dict[str, Any] | None = None
    end: dict[str, Any] | None = None
    ssh_status: int | None = None

    def __post_init__(self) -> None:
        self._seen = threading.Event()  # the first record, or the end of the output
        self._reader = threading.Thread(target=self._read, name="rtlab-board-load",
                                        daemon=True)
        self._reader.start()

    @property
    def pid(self) -> int:
        return self.board_pid

    @property
    def ssh_pid(self) -> int:
        return int(self.popen.pid)

    def _read(self) -> None:
        stdout = self.popen.stdout
        assert stdout is not None
        try:
            with open(self.stdout_path, "ab") as keep:
                for raw in iter(stdout.readline, b""):
                    keep.write(raw)
                    keep.flush()
                    try:
                        rec = json.loads(raw)
                    except ValueError:
                        continue
                    if not isinstance(rec, dict):
                        continue
                    self.records.append(rec)
                    if rec.get("type") in ("exec", "load") and self.header is None:
                        self.header = rec
                        self._seen.set()
                    elif rec.get("type") in ("exec_done", "load_result"):
                        self.end = rec
        finally:
            self._seen.set()

    def wait_header(self, timeout_s: float) -> dict[str, Any] | None:
        self._seen.wait(timeout_s)
        return self.header

    def poll(self) -> int | None:
        """The process's exit status on the board once the ssh process ended (from the
        engine's last record; else ssh's own status, 255: the connection failed)."""
        if self.returncode is None:
            rc = self.popen.poll()
            if rc is not None:
                self._reader.join(timeout=2.0)
                self.ssh_status = rc
                self.returncode = self._board_status(rc)
                self.stopped_ns = time.time_ns()
        return self.returncode

    def _board_status(self, ssh_rc: int) -> int:
        end = self.end
        if end is not None and end.get("type") == "exec_done":
            if isinstance(end.get("status"), int):
                return int(end["status"])
            if isinstance(end.get("signal"), int):
                return -int(end["signal"])
        if end is not None and isinstance(end.get("exit_code"), int):
            return int(end["exit_code"])
        return ssh_rc

    def close_lifeline(self) -> None:
        """The stop: the engine on the board sees its stdin close."""
        if self.popen.stdin is not None:
            with contextlib.suppress(OSError):
                self.popen.stdin.close()

    def group_workers(self) -> list[procmod.ProcStat]:
        """The other members of the group, read on the board (its /proc, by its engine)."""
        if self.pgid <= 0 or self.transport is None:
            return []
        return [m for m in board_group(self.transport, self.pgid, self.exec_pid)
                if m.pid != self.board_pid and m.pgrp == self.pgid]

    def workers(self) -> list[procmod.ProcStat]:
        """Every other process of this load on the board: the group's members and the
        engine process that owns the group (the shield check counts them as the load's)."""
        if self.pgid <= 0 or self.transport is None:
            return []
        return [m for m in board_group(self.transport, self.pgid, self.exec_pid)
                if m.pid != self.board_pid]

    def describe(self) -> dict[str, Any]:
        out = super().describe()
        out.update({"target": getattr(self.transport, "target", None),
                    "board_command": list(self.board_command), "ssh_pid": self.ssh_pid,
                    "ssh_status": self.ssh_status, "end": self.end})
        return out


def board_processes(transport: Transport) -> list[procmod.ProcStat]:
    """Every process on the target (/proc/PID/stat), read there by its engine."""

    out: list[procmod.ProcStat] = []
    for rec in snapshot(transport, ["/proc/[0-9]*/stat"]):
        parts = str(rec.get("path", "")).split("/")
        if rec.get("type") != "file" or len(parts) != 4 or not parts[2].isdigit():
            continue
        try:
            out.append(procmod.parse_stat(int(parts[2]), str(rec.get("text", ""))))
        except (ValueError, IndexError):
            continue
    return out


def board_group(transport: Transport, pgid: int, also: int | None = None
                ) -> list[procmod.ProcStat]:
    """Live members of process group `pgid` on the target (and process `also`)."""
    return [st for st in board_processes(transport)
            if (st.pgrp == pgid or st.pid == also) and st.state != "Z"]


class RemoteLoad(Load):
    """A load of kind stress, builtin or rt-competitor on a board (see the module doc).
    The same object LoadSet drives for local loads: check_tools, start, verify, check,
    signal, gone, collect, describe."""

    stop_grace_s = STOP_GRACE_S

    def __init__(self, inner: Load, transport: Transport):
        super().__init__(inner.params, inner.placement, name=inner.name)
        self.kind = inner.kind
        self.inner = inner
        self.transport = transport
        self.extra.update(inner.extra)
        self.extra["target"] = transport.target

    @property
    def engine(self) -> str:
        """The engine's path on the board (recorded in the command lines)."""
        return str(getattr(self.transport, "engine_path", "rtlab-probe"))

    def check_tools(self) -> None:
        missing = missing_on_board(self.transport, board_tools(self.inner))
        if missing:
            raise missing_error(self.transport.target, missing)

    def join_partition(self, cgroup: str, cpus: frozenset[int]) -> None:
        self.inner.join_partition(cgroup, cpus)
        self.partition = self.inner.partition
        self.extra.update(self.inner.extra)

    def board_commands(self) -> list[BoardCommand]:
        inner = self.inner
        # exec --cpus: the exec process waits beside its load, not on other CPUs
        place = (["--cpus", format_cpulist(self.placement.cpus)]
                 if self.placement.cpus is not None else [])
        # a cgroup v2 partition: the engine joins it first (`--cgroup DIR`), its children too
        into = ["--cgroup", inner.partition[0]] if inner.partition is not None else []
        if isinstance(inner, StressLoad):
            argv = inner.argv(inner.params["temp_dir"] or BOARD_TEMP_DIR)
            return [BoardCommand("stress-ng", argv, [*into, "exec", *place, "--", *argv],
                                 workers=True)]
        if isinstance(inner, BuiltinLoad):
            args = inner.load_args()
            return [BoardCommand("rtlab-probe-load", [self.engine, *into, *args],
                                 [*into, *args], workers=True)]
        if isinstance(inner, RtCompetitorLoad):
            inner.probe = self.engine
            out = []
            for cpus, cgroup in inner.placement_parts():
                # its JSON lines come back on the exec's stderr: CMD's stdout goes there (the
                # engine writes no output file on /proc, so not /proc/self/fd/2)
                argv = inner.argv("-" if inner.params["capture"] else "/dev/null", cpus)
                join = ["--cgroup", cgroup] if cgroup else []
                where = ["--cpus", format_cpulist(cpus)] if cpus is not None else []
                out.append(BoardCommand("rtlab-probe", [self.engine, *join, *argv[1:]],
                                        [*join, "exec", *where, "--", *argv]))
            return out
        raise UsageError(board_kind_error(self.kind, self.transport.target) or
                         f"load kind {self.kind!r} cannot run on {self.transport.target}")

    def commands(self) -> list[Command]:
        return [Command(bc.name, bc.argv, workers=bc.workers) for bc in self.board_commands()]

    # --- lifecycle ---------------------------------------------------------------
    def start(self, recorder: SpawnRecorder, workdir: Path, *, ready_timeout_s: float = 5.0
              ) -> None:
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        timeout = max(ready_timeout_s, START_TIMEOUT_S)
        target = self.transport.target
        for i, bc in enumerate(self.board_commands()):
            p = self._spawn_remote(bc, workdir / f"{i}-{bc.name}.stdout",
                                   workdir / f"{i}-{bc.name}.stderr")
            self.procs.append(p)
            header = p.wait_header(timeout)
            if header is None:
                if p.poll() is not None:
                    p.died_early = True
                    if p.ssh_status == ExitCode.SKIPPED:  # the engine: a tool is missing
                        tail = p.stderr_tail().splitlines()
                        raise SkippedError(f"load {self.name} on {target}: "
                                           + (tail[-1] if tail else "a tool is missing"))
                    raise LoadError(self._death_message(p))
                raise LoadError(f"load {self.name}: {bc.name} on {target} did not start "
                                f"within {timeout:g} s")
            try:
                p.board_pid = int(header["pid"])
                p.pgid = int(header["pgid"])
                p.starttime = int(header["starttime"])
            except (KeyError, TypeError, ValueError) as exc:
                raise LoadError(f"load {self.name}: the engine on {target} wrote a bad "
                                f"`{header.get('type')}` record: {exc}") from exc
            if isinstance(header.get("workers"), list):
                p.workers_seen = len(header["workers"])
            if isinstance(header.get("exec_pid"), int):
                p.exec_pid = int(header["exec_pid"])
            recorder.record_spawn(p.pgid, p.starttime)  # the board's numbers

    def _spawn_remote(self, bc: BoardCommand, out: Path, err: Path) -> RemoteProc:
        args = ["--stdin-lifeline", *bc.args]
        out.write_bytes(b"")
        with open(err, "wb") as fe:
            try:
                # stdin: the lifeline; rtlab's death kills the ssh process, which closes it
                popen = self.transport.start_held(args, stdin=subprocess.PIPE, stderr=fe,
                                                  die_signal=signal.SIGKILL)
            except OSError as exc:
                raise LoadError(f"load {self.name}: cannot start ssh: "
                                f"{exc.strerror or exc}") from exc
        return RemoteProc(command=Command(bc.name, bc.argv, workers=bc.workers), popen=popen,
                          pgid=-1, starttime=-1, started_ns=time.time_ns(), stdout_path=out,
                          stderr_path=err, transport=self.transport,
                          board_command=[self.engine, *args])

    def verify(self, deadline: float) -> None:
        """Every process running on the board; stress-ng with workers in its group there."""
        deadline = max(deadline, time.monotonic() + VERIFY_TIMEOUT_S)
        for p in self.procs:
            while True:
                if p.poll() is not None:
                    p.died_early = True
                    raise LoadError(self._death_message(p))
                if not p.command.workers or p.workers_seen > 0:
                    break
                p.workers_seen = max(p.workers_seen, len(p.group_workers()))
                if p.workers_seen > 0:
                    break
                if time.monotonic() >= deadline:
                    raise LoadError(f"load {self.name}: {p.command.name} (pid {p.pid} on "
                                    f"{self.transport.target}) started no workers",
                                    hint=p.stderr_tail() or None)
                time.sleep(0.2)

    def check(self) -> bool:
        """A process died early when its ssh/engine process ended, or the engine wrote
        its last record (exec_done, load_result), before the stop."""
        for p in self.procs:
            if self.stopping or p.died_early:
                continue
            ended = isinstance(p, RemoteProc) and p.end is not None
            if p.poll() is not None or ended:
                p.died_early = True
        return self.died_early

    def signal(self, sig: int) -> None:
        """SIGTERM: close the lifelines (the board stops the groups itself). SIGKILL: drop
        the ssh processes too (the board still ends the groups; the journal is the last
        resort)."""
        self.stopping = True
        for p in self.procs:
            if isinstance(p, RemoteProc):
                p.close_lifeline()
                if sig == signal.SIGKILL and p.popen.poll() is None:
                    with contextlib.suppress(ProcessLookupError):
                        p.popen.kill()

    def own_pids(self) -> list[int]:
        """Every process of this load on the board, from one read of its /proc."""
        procs = [p for p in self.procs if isinstance(p, RemoteProc) and p.pgid > 0]
        if not procs:
            return []
        live = [st for st in board_processes(self.transport) if st.state != "Z"]
        return [st.pid for st in live for p in procs
                if st.pgrp == p.pgid or st.pid in (p.exec_pid, p.board_pid)]

    def gone(self) -> bool:
        return all(p.poll() is not None for p in self.procs)

    def leftovers(self) -> list[int]:
        return [p.popen.pid for p in self.procs if p.popen.poll() is None]

    def collect(self) -> None:
        inner = self.inner
        if isinstance(inner, BuiltinLoad):
            for p in self.procs:
                if isinstance(p, RemoteProc):
                    inner.take_records(p.records)
        elif isinstance(inner, RtCompetitorLoad) and inner.params["capture"] and self.procs:
            inner.outputs = [p.stderr_path for p in self.procs]
            inner.collect()
        self.extra.update(inner.extra)
        self.extra["target"] = self.transport.target

    def _death_message(self, p: Proc) -> str:
        if isinstance(p, RemoteProc) and p.ssh_status == 255 and p.end is None:
            tail = p.stderr_tail().splitlines()
            return (f"load {self.name}: lost the SSH connection to {self.transport.target}"
                    + (f": {tail[-1]}" if tail else ""))
        return super()._death_message(p).replace(f"(pid {p.pid})",
                                                 f"(pid {p.pid} on {self.transport.target})")
