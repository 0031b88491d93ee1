# SPDX-License-Identifier: MIT
"""The other end of a two-ended probe's run (the probe declares how it has two ends:
`ProbeInfo.two_ended`, rtlab/probes; nothing here names it): which peer a run gets
(a reflector in two network namespaces of this machine, one on a board of the user's
choice, one on the pinging board itself, or one the user started), checked before
anything starts, then started and every measuring end aimed at it
(rtlab.runner.netpeer runs the peers)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

from rtlab.cpulist import MAX_CPUS
from rtlab.engine.ssh import SshTarget
from rtlab.engine.transport import LocalTransport
from rtlab.errors import UsageError
from rtlab.netaddr import parse_peer
from rtlab.probes.description import TwoEnded
from rtlab.probes.registry import two_ended, two_ended_names
from rtlab.runner.netpeer import (
    BoardPeer,
    LoopbackPeer,
    NetnsPeer,
    ProbeEnds,
    RemotePeer,
)
from rtlab.scenario.model import ProbeSpec, Scenario
from rtlab.system.shield_plan import ThreadPriority, irq_move_problem, parse_thread_priority
from rtlab.textfmt import shown


@dataclass(frozen=True)
class ReflectorRequest:
    """`--reflector` and its options as given (text where the user typed text): where
    the reflector runs and how. None/empty: the scenario's [reflector] table decides."""

    target: str | None = None
    cpu: int | None = None
    thread_priorities: tuple[str, ...] = ()  # PATTERN=POLICY:PRIO
    irqs: tuple[str, ...] = ()  # PATTERN=CPUS

    def check(self) -> None:
        """UsageError for what is wrong as written, before anything connects or starts
        (what needs the board, its CPUs and IRQs, is checked there)."""
        if self.target is not None:
            SshTarget.parse(self.target, "--reflector")
        if self.cpu is not None and not 0 <= self.cpu < MAX_CPUS:
            raise UsageError(f"--reflector-cpu {self.cpu}: out of range 0..{MAX_CPUS - 1}")
        for text in self.thread_priorities:
            parse_thread_priority(text, "--reflector-thread-priority")
        for text in self.irqs:
            parse_irq_move(text)

    @property
    def tuned(self) -> bool:
        """Are options given that go with a reflector board?"""
        return self.cpu is not None or bool(self.thread_priorities or self.irqs)


def parse_irq_move(text: str) -> tuple[str, str]:
    """`PATTERN=CPUS` of --reflector-irq (CPUS checked on the board when applied)."""
    pattern, _, cpus = text.rpartition("=")
    why = irq_move_problem(pattern, cpus)
    if why == "shape":
        raise UsageError(f"--reflector-irq {shown(text)}: expected PATTERN=CPUS, e.g. "
                         "'eth1=0'")
    if why is not None:
        raise UsageError(f"--reflector-irq {shown(text)}: {why}")
    return pattern, cpus


def choose_peer(variants: Sequence[Scenario], peer: str | None, reflector: ReflectorRequest,
                online: Sequence[int], target: Any = None, spec: Any = None,
                engine_dir: str | None = None) -> Any:
    """The run's other end: --reflector (its options win over the scenario's
    [reflector] table `spec`), the scenario's reflector, --peer, or none given (then
    the namespaces of this machine, or the pinging board's own loopback)."""
    board = reflector.target or (spec.target if spec is not None else None)
    if board is None:
        if reflector.tuned:
            raise UsageError("--reflector-cpu, --reflector-thread-priority and "
                             "--reflector-irq go with --reflector TARGET")
        return make_peer(variants, peer, online, board=target)

    SshTarget.parse(board, "--reflector" if reflector.target else "[reflector] target")
    if target is not None and not target.is_local and target.target == board:
        raise UsageError(f"the reflector {board} is the board that pings (--target): give "
                         "the other one")
    if reflector.thread_priorities or spec is None:
        prios = tuple(parse_thread_priority(t, "--reflector-thread-priority")
                      for t in reflector.thread_priorities)
    else:
        prios = tuple(ThreadPriority(m, pol, pr) for m, pol, pr in spec.thread_priorities)
    if reflector.irqs or spec is None:
        irqs = tuple(parse_irq_move(t) for t in reflector.irqs)
    else:
        irqs = spec.irqs
    address = peer if peer is not None or spec is None else spec.address
    cpu = reflector.cpu if reflector.cpu is not None or spec is None else spec.cpu
    return make_peer(variants, address, online, ReflectorBoard(
        board, target if target is not None else LocalTransport(),
        engine_dir=engine_dir, cpu=cpu, thread_priorities=prios, irq_affinities=irqs))


def two_ended_words() -> str:
    """The two-ended probes, for messages."""
    return " or ".join(two_ended_names())


def _two_ended_probes(variants: Sequence[Scenario]) -> Iterator[tuple[ProbeSpec, TwoEnded]]:
    """Every probe of the variants that has two ends, in order, with how it has them."""
    for v in variants:
        for ph in v.phases:
            for p in ph.probes:
                ends = two_ended(p.name)
                if ends is not None:
                    yield p, ends


def needs_peer(sc: Scenario) -> bool:
    """Does a probe of `sc` measure with the end that needs the other one started?"""
    return any(ends.measures(p.options) for p, ends in _two_ended_probes([sc]))


@dataclass(frozen=True)
class ReflectorBoard:
    """`--reflector B`: where the reflector runs (a board) and how."""

    target: str
    pinger: Any  # the Transport of the board that pings (--target)
    engine_dir: str | None = None
    cpu: int | None = None
    thread_priorities: tuple[Any, ...] = ()
    irq_affinities: tuple[tuple[str, str], ...] = ()


