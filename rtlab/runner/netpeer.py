# SPDX-License-Identifier: MIT
"""The far end of a two-ended network probe (one that declares `ProbeInfo.two_ended`,
e.g. `udp`; nothing here names it: a peer is given the probe and how it has two ends,
`ProbeEnds`): where the reflector runs, and where the pinger.

`OtherEnd` is the interface the run uses; these implementations exist:

* `NetnsPeer` (the default: "two boards" on one machine): two private network
  namespaces joined by a veth pair (`rtlab.loads.net.VethPair`), journaled
  before they are created, with the probe's other end (`rtlab-probe udp reflect`)
  started in namespace A
  (pinned, SCHED_FIFO 98, on the pinger's `path`: socket or xdp) and the pinger
  run in namespace B through a `NetnsTransport`. `close()` stops the reflector and
  deletes the namespaces on every exit path; after a `kill -9` of rtlab, `rtlab
  restore` does it from the journal (and the reflector ends by itself: it runs for
  the run's duration plus a margin; an XDP program goes with it).
* `RemotePeer` (`rtlab run --peer ADDR:PORT`): the user started the reflector on
  another machine (`rtlab-probe udp reflect --bind ADDR:PORT --session TOKEN`);
  the pinger runs here, nothing is created.

Hardware timestamps (`timestamps = "hardware"` or `"auto"` in the pinger's
options): before the run, each interface this machine pings through gets the
journaled `hwtstamp` operation (`rtlab.system.nic`), applied by `rtlab-probe sys
apply` in that interface's network namespace and undone by `close()` (or by
`rtlab restore` after a crash). A refusal (the namespace peer's veth pair has no
hardware timestamping) is a clean skip (exit 4) for "hardware" and a note for
"auto" (the probe then uses software stamps). A remote reflector's NIC is its
owner's business (docs/probes/udp.md).

* `BoardPeer` (`rtlab run --target A --reflector B --peer ADDR:PORT`): the reflector
  is started on board B over SSH, bound to ADDR (B's address on the link to A), the
  pinger runs on board A: two boards, one cable, the host only watches.
"""

from __future__ import annotations

import abc
import contextlib
import os
import secrets
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rtlab.engine.board import SshTransport
from rtlab.engine.locate import find_probe
from rtlab.engine.transport import LocalTransport, NetnsTransport, Transport
from rtlab.errors import RtlabError, SkippedError, UsageError
from rtlab.lifeline import die_with_parent
from rtlab.loads.net import DEV_A, DEV_B, VethPair, udp_listening
from rtlab.netaddr import parse_peer
from rtlab.probes.description import TwoEnded
from rtlab.system.applier import SystemSession
from rtlab.system.facts import read_facts
from rtlab.system.journal_files import journal_dir
from rtlab.system.nic import HW_MODES, HwTimestamping, enable_hw_timestamping, route_interface
from rtlab.system.shield_plan import priority_ops
from rtlab.system.target_lock import owner_label

DEFAULT_SUBNET = "198.18.0.4/30"  # beside the `net` load's default 198.18.0.0/30
REFLECT_PRIORITY = 98  # seed: NIC IRQ thread 99, ping-pong 98, background 97
REFLECT_MARGIN_S = 30  # the reflector outlives the run by this much, then ends itself
LISTEN_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class ProbeEnds:
    """The probe measured between two ends, and how it has them (rtlab.probes)."""

    name: str
    ends: TwoEnded

    def other_end_args(self, bind: str, session: str) -> list[str]:
        """The engine's arguments that start the other end, bound to `bind`."""
        return self.ends.other_end_args(self.name, bind, session)


