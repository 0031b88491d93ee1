# SPDX-License-Identifier: MIT
"""`rtlab run --probe NAME`: one probe as a one-phase scenario.

Everything here is resolved and validated before anything starts: the probe name
against `rtlab-probe list`, every `--probe-opt` against the probe's option table,
and `--cpus/--interval/--priority/--policy` against the options the probe has. The
other end of a two-ended probe is set up by rtlab.runner.peers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rtlab.engine.options import check_option, probe_options
from rtlab.errors import UsageError
from rtlab.probes.registry import two_ended
from rtlab.runner.peers import two_ended_words
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
        raise UsageError(f"--peer is for the {two_ended_words()} probe only")
    probe = ProbeSpec(req.probe, options)
    return Scenario(name=f"probe-{req.probe}",
                    description=f"rtlab run --probe {req.probe}",
                    phases=(Phase("main", probe, duration),))