def make_peer(variants: Sequence[Scenario], peer: str | None, online: Sequence[int],
              reflector: ReflectorBoard | None = None, board: Any = None) -> Any:
    """The peer (the other end) of a two-ended probe's run (None if no variant runs one
    that measures). `board`: the Transport of the board the run pings from (None: this
    machine); with neither `peer` nor `reflector` its reflector runs on that board itself,
    over loopback (LoopbackPeer, which says so in the run's notes)."""

    if not any(needs_peer(v) for v in variants):
        if peer is not None or reflector is not None:
            words = two_ended_words()
            raise UsageError(f"--peer and --reflector are for {words} runs only (--probe "
                             f"{words} or a {words} scenario)")
        return None
    stamps = peer_timestamps(variants)
    pinger, ends = next(_two_ended_probes(variants))
    of = ProbeEnds(pinger.name, ends)
    o = pinger.options
    if reflector is not None:
        if peer is None:
            raise UsageError("--reflector needs --peer ADDR:PORT: the reflector board's "
                             "address on the link to the pinging board, and a port")
        return BoardPeer(of, reflector.target, peer, reflector.pinger,
                         engine_dir=reflector.engine_dir, cpu=reflector.cpu,
                         thread_priorities=reflector.thread_priorities,
                         irq_affinities=reflector.irq_affinities, timestamps=stamps,
                         path=str(o.get("path", "socket")),
                         xdp_mode=str(o["xdp_mode"]) if o.get("xdp_mode") else None)
    if peer is not None:
        parse_peer(peer)
        token = ends.token_option
        session = next((str(p.options[e.token_option]) for p, e in _two_ended_probes(variants)
                        if p.options.get(e.token_option)), None)
        if session is None:
            raise UsageError(f"--peer needs the reflector's token: --probe-opt {token}=TOKEN "
                             f"(or {token} = \"TOKEN\" in the [[probe]] options)")
        if board is not None and not board.is_local:
            if stamps in ("hardware", "auto"):
                raise UsageError("hardware timestamps with --peer from a board: not "
                                 "available yet (enable them on the board's NIC by hand)")
            return RemotePeer(of, peer, session, transport=board)  # the board pings
        return RemotePeer(of, peer, session, timestamps=stamps)
    cpu = o.get("cpu", (list(o.get("cpus") or []) or [None])[0])
    others = [c for c in online if c != cpu]
    if board is not None and not board.is_local:
        if o.get("path", "socket") != "socket":
            raise UsageError(f"--probe-opt path={o['path']}: needs a reflector on another "
                             "board (--reflector BOARD --peer ADDR:PORT); over a board's "
                             "loopback only the socket path runs")
        if stamps in ("hardware", "auto"):
            raise UsageError("hardware timestamps need a reflector on another board "
                             "(--peer ADDR:PORT with a reflector you started)")
        return LoopbackPeer(of, board, int(others[0]) if others else None)
    NetnsPeer.check_available()
    # the reflector's path is the pinger's: both ends of the "two boards" measured alike
    path, xdp_mode = str(o.get("path", "socket")), o.get("xdp_mode")
    for key, value in (("path", path), ("xdp_mode", xdp_mode)):
        if value is not None and value not in ends.host_choices[key]:
            raise UsageError(f"--probe-opt {key}={value}: allowed: "
                             + ", ".join(ends.host_choices[key]))
    # the reflector on another CPU than the pinger where there is one ("two boards")
    return NetnsPeer(of, int(others[-1]) if others else (int(cpu) if cpu is not None else None),
                     timestamps=stamps, path=path,
                     xdp_mode=str(xdp_mode) if xdp_mode else None)


def peer_timestamps(variants: Sequence[Scenario]) -> str | None:
    """The --timestamps of the pingers (a two-ended probe's measuring ends), for the peer:
    the one value they all use; "hardware"/"auto" if any wants the NIC's stamps
    ("hardware" wins); else None."""
    kinds = {str(p.options["timestamps"]) if "timestamps" in p.options else None
             for p, _ends in _two_ended_probes(variants)}
    for hw in ("hardware", "auto"):
        if hw in kinds:
            return hw
    return kinds.pop() if len(kinds) == 1 else None


def with_peer(sc: Scenario, addr: str, session: str) -> Scenario:
    """The two-ended probes of `sc` measuring against the other end at `addr`."""
    def fix(p: ProbeSpec) -> ProbeSpec:
        ends = two_ended(p.name)
        if ends is None:
            return p
        return ProbeSpec(p.name, {**p.options, ends.mode_option: ends.measuring_end,
                                  ends.address_option: addr, ends.token_option: session},
                         p.label)
    phases = tuple(replace(ph, probe=fix(ph.probe),
                           more_probes=tuple(fix(q) for q in ph.more_probes))
                   for ph in sc.phases)
    return replace(sc, phases=phases)


def start_peer(peer: Any, variants: Sequence[Scenario], opts: Any) -> list[Scenario]:
    """Start the reflector (or take the remote one), make the run ping from where the
    peer says and record where it is; every pinger of `variants` aimed at it."""
    total = sum(v.duration_ns or 0 for v in variants) or None
    addr = peer.start(total)
    opts.transport = peer.pinger_transport()
    opts.peer_info = peer.describe
    return [with_peer(v, addr, peer.session) for v in variants]