class OtherEnd(abc.ABC):
    """Where the reflector is, and the transport that runs the pinger."""

    session: str
    timestamps: str | None = None  # the pingers' --timestamps (None: the default)

    def __init__(self, of: ProbeEnds) -> None:
        self.of = of
        self.hw: list[HwTimestamping] = []  # what enabling the NICs' timestamping did
        self._hw_sessions: list[Any] = []

    def _enable_hw(self, targets: list[tuple[Transport, str]], journal: Path,
                   advice: str) -> None:
        """Hardware timestamping on each (target, interface) through the system layer,
        one journaled session each (released by `_release_hw`)."""

        if self.timestamps not in HW_MODES:
            return
        journal.mkdir(parents=True, exist_ok=True)
        for i, (transport, ifname) in enumerate(targets):
            s = SystemSession(transport, journal, name=f"{self.of.name}-{os.getpid()}-hwts{i}")
            self._hw_sessions.append(s.__enter__())
            res = enable_hw_timestamping(s, ifname)
            self.hw.append(res)
            if not res.ok and self.timestamps == "hardware":
                raise SkippedError(f'timestamps = "hardware": {res.error}', hint=advice)

    def _release_hw(self) -> None:
        while self._hw_sessions:
            with contextlib.suppress(Exception):
                self._hw_sessions.pop().release()


class RemotePeer(OtherEnd):
    """A reflector the user started elsewhere (`--peer ADDR:PORT`, `session=TOKEN`)."""

    def __init__(self, of: ProbeEnds, peer: str, session: str,
                 transport: Transport | None = None, timestamps: str | None = None,
                 journal_dir: Path | None = None) -> None:
        super().__init__(of)
        parse_peer(peer)
        self.peer, self.session = peer, session
        self._transport = transport or LocalTransport()
        self.timestamps = timestamps
        self._journal_dir = journal_dir

    def start(self, duration_ns: int | None) -> str:
        if self.timestamps in HW_MODES:

            ifname = route_interface(parse_peer(self.peer)[0])
            self._enable_hw([(LocalTransport(), ifname)],
                            self._journal_dir or journal_dir(),
                            f"{ifname} must be a NIC with hardware timestamping; or use "
                            'timestamps = "auto" to fall back to software stamps')
        return self.peer

    def pinger_transport(self) -> Transport:
        return self._transport

    def close(self) -> None:
        self._release_hw()

    def describe(self) -> dict[str, Any]:
        return {"kind": "remote", "peer": self.peer,
                "hw_timestamping": [h.describe() for h in self.hw]}


