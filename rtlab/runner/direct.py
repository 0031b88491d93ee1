# SPDX-License-Identifier: MIT
"""`rtlab run --probe NAME`: one probe as a one-phase scenario, and the network set-up
of udp runs (scenario or direct).

Everything here is resolved and validated before anything starts: the probe name
against `rtlab-probe list`, every `--probe-opt` against the probe's option table,
and `--cpus/--interval/--priority/--policy` against the options the probe has.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from rtlab.engine.options import check_option, probe_options
from rtlab.errors import UsageError
from rtlab.runner.netpeer import BoardPeer, NetnsPeer, RemotePeer, parse_peer
from rtlab.scenario.model import UDP_HOST_CHOICES, Phase, ProbeSpec, Scenario

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
    if req.probe == "udp":
        mode = options.pop("mode", "ping")
        if mode != "ping":
            raise UsageError("--probe udp measures with mode ping; the reflector is started "
                             "by rtlab (or is the --peer)")
        options["mode"] = "ping"
        if req.peer is not None and not options.get("session"):
            raise UsageError("--peer needs the reflector's token: --probe-opt session=TOKEN")
    elif req.peer is not None:
        raise UsageError("--peer is for the udp probe only")
    probe = ProbeSpec(req.probe, options)
    return Scenario(name=f"probe-{req.probe}",
                    description=f"rtlab run --probe {req.probe}",
                    phases=(Phase("main", probe, duration),))


def needs_udp_peer(sc: Scenario) -> bool:
    return any(p.name == "udp" and p.options.get("mode", "ping") == "ping"
               for ph in sc.phases for p in ph.probes)


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
              reflector: ReflectorBoard | None = None) -> Any:
    """The UdpPeer of a udp run (None if no variant runs the udp probe)."""

    if not any(needs_udp_peer(v) for v in variants):
        if peer is not None or reflector is not None:
            raise UsageError("--peer and --reflector are for udp runs only (--probe udp or "
                             "a udp scenario)")
        return None
    stamps = udp_timestamps(variants)
    if reflector is not None:
        if peer is None:
            raise UsageError("--reflector needs --peer ADDR:PORT: the reflector board's "
                             "address on the link to the pinging board, and a port")
        pinger = next((p for v in variants for ph in v.phases for p in ph.probes
                       if p.name == "udp"), None)
        o = pinger.options if pinger is not None else {}
        return BoardPeer(reflector.target, peer, reflector.pinger,
                         engine_dir=reflector.engine_dir, cpu=reflector.cpu,
                         thread_priorities=reflector.thread_priorities,
                         irq_affinities=reflector.irq_affinities, timestamps=stamps,
                         path=str(o.get("path", "socket")),
                         xdp_mode=str(o["xdp_mode"]) if o.get("xdp_mode") else None)
    if peer is not None:
        parse_peer(peer)
        session = next((str(p.options["session"]) for v in variants for ph in v.phases
                        for p in ph.probes if p.name == "udp" and p.options.get("session")),
                       None)
        if session is None:
            raise UsageError("--peer needs the reflector's token: --probe-opt session=TOKEN "
                             "(or session = \"TOKEN\" in the [[probe]] options)")
        return RemotePeer(peer, session, timestamps=stamps)
    NetnsPeer.check_available()
    pinger = next((p for v in variants for ph in v.phases for p in ph.probes
                   if p.name == "udp"), None)
    o = pinger.options if pinger is not None else {}
    cpu = o.get("cpu", (list(o.get("cpus") or []) or [None])[0])
    others = [c for c in online if c != cpu]
    # the reflector's path is the pinger's: both ends of the "two boards" measured alike
    path, xdp_mode = str(o.get("path", "socket")), o.get("xdp_mode")
    for key, value in (("path", path), ("xdp_mode", xdp_mode)):
        if value is not None and value not in UDP_HOST_CHOICES[key]:
            raise UsageError(f"--probe-opt {key}={value}: allowed: "
                             + ", ".join(UDP_HOST_CHOICES[key]))
    # the reflector on another CPU than the pinger where there is one ("two boards")
    return NetnsPeer(int(others[-1]) if others else (int(cpu) if cpu is not None else None),
                     timestamps=stamps, path=path,
                     xdp_mode=str(xdp_mode) if xdp_mode else None)


def udp_timestamps(variants: Sequence[Scenario]) -> str | None:
    """The --timestamps of the udp pingers, for the peer: the one value they all use;
    "hardware"/"auto" if any wants the NIC's stamps ("hardware" wins); else None."""
    kinds = {str(p.options["timestamps"]) if "timestamps" in p.options else None
             for v in variants for ph in v.phases for p in ph.probes if p.name == "udp"}
    for hw in ("hardware", "auto"):
        if hw in kinds:
            return hw
    return kinds.pop() if len(kinds) == 1 else None


def with_peer(sc: Scenario, addr: str, session: str) -> Scenario:
    """The udp pingers of `sc` aimed at the reflector."""
    def fix(p: ProbeSpec) -> ProbeSpec:
        if p.name != "udp":
            return p
        return ProbeSpec(p.name, {**p.options, "mode": "ping", "peer": addr,
                                  "session": session}, p.label)
    phases = tuple(replace(ph, probe=fix(ph.probe),
                           more_probes=tuple(fix(q) for q in ph.more_probes))
                   for ph in sc.phases)
    return replace(sc, phases=phases)
