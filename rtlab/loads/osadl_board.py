# SPDX-License-Identifier: MIT
"""osadl-mid on a board: the engine's own load, its network part sent to a peer.

A board has no stress-ng, sockperf, ip or unshare, so the OSADL mid load runs there as
`rtlab-probe load` (docs/engine.md#the-load-command), in two engine processes, each
leading its own process group on the board, journaled there and stopped through its
stdin lifeline like every board load (rtlab.loads.board):

* memory and file I/O: `load --alloc-bytes A --alloc-period Ps --io 1 --io-bytes B
  --io-dir DIR` (DIR: `temp_dir`, else /tmp);
* the network part: `load --net-to ADDR:PORT --net-kbit N --net-size 1000`, UDP to a
  sink (`load --net-sink ...`) that counts what arrives:
  - `peer = ""` (the default): the sink runs on this machine (its own engine, its own
    process group, dying with rtlab) on a free port of every address, and the board
    sends to the address it sees this machine at (the first field of its
    `$SSH_CONNECTION`);
  - `peer = "TARGET=ADDR:PORT"`: the sink runs on board TARGET, reached over SSH like
    any board (its engine copied there), bound to ADDR:PORT, TARGET's address on the
    link between the two boards; it stops when its SSH connection closes;
  - `peer = "none"`: no network part.

The network part is kept only when the sink received something within NET_CHECK_S of
the sender's start; otherwise (no address, a peer board that cannot be reached, a
sink that cannot bind, a sender that cannot send, nothing arriving: a firewall, a user
network that lets nothing out) it is stopped and left out, the memory and file I/O
run on, and the load's one note says what was left out and why. The description
(`describe()`) says exactly what ran: the label, each engine command line, the engine's
counts (`engine_load`: allocation rounds, files and bytes written; `network`: messages
sent, received at the sink, failed).
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rtlab.engine.locate import find_probe
from rtlab.errors import RtlabError, UsageError
from rtlab.loads import proc as procmod
from rtlab.loads.board import BOARD_TEMP_DIR, START_TIMEOUT_S, BoardCommand, RemoteLoad, RemoteProc
from rtlab.loads.lifecycle import Command, LoadError, Proc, SpawnRecorder
from rtlab.loads.net import PEER_NONE, endpoint, parse_board_peer
from rtlab.loads.osadl_mid import OSADL_BOARD_LABEL, OSADL_MSG_BYTES, OsadlMidLoad
from rtlab.loads.params import format_size

if TYPE_CHECKING:
    from rtlab.engine.transport import Transport

NET_CHECK_S = 10.0  # for the first message to arrive at the sink (a loaded machine, SSH)
SINK_SNAPSHOT = "250ms"  # how often the sink says what it received
END_WAIT_S = 10.0  # for a network part that is left out to end


class BoardOsadlLoad(RemoteLoad):
    """osadl-mid on a board (see the module doc); driven by LoadSet like any load."""

    def __init__(self, inner: OsadlMidLoad, transport: Transport):
        super().__init__(inner, transport)
        self.inner: OsadlMidLoad = inner
        pl = inner.placement
        if pl.policy != "other":
            raise UsageError(f"load {inner.name} on {transport.target}: osadl-mid runs there as "
                             "the engine's own load, to which it passes no policy yet; policy "
                             f"{pl.policy!r} is not available there", hint='use policy = "other"')
        self.board_peer = parse_board_peer(inner.params["peer"])  # validated with the scenario
        if self.board_peer is not None and self.board_peer.target == transport.target:
            raise UsageError(f"load {inner.name}: osadl-mid.peer {inner.params['peer']!r} is the "
                             f"board the load runs on ({transport.target}); name the other "
                             "board of the link")
        self.io_dir = inner.params["temp_dir"] or BOARD_TEMP_DIR
        self.notes: list[str] = []
        self.network: dict[str, Any] = {"to": None, "peer": None, "left_out": None}
        self._left: list[Proc] = []  # the network part's processes, when left out
        self._sink: Proc | None = None
        self._sender: RemoteProc | None = None
        self._peer_transport: Any = None
        self._stage = "local"
        self.extra["label"] = OSADL_BOARD_LABEL

    # --- what runs on the board ------------------------------------------------------
    def board_commands(self) -> list[BoardCommand]:
        local, net = self.inner.engine_args(self.io_dir)
        into = ["--cgroup", self.inner.partition[0]] if self.inner.partition is not None else []
        if self._stage == "net":
            args = [*into, *net, "--net-to", str(self.network["to"]), "--snapshot-interval",
                    SINK_SNAPSHOT]
            return [BoardCommand("rtlab-probe-load-net", [self.engine, *args], args,
                                 workers=True)]
        return [BoardCommand("rtlab-probe-load", [self.engine, *into, *local], [*into, *local],
                             workers=True)]

    def commands(self) -> list[Command]:
        return [Command(bc.name, bc.argv, workers=bc.workers) for bc in self.board_commands()]

    # --- lifecycle -------------------------------------------------------------------
    def start(self, recorder: SpawnRecorder, workdir: Path, *, ready_timeout_s: float = 5.0
              ) -> None:
        self._stage = "local"
        super().start(recorder, workdir, ready_timeout_s=ready_timeout_s)
        if self.inner.params["peer"] == PEER_NONE:
            self._leave_out("peer = \"none\"")
            return
        timeout = max(ready_timeout_s, START_TIMEOUT_S)
        try:
            self.network["to"] = self._start_sink(workdir, timeout)
        except (RtlabError, OSError) as exc:
            self._leave_out(_one_line(exc))
            return
        self._stage = "net"
        first = len(self.procs)
        try:
            super().start(recorder, workdir, ready_timeout_s=ready_timeout_s)
        except LoadError as exc:  # the sender ended at once (e.g. no route to the sink)
            if len(self.procs) > first and isinstance(self.procs[first], RemoteProc):
                self._sender = self.procs[first]
            self._leave_out(f"the sender on {self.transport.target} did not run: "
                            f"{_one_line(exc)}")
            return
        finally:
            self._stage = "local"
        sender = self.procs[first]
        assert isinstance(sender, RemoteProc)
        self._sender = sender

    def _start_sink(self, workdir: Path, timeout: float) -> str:
        """Start the sink (here or on the peer board); ADDR:PORT the board sends to."""
        bp = self.board_peer
        if bp is None:
            addr = self._host_address()
            bind = "[::]:0" if ":" in addr else "0.0.0.0:0"
            self.network["peer"] = "this machine"
            p = self._spawn_local_sink(bind, workdir)
            rec = self._first_record(p, timeout)
            port = int(str(rec["config"]["net_sink"]).rsplit(":", 1)[1])
            return endpoint(addr, port)
        self.network["peer"] = f"board {bp.target}"
        from rtlab.engine.board import SshTransport

        self._peer_transport = SshTransport(bp.target,
                                            engine_dir=getattr(self.transport, "engine_dir", None))
        args = ["--stdin-lifeline", "load", "--net-sink", bp.endpoint, "--snapshot-interval",
                SINK_SNAPSHOT]
        out, err = workdir / "sink.stdout", workdir / "sink.stderr"
        out.write_bytes(b"")
        with open(err, "wb") as fe:
            popen = self._peer_transport.start_held(args, stdin=subprocess.PIPE, stderr=fe,
                                                    die_signal=signal.SIGKILL)
        p = RemoteProc(command=Command("rtlab-probe-load-sink",
                                       [self._peer_transport.engine_path, *args[1:]],
                                       workers=True),
                       popen=popen, pgid=-1, starttime=-1, started_ns=time.time_ns(),
                       stdout_path=out, stderr_path=err, transport=self._peer_transport,
                       board_command=[self._peer_transport.engine_path, *args])
        self._sink = p
        self.procs.append(p)
        rec = self._first_record(p, timeout)
        p.board_pid, p.pgid, p.starttime = int(rec["pid"]), int(rec["pgid"]), int(rec["starttime"])
        return bp.endpoint

    def _host_address(self) -> str:
        """This machine's address as the board sees it: the first field of its
        $SSH_CONNECTION (the client end of the connection rtlab came in by)."""
        r = self.transport.run_command(["sh", "-c", 'echo "$SSH_CONNECTION"'],
                                       what="reading $SSH_CONNECTION")
        fields = r.stdout.split()
        if r.returncode != 0 or not fields:
            raise RtlabError(f"{self.transport.target} does not say at which address it sees "
                             "this machine ($SSH_CONNECTION is empty there); name a peer "
                             "board with peer = \"BOARD=ADDR:PORT\"")
        if "%" in fields[0]:
            raise RtlabError(f"{self.transport.target} sees this machine at a link-local "
                             f"address ({fields[0]}) the engine cannot send to")
        return fields[0]

    def _spawn_local_sink(self, bind: str, workdir: Path) -> Proc:
        """The sink on this machine: its own process group, dying with rtlab. It is not
        journaled on the board (it does not run there)."""
        argv = [str(find_probe()), "load", "--net-sink", bind, "--snapshot-interval",
                SINK_SNAPSHOT]
        out, err = workdir / "sink.stdout", workdir / "sink.stderr"
        with open(out, "wb") as fo, open(err, "wb") as fe:
            popen = procmod.spawn(argv, cwd=workdir, stdout=fo, stderr=fe)
        st = procmod.starttime(popen.pid)
        p = Proc(command=Command("rtlab-probe-load-sink", argv, workers=True), popen=popen,
                 pgid=popen.pid, starttime=st if st is not None else -1,
                 started_ns=time.time_ns(), stdout_path=out, stderr_path=err)
        self._sink = p
        self.procs.append(p)
        return p

    def _first_record(self, p: Proc, timeout: float) -> dict[str, Any]:
        """The sink's `load` record (its workers counted), or RtlabError with its last
        stderr line."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            recs = _records(p)
            if recs and recs[0].get("type") == "load":
                p.workers_seen = len(recs[0].get("workers") or [])
                return recs[0]
            if p.poll() is not None:
                break
            time.sleep(0.05)
        self._retire(p)
        tail = p.stderr_tail().splitlines()
        where = self.network["peer"]
        raise RtlabError(f"the sink on {where} did not start"
                         + (f": {tail[-1]}" if tail else f" within {timeout:g} s"))

    def verify(self, deadline: float) -> None:
        super().verify(deadline)
        if self._sender is not None and self._sink is not None:
            self._check_arrival()
        self.notes = [self._note()]

    def _check_arrival(self) -> None:
        """Keep the network part only if the sink received something in time."""
        deadline = time.monotonic() + NET_CHECK_S
        sink, sender = self._sink, self._sender
        assert sink is not None and sender is not None
        while time.monotonic() < deadline:
            if _received(_records(sink)) > 0:
                return
            if sender.poll() is not None or sink.poll() is not None:
                break  # died early: LoadSet's watcher reports it as such
            time.sleep(0.1)
        if sender.poll() is not None or sink.poll() is not None:
            return
        sent = _sent(sender.records)
        self._leave_out(f"nothing that {self.transport.target} sent to {self.network['to']} "
                        f"({self.network['peer']}) arrived within {NET_CHECK_S:g} s ({sent} "
                        "message(s) sent; a firewall, or a network that lets nothing out?)")

    def _leave_out(self, why: str) -> None:
        """Stop the network part (what of it runs) and say why; memory and I/O go on."""
        self.network["left_out"] = why
        for p in (self._sender, self._sink):
            if p is not None:
                self._retire(p)
        deadline = time.monotonic() + END_WAIT_S
        while time.monotonic() < deadline and any(p.poll() is None for p in self._left):
            time.sleep(0.05)
        for p in self._left:
            if p.poll() is None:
                self._signal_one(p, signal.SIGKILL)

    def _retire(self, p: Proc) -> None:
        """Take a process of the network part out of the load (stopped, kept apart)."""
        if not any(q is p for q in self._left):
            self._left.append(p)
            self.procs = [q for q in self.procs if q is not p]
            p.died_early = False
            self._signal_one(p, signal.SIGTERM)

    def _signal_one(self, p: Proc, sig: int) -> None:
        if isinstance(p, RemoteProc):
            p.close_lifeline()
            if sig == signal.SIGKILL and p.popen.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    p.popen.kill()
        elif p.poll() is None:
            procmod.killpg(p.pgid, sig)

    def signal(self, sig: int) -> None:
        super().signal(sig)  # the board's processes, and the peer board's sink
        for p in [*self.procs, *self._left]:
            if isinstance(p, RemoteProc):
                self._signal_one(p, sig)
            elif p.poll() is None:
                procmod.killpg(p.pgid, sig)  # the sink on this machine

    def gone(self) -> bool:
        return super().gone() and all(p.poll() is not None for p in self._left)

    def leftovers(self) -> list[int]:
        return super().leftovers() + [p.popen.pid for p in self._left if p.popen.poll() is None]

    def describe(self) -> dict[str, Any]:
        out = super().describe()
        out["processes"] += [{**p.describe(), "left_out": True} for p in self._left]
        return out

    def teardown(self) -> None:
        t, self._peer_transport = self._peer_transport, None
        if t is not None:
            t.close()

    # --- what ran ----------------------------------------------------------------------
    def _note(self) -> str:
        v = self.inner.params
        what = (f"load {self.name} on {self.transport.target}: osadl-mid as the engine's own "
                "load (not stress-ng/sockperf): "
                f"{format_size(v['alloc_bytes'])} allocated every {v['alloc_period']} s, "
                f"{format_size(v['io_bytes'])} files in synced 4k writes under {self.io_dir}")
        if self.network["left_out"] is not None:
            return what + f"; network part left out: {self.network['left_out']}"
        return what + (f", UDP at {v['net_kbit']} kbit/s to {self.network['to']} "
                       f"({self.network['peer']})")

    def collect(self) -> None:
        super().collect()
        main = self.procs[0] if self.procs else None
        res = _result(main) if main is not None else None
        start = next((r for r in (main.records if isinstance(main, RemoteProc) else [])
                      if r.get("type") == "load"), None)
        self.extra["engine_load"] = {
            "alloc": res.get("alloc") if res else None, "io": res.get("io") if res else None,
            "io_dir": (start or {}).get("config", {}).get("io_dir"),
            "io_priority": (start or {}).get("io_priority"),
            "status": res.get("status") if res else None}
        sent = _result(self._sender) if self._sender is not None else None
        got = _result(self._sink) if self._sink is not None else None
        net = (sent or {}).get("net") or {}
        sink = (got or {}).get("sink") or {}
        if not sink and self._sink is not None:  # killed: its last snapshot
            snaps = [r for r in _records(self._sink) if r.get("type") == "load_snapshot"]
            sink = (snaps[-1].get("sink") or {}) if snaps else {}
        self.extra["network"] = {
            **self.network, "kbit": self.inner.params["net_kbit"], "msg_bytes": OSADL_MSG_BYTES,
            "sent": net.get("sent"), "failed": net.get("failed"),
            "last_error": net.get("last_error"), "received": sink.get("received"),
            "foreign": sink.get("foreign")}
        self.extra["label"] = OSADL_BOARD_LABEL
        self.extra["note"] = self.notes[0] if self.notes else self._note()


def _one_line(exc: BaseException) -> str:
    text = exc.one_line() if isinstance(exc, RtlabError) else str(exc)
    return (text.strip().splitlines() or [type(exc).__name__])[-1]


def _records(p: Proc) -> list[dict[str, Any]]:
    """The engine records a process wrote so far (a board's as read by its reader)."""
    if isinstance(p, RemoteProc):
        return list(p.records)
    try:
        lines = p.stdout_path.read_text().splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        with contextlib.suppress(ValueError):
            rec = json.loads(line)
            if isinstance(rec, dict):
                out.append(rec)
    return out


def _result(p: Proc) -> dict[str, Any] | None:
    return next((r for r in reversed(_records(p)) if r.get("type") == "load_result"), None)


def _received(records: list[dict[str, Any]]) -> int:
    counts = [int((r.get("sink") or {}).get("received") or 0) for r in records
              if r.get("type") in ("load_snapshot", "load_result")]
    return max(counts, default=0)


def _sent(records: list[dict[str, Any]]) -> int:
    counts = [int((r.get("net") or {}).get("sent") or 0) for r in records
              if r.get("type") in ("load_snapshot", "load_result")]
    return max(counts, default=0)
