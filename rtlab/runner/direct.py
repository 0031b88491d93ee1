# SPDX-License-Identifier: MIT
"""`rtlab run --probe NAME`: one probe as a one-phase scenario, and the set-up of the
other end of a two-ended probe's runs (scenario or direct): the probe declares how
(`ProbeInfo.two_ended`, rtlab/probes), nothing here names it.

Everything here is resolved and validated before anything starts: the probe name
against `rtlab-probe list`, every `--probe-opt` against the probe's option table,
and `--cpus/--interval/--priority/--policy` against the options the probe has.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

from rtlab.engine.options import check_option, probe_options
from rtlab.errors import UsageError
from rtlab.probes.base import TwoEnded
from rtlab.probes.registry import two_ended, two_ended_names
from rtlab.runner.netpeer import BoardPeer, LoopbackPeer, NetnsPeer, RemotePeer, parse_peer
from rtlab.scenario.model import Phase, ProbeSpec, Scenario

DEFAULT_DURATION_NS = 10_000_000_000


@dataclass(frozen=True)
class DirectRequest:
    probe: str
    probe_opts: Sequence[str] = ()
    cpus: list[int] | None = None
    interval_ns: int | None = None
    priority: int | None = None
    policy: str | None = None
    duration_ns: int | None = None
    threshold_ns: int | None = None
    peer: str | None = None


def probe_scenario(req: DirectRequest, probe_bin: str | None = None) -> Scenario:
    """The one-phase scenario of `--probe` (UsageError, one line, for any bad input)."""

    table = probe_options(req.probe, probe_bin)
    options: dict[str, Any] = {}
    if req.cpus is not None:
        if table.has("cpus") and table.takes_one_cpu("cpus") and len(req.cpus) != 1:
            raise UsageError(f"--cpus: the {req.probe} probe runs on one CPU; give one, "
                             "e.g. --cpus 1")
        if table.has("cpus"):
            options["cpus"] = list(req.cpus)
        elif table.has("cpu"):
            if len(req.cpus) != 1:
                raise UsageError(f"--cpus: the {req.probe} probe runs on one CPU; give one, "
                                 "e.g. --cpus 1")
            options["cpu"] = req.cpus[0]
        else:
            raise UsageError(f"--cpus: the {req.probe} probe places its threads itself; "
                             "use its own options (--probe-opt)")
    for key, value, flag in (("interval_ns", req.interval_ns, "--interval"),
                             ("priority", req.priority, "--priority"),
                             ("policy", req.policy, "--policy"),
                             ("threshold_ns", req.threshold_ns, "--stop-threshold")):
        if value is None:
            continue
        if not table.has(key):
            raise UsageError(f"{flag}: the {req.probe} probe has no such option")
        options[key] = value
    for item in req.probe_opts:
        key, sep, value = item.partition("=")
        if not sep and not table.is_flag(key.replace("-", "_")):
            raise UsageError(f"--probe-opt {item}: expected KEY=VALUE, e.g. window=100ms")
        k, v = check_option(table, key, value if sep else "true")
        options[k] = v
    duration = req.duration_ns
    if duration is not None and ("duration" in options or "duration_ns" in options):
        raise UsageError("--duration and --probe-opt duration both say how long to run; "
                         "give one of them")
    ends = sorted(k for k in ("loops", "test_duration") if k in options)
    if ends and table.has("duration") and "duration" not in options:
        if duration is not None:  # the engine refuses both; say it in rtlab's words
            raise UsageError(f"--duration and --probe-opt {ends[0].replace('_', '-')} "
                             "cannot be combined; give one of them")
        duration = None  # the probe stops on its own count
    elif table.has("duration") and "duration" not in options:
        duration = duration or DEFAULT_DURATION_NS
        options["duration_ns"] = duration  # the whole run, for every probe (overhead too)
    elif not table.has("duration"):
        if req.duration_ns is not None:
            raise UsageError(f"--duration: the {req.probe} probe has no --duration (it runs "
                             "its own fixed experiment)")
        duration = None
    ends = two_ended(req.probe)
    if ends is not None:
        mode = options.pop(ends.mode_option, ends.measuring_end)
        if mode != ends.measuring_end:
            raise UsageError(f"--probe {req.probe} measures with {ends.mode_option} "
                             f"{ends.measuring_end}; the reflector is started by rtlab (or "
                             "is the --peer)")
        options[ends.mode_option] = ends.measuring_end
        if req.peer is not None and not options.get(ends.token_option):
            raise UsageError("--peer needs the reflector's token: "
                             f"--probe-opt {ends.token_option}=TOKEN")
    elif req.peer is not None:
        raise UsageError(f"--peer is for the {_two_ended_words()} probe only")
    probe = ProbeSpec(req.probe, options)
    return Scenario(name=f"probe-{req.probe}",
                    description=f"rtlab run --probe {req.probe}",
                    phases=(Phase("main", probe, duration),))


def _two_ended_words() -> str:
    """The two-ended probes, for messages: "udp"."""
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
            words = _two_ended_words()
            raise UsageError(f"--peer and --reflector are for {words} runs only (--probe "
                             f"{words} or a {words} scenario)")
        return None
    stamps = udp_timestamps(variants)
    pinger, ends = next(_two_ended_probes(variants))
    o = pinger.options
    if reflector is not None:
        if peer is None:
            raise UsageError("--reflector needs --peer ADDR:PORT: the reflector board's "
                             "address on the link to the pinging board, and a port")
        return BoardPeer(reflector.target, peer, reflector.pinger,
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
            return RemotePeer(peer, session, transport=board)  # the board pings
        return RemotePeer(peer, session, timestamps=stamps)
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
        return LoopbackPeer(board, int(others[0]) if others else None)
    NetnsPeer.check_available()
    # the reflector's path is the pinger's: both ends of the "two boards" measured alike
    path, xdp_mode = str(o.get("path", "socket")), o.get("xdp_mode")
    for key, value in (("path", path), ("xdp_mode", xdp_mode)):
        if value is not None and value not in ends.host_choices[key]:
            raise UsageError(f"--probe-opt {key}={value}: allowed: "
                             + ", ".join(ends.host_choices[key]))
    # the reflector on another CPU than the pinger where there is one ("two boards")
    return NetnsPeer(int(others[-1]) if others else (int(cpu) if cpu is not None else None),
                     timestamps=stamps, path=path,
                     xdp_mode=str(xdp_mode) if xdp_mode else None)


def udp_timestamps(variants: Sequence[Scenario]) -> str | None:
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