class NetnsPeer(OtherEnd):
    """Two namespaces joined by a veth pair; the reflector in A, the pinger in B."""

    def __init__(self, of: ProbeEnds, reflector_cpu: int | None, *,
                 subnet: str = DEFAULT_SUBNET,
                 priority: int = REFLECT_PRIORITY, probe: str | None = None,
                 journal_dir: Path | None = None, timestamps: str | None = None,
                 path: str = "socket", xdp_mode: str | None = None) -> None:
        super().__init__(of)
        self.reflector_cpu, self.subnet, self.priority = reflector_cpu, subnet, priority
        self.timestamps = timestamps
        self.path, self.xdp_mode = path, xdp_mode
        self.session = secrets.token_hex(8)
        self.port = 20000 + secrets.randbelow(40000)
        self._probe = probe
        self._journal_dir = journal_dir
        self.pair: Any = None
        self._session: Any = None
        self._proc: subprocess.Popen[bytes] | None = None

    @staticmethod
    def check_available() -> None:
        """SkippedError (exit 4) before anything starts when namespaces cannot be made."""
        if os.geteuid() != 0:
            raise SkippedError("network namespaces need root (run as root, or give a remote "
                               "reflector with --peer ADDR:PORT)")
        from shutil import which

        if which("ip") is None:
            raise SkippedError("`ip` (iproute2) is missing: install iproute2, or use --peer")

    def _probe_path(self) -> str:
        if self._probe is None:

            self._probe = str(find_probe())
        return self._probe

    def start(self, duration_ns: int | None) -> str:

        probe = self._probe_path()
        d = self._journal_dir or journal_dir()
        d.mkdir(parents=True, exist_ok=True)
        self._session = SystemSession(LocalTransport(probe), d,
                                      name=f"{self.of.name}-{os.getpid()}").__enter__()
        self.pair = VethPair.create(self.subnet, self._session)

        self._enable_hw([(NetnsTransport(ns, probe), dev)
                         for ns, dev in ((self.pair.ns_b, DEV_B), (self.pair.ns_a, DEV_A))], d,
                        "the namespace peer is a veth pair, which has no hardware "
                        "timestamping: ping a reflector on another board through a NIC "
                        "that has it (--peer ADDR:PORT)")
        addr = f"{self.pair.addr_a}:{self.port}"
        secs = (duration_ns or 3_600_000_000_000) // 1_000_000_000 + REFLECT_MARGIN_S
        argv = [*self.of.other_end_args(addr, self.session), "--duration", f"{secs}s",
                "--policy", "fifo", "--priority", str(self.priority), "--allow-non-rt"]
        if self.timestamps is not None:  # the reflector stamps as its pingers do
            argv += ["--timestamps", self.timestamps]
        if self.reflector_cpu is not None:
            argv += ["--cpus", str(self.reflector_cpu)]
        if self.path != "socket":
            argv += ["--path", self.path]
            if self.xdp_mode:
                argv += ["--xdp-mode", self.xdp_mode]
        argv = NetnsTransport(self.pair.ns_a, probe).engine_argv(argv)
        self._proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.PIPE, process_group=0,
                                      preexec_fn=die_with_parent(signal.SIGTERM))
        self._session.record_spawn(self._proc.pid)
        deadline = time.monotonic() + LISTEN_TIMEOUT_S
        # bound, and with --path xdp also attached (it binds first, then attaches)
        while not udp_listening(self._proc.pid, self.port) or (
                self.path == "xdp" and self.pair.xdp_prog("a") is None):
            if self._proc.poll() is not None or time.monotonic() > deadline:
                err = self._proc.stderr.read().decode(errors="replace") if (
                    self._proc.poll() is not None and self._proc.stderr) else ""
                line = (err.strip().splitlines() or ["did not bind in time"])[-1]
                raise RtlabError(f"the {self.of.name} reflector did not start: {line}")
            time.sleep(0.02)
        return addr

    def pinger_transport(self) -> Transport:
        if self.pair is None:
            raise RtlabError("the peer is not started")
        return NetnsTransport(self.pair.ns_b, self._probe_path())

    def close(self) -> None:
        p, self._proc = self._proc, None
        if p is not None and p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGTERM)
                p.wait(timeout=3)
            except (OSError, subprocess.TimeoutExpired):
                with contextlib.suppress(OSError):
                    os.killpg(p.pid, signal.SIGKILL)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    p.wait(timeout=3)
        self._release_hw()  # before the namespaces (and their interfaces) go
        if self.pair is not None:
            self.pair.delete()
        s, self._session = self._session, None
        if s is not None:
            # nothing left to undo but the records: closes the journal; a cleanup error
            # never hides the measurement
            with contextlib.suppress(Exception):
                s.release()

    def describe(self) -> dict[str, Any]:
        if self.pair is None:
            return {"kind": "netns"}
        return {"kind": "netns", "namespaces": list(self.pair.namespaces),
                "reflector": f"{self.pair.addr_a}:{self.port}", "pinger": self.pair.addr_b,
                "reflector_cpu": self.reflector_cpu, "reflector_priority": self.priority,
                "hw_timestamping": [h.describe() for h in self.hw],
                "reflector_path": self.path}


