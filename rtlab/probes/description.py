# SPDX-License-Identifier: MIT
"""What the host knows about one probe of the engine, declared once by the probe's own
module (rtlab/probes/<name>.py, `INFO`) and looked up through rtlab.probes.registry:
no other module names individual probes.

The probe modules sit above the result model and the analysis: they use only the leaf
modules of the layers below them (text formatting, CPU lists, the histogram mirror, the
percentile rule, the result shape) and read results, phases and channels through the
protocols below. What the result model and the analysis need of a probe is its
`ResultShape` (rtlab.results.shape): the callers that know the registry hand it down."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from rtlab.results.shape import ResultShape


class Summary(Protocol):
    samples: int

    def p(self, q: float) -> int | None: ...


class Channel(Protocol):
    """What the probes read of a result's channel (rtlab.results.model.Channel)."""

    name: str
    samples: int
    max_ns: int | None

    def summary(self, percentiles: Sequence[float]) -> Summary: ...
    def to_dict(self) -> dict[str, Any]: ...


class Phase(Protocol):
    """What the probes read of a result's phase (rtlab.results.model.Phase)."""

    name: str
    channels: list[Any]  # of Channel
    extras: dict[str, Any] | None


class RunResult(Protocol):
    """What the probes read of a result (rtlab.results.model.RunResult)."""

    probe: str
    phases: list[Any]  # of Phase
    provenance: dict[str, Any]

    @property
    def system(self) -> Mapping[str, Any]: ...


@dataclass(frozen=True)
class TwoEnded:
    """A probe measured between two ends (udp: a pinger and a reflector). A run measures
    with one end; the runner sets up the other: in a pair of network namespaces on this
    machine, on a board (`--reflector`), or it is one the user started (`--peer`)."""

    # the option that chooses the end, and the end a run measures with (its default)
    mode_option: str = "mode"
    measuring_end: str = "ping"
    # the measuring end's options: where the other end is, and the token both ends share
    address_option: str = "peer"
    token_option: str = "session"
    # options the host itself acts on (the other end is set up alike) and their allowed
    # values: checked by the host when a scenario is loaded; the engine checks the rest
    host_choices: Mapping[str, tuple[str, ...]] = field(default_factory=dict, hash=False)
    # the other end: the engine's mode that runs it, and its option that binds it
    other_end: str = "reflect"
    bind_option: str = "bind"

    def other_end_args(self, probe: str, bind: str, token: str) -> list[str]:
        """The engine's arguments that start `probe`'s other end bound to `bind`, sharing
        `token` with the measuring end (the caller adds its run options)."""
        return [probe, self.other_end, f"--{self.bind_option}", bind,
                f"--{self.token_option}", token]

    def measures(self, options: Mapping[str, Any]) -> bool:
        """Do these options run the measuring end (the one that needs the other)?"""
        return options.get(self.mode_option, self.measuring_end) == self.measuring_end


@dataclass(frozen=True)
class Monitored:
    """How `rtlab monitor` runs a probe for days, one engine run per segment."""

    help: str  # what it watches, for `rtlab monitor --probe`
    # a periodic thread that sleeps and wakes: --interval, --priority and --dma-latency
    # apply; else why they do not (the probe spins)
    wakes: bool = True
    why_not_waking: str = ""
    fixed_args: tuple[str, ...] = ()  # engine arguments it always gets


@dataclass(frozen=True)
class ProbeInfo:
    """One probe, as the host sees it."""

    name: str
    # what its results look like: headline channels, the quantity they measure, how a
    # phase that measured nothing is told (the result model and the analysis take it)
    shape: ResultShape = field(default_factory=ResultShape)
    # one measuring thread on one CPU (the CLI's --cpus help)
    single_cpu: bool = False
    # it has every common host option under the host's spelling: nothing to adapt, and
    # the engine's option tables need not be read (engine.options.adapt_for)
    takes_common_options: bool = False
    # traced runs: the probe lists its gaps above the trace threshold instead of
    # streaming samples (a polling probe)
    lists_gaps: bool = False
    # the short section under the latency table, per phase
    phase_lines: Callable[[RunResult, Phase], list[str]] | None = None
    # notes the probe's own numbers call for, kept in the result's notes
    notes: Callable[[RunResult], list[str]] | None = None
    # a two-ended probe: how its other end is set up (None: one end, nothing to set up)
    two_ended: TwoEnded | None = None
    # a probe `rtlab monitor` can run (None: not one)
    monitor: Monitored | None = None