class BoardPeer(OtherEnd):
    """The reflector on another board (`--reflector B --peer ADDR:PORT`), started there
    over SSH, the pinger on the run's board: the packets cross the link between the two
    boards (ADDR is B's address on it), never the host.

    B is held for the run like any measured board (its owner lock, a journal there):
    the seed's priorities on B (`thread_priorities`, e.g. the NIC's IRQ thread at FIFO
    99) are journaled there and undone when the run ends, when rtlab dies or when the
    connection drops (B's applier sees its stdin close). The reflector runs with the
    engine's lifeline: it stops when the connection goes, and in any case after the
    run's duration plus a margin.
    """

    def __init__(self, of: ProbeEnds, target: str, peer: str, pinger: Transport, *,
                 engine_dir: str | None = None, cpu: int | None = None,
                 priority: int = REFLECT_PRIORITY, thread_priorities: tuple[Any, ...] = (),
                 irq_affinities: tuple[tuple[str, str], ...] = (),
                 timestamps: str | None = None, path: str = "socket",
                 xdp_mode: str | None = None) -> None:
        super().__init__(of)
        parse_peer(peer)
        self.irq_affinities = irq_affinities  # (IRQ name pattern, CPU list) on B
        if timestamps in HW_MODES:
            raise UsageError("hardware timestamps with --reflector: not available yet "
                             "(enable them on both boards' NICs by hand and use --peer)")
        self.target, self.peer, self._pinger = target, peer, pinger
        self.engine_dir, self.cpu, self.priority = engine_dir, cpu, priority
        self.thread_priorities = thread_priorities
        self.timestamps, self.path, self.xdp_mode = timestamps, path, xdp_mode
        self.session = secrets.token_hex(8)
        self._board: Any = None
        self._owner: Any = None
        self._proc: subprocess.Popen[bytes] | None = None
        self.applied: list[dict[str, Any]] = []
        self.irqs_moved: list[dict[str, Any]] = []

    def start(self, duration_ns: int | None) -> str:

        self._board = SshTransport(self.target, engine_dir=self.engine_dir)
        mine, theirs = machine_identity(self._board), machine_identity(self._pinger)
        if mine is not None and mine == theirs:
            raise UsageError(f"the reflector {self.target} is the board that pings "
                             f"({self._pinger.target}) under another name: give the other "
                             "board of the link")
        self._owner = SystemSession(self._board, journal_dir(self._board),
                                    name=f"{self.of.name}-reflector-{os.getpid()}",
                                    owner=owner_label(f"{self.of.name} reflector")).__enter__()
        if self.thread_priorities or self.irq_affinities:
            facts = read_facts(self._board)
            ops = priority_ops(facts, list(self.thread_priorities))
            answers = self._owner.apply(ops)
            self.applied = [{"tid": o["tid"], "policy": o["policy"], "priority": o["priority"],
                             "ok": bool(a.get("ok")), "error": a.get("error")}
                            for o, a in zip(ops, answers, strict=True)]
            irq_ops = irq_affinity_ops(facts, self.irq_affinities)
            self.irqs_moved = [{"irq": int(o["path"].split("/")[3]), "cpus": o["value"],
                                "ok": bool(a.get("ok")), "error": a.get("error")}
                               for o, a in zip(irq_ops, self._owner.apply(irq_ops),
                                               strict=True)]
        self._spawn(self._board, duration_ns)
        return self.peer

    def _spawn(self, board: Transport, duration_ns: int | None) -> None:
        """The other end (`rtlab-probe udp reflect`) on `board`, held by its lifeline;
        returns once bound."""
        secs = (duration_ns or 3_600_000_000_000) // 1_000_000_000 + REFLECT_MARGIN_S
        args = ["--stdin-lifeline", *self.of.other_end_args(self.peer, self.session),
                "--duration", f"{secs}s", "--policy", "fifo", "--priority",
                str(self.priority), "--allow-non-rt"]
        if self.timestamps is not None:
            args += ["--timestamps", self.timestamps]
        if self.cpu is not None:
            args += ["--cpus", str(self.cpu)]
        if self.path != "socket":
            args += ["--path", self.path] + (["--xdp-mode", self.xdp_mode]
                                             if self.xdp_mode else [])
        self._proc = board.start_held(args, stdin=subprocess.PIPE)  # the lifeline
        # the reflector writes its header once its socket is bound
        line = self._proc.stdout.readline() if self._proc.stdout else b""
        if not line.startswith(b'{"type":"header"'):
            self._proc.wait(timeout=10)
            err = self._proc.stderr.read().decode(errors="replace") if self._proc.stderr else ""
            why = (err.strip().splitlines() or [line.decode(errors="replace").strip()
                                                or "it ended at once"])[-1]
            raise RtlabError(f"the {self.of.name} reflector on {self.target} did not start: "
                             f"{why}")
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        """Read (and drop) the reflector's output so it never blocks on a full pipe."""
        p = self._proc
        if p is not None and p.stdout is not None:
            for _ in iter(p.stdout.readline, b""):
                pass

    def pinger_transport(self) -> Transport:
        return self._pinger

    def close(self) -> None:
        p, self._proc = self._proc, None
        if p is not None:
            with contextlib.suppress(OSError):
                if p.stdin is not None:
                    p.stdin.close()  # the lifeline: the reflector stops
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=5)
        o, self._owner = self._owner, None
        if o is not None:
            with contextlib.suppress(Exception):
                o.release()
        b, self._board = self._board, None
        if b is not None:
            b.close()

    def describe(self) -> dict[str, Any]:
        return {"kind": "board", "reflector": self.peer, "reflector_target": self.target,
                "reflector_cpu": self.cpu, "reflector_priority": self.priority,
                "thread_priorities": self.applied, "irqs_moved": self.irqs_moved,
                "reflector_path": self.path,
                "hw_timestamping": []}


class LoopbackPeer(BoardPeer):
    """No reflector named for a board's two-ended run: the reflector runs on the pinging board
    itself, on another CPU, and the packets go over its loopback. What is measured is the
    board's UDP stack and wake-ups, not its NIC or a cable: the run says so in one line
    (`note`). It is part of the pinging run (that run holds the board; nothing else is
    taken or changed), stopped with it by its lifeline."""

    def __init__(self, of: ProbeEnds, pinger: Transport, cpu: int | None, *,
                 port: int | None = None, priority: int = REFLECT_PRIORITY,
                 path: str = "socket") -> None:
        port = port if port is not None else 40000 + secrets.randbelow(20000)
        super().__init__(of, pinger.target, f"127.0.0.1:{port}", pinger, cpu=cpu,
                         priority=priority, path=path)

    def start(self, duration_ns: int | None) -> str:
        self._spawn(self._pinger, duration_ns)
        return self.peer

    def note(self) -> str:
        where = f"CPU {self.cpu}" if self.cpu is not None else "any CPU"
        return (f"{self.of.name}: no reflector named: the reflector ran on {self.target} "
                f"itself ({where}, FIFO {self.priority}) over loopback: the board's UDP "
                "stack and wake-ups are "
                "measured, not its NIC or a link; name one with --reflector BOARD --peer "
                "ADDR:PORT or a [reflector] table in the scenario")

    def describe(self) -> dict[str, Any]:
        return {**super().describe(), "kind": "loopback", "note": self.note()}


def machine_identity(transport: Transport) -> tuple[str, tuple[str, ...]] | None:
    """What tells one target from another, read there by its engine: its kernel's boot id
    (/proc/sys/kernel/random/boot_id) and its local IPv4 addresses (/proc/net/fib_trie:
    two network namespaces of one kernel, as the test rig's boards, are two ends of a
    link). Two names of one board give the same; None: not readable."""
    from rtlab.engine.snapshot import record_bytes, snapshot

    paths = ["/proc/sys/kernel/random/boot_id", "/proc/net/fib_trie"]
    try:
        recs = {str(r.get("path")): record_bytes(r).decode(errors="replace")
                for r in snapshot(transport, paths, max_file=1 << 20)
                if r.get("type") == "file"}
    except RtlabError:
        return None
    boot = recs.get(paths[0], "").strip()
    if not boot:
        return None
    return boot, tuple(sorted(set(local_addresses(recs.get(paths[1], "")))))


def local_addresses(fib_trie: str) -> list[str]:
    """The addresses of /proc/net/fib_trie's `/32 host LOCAL` entries (this host's own)."""
    out, last = [], ""
    for line in fib_trie.splitlines():
        text = line.strip()
        if text.startswith("|-- "):
            last = text[4:]
        elif text.startswith("/32 host LOCAL") and last:
            out.append(last)
    return out


def irq_affinity_ops(facts: Any, moves: tuple[tuple[str, str], ...]) -> list[dict[str, Any]]:
    """`write` ops of /proc/irq/N/smp_affinity_list for every IRQ whose name (its actions,
    comma-joined) matches a pattern from its start (e.g. the seed's NIC IRQ to a CPU)."""
    import re

    ops: list[dict[str, Any]] = []
    for pattern, cpus in moves:
        rx = re.compile(pattern)
        for irq in facts.irqs:
            if rx.match(irq.name or ""):
                ops.append({"op": "write", "path": f"/proc/irq/{irq.irq}/smp_affinity_list",
                            "value": cpus})
    return ops
