# SPDX-License-Identifier: MIT
"""The versioned result model of one rtlab run.

HISTORY of RESULT_SCHEMA_VERSION (bump on any rename, removal or change of
meaning; adding an optional field does not bump it; keep a loader for every
old version in `_LOADERS`):

* 1 - first version: run id, status, partial + notes, rt_valid, probe,
  scenario (name, hash), phases -> channels (stats, sparse log-linear
  histogram, window maxima), stream accounting, provenance (engine header,
  host facts).
  Added without a bump: per phase `spikes`, `spike_summary`, `trace` (spike
  attribution, absent when the run was not traced); the status `invalid` (a live
  run whose numbers failed validation, rtlab.results.validate); per channel
  `cpu_use` (who else used its CPU, absent when not recorded).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from rtlab.errors import RtlabError
from rtlab.results.histogram import LogLinHistogram
from rtlab.results.shape import ResultShape
from rtlab.results.summary import DEFAULT_PERCENTILES, ChannelSummary, summarize
from rtlab.results.windows import WindowHist, WindowMaxima

RESULT_SCHEMA_VERSION = 1

# `invalid`: the numbers contradict each other (results.validate); kept for the record,
# never believed: no verdict, headline or summary column is computed from them
STATUSES = ("completed", "partial", "threshold", "failed", "invalid")


def new_run_id() -> str:
    """A short random id (8 hex digits); the store refuses duplicates."""
    return secrets.token_hex(4)


@dataclass
class Channel:
    """One stream of measured values (e.g. `cpu1` of the timer probe)."""

    name: str
    cpu: int | None = None
    tid: int | None = None
    samples: int = 0
    missed: int = 0
    min_ns: int | None = None
    max_ns: int | None = None
    sum_ns: int = 0
    max_at_ns: int | None = None
    hist: LogLinHistogram = field(default_factory=LogLinHistogram)
    # per-window maxima: (window_index, max_ns, samples), sorted by index; any list of
    # triples assigned here is stored as a WindowMaxima (three int64 arrays)
    windows: WindowMaxima = field(default_factory=WindowMaxima)
    window_ns: int | None = None
    windows_lost: int = 0
    ring_lost: int = 0
    # who else used the channel's CPU (engine `cpu_use`: span_ns, cpu_busy_ns,
    # thread_run_ns, thread_wait_ns; analysis.cpushare); None when not recorded
    cpu_use: dict[str, Any] | None = None
    # per window, its sum and a coarse histogram (engine `window_hist`); None when not
    # recorded (older engines, imports): the comparisons are then conservative
    window_hist: WindowHist | None = None

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "windows":
            value = WindowMaxima.of(value)
        object.__setattr__(self, name, value)

    def summary(self, percentiles: tuple[float, ...] = DEFAULT_PERCENTILES) -> ChannelSummary:
        return summarize(
            self.name, self.cpu, self.hist,
            samples=self.samples, missed=self.missed, min_ns=self.min_ns, max_ns=self.max_ns,
            sum_ns=self.sum_ns, max_at_ns=self.max_at_ns, percentiles=percentiles,
        )

    @classmethod
    def merged(cls, name: str, channels: list[Channel]) -> Channel:
        """Exact merge of several channels (histograms add; min/max/sum exact)."""
        out = cls(name=name)
        for ch in channels:
            out.samples += ch.samples
            out.missed += ch.missed
            out.sum_ns += ch.sum_ns
            out.hist = out.hist.merge(ch.hist)
            if ch.min_ns is not None:
                out.min_ns = ch.min_ns if out.min_ns is None else min(out.min_ns, ch.min_ns)
            if ch.max_ns is not None and (out.max_ns is None or ch.max_ns > out.max_ns):
                out.max_ns, out.max_at_ns, out.cpu = ch.max_ns, ch.max_at_ns, ch.cpu
        return out

    def to_dict(self, packed: bool = False) -> dict[str, Any]:
        """The JSON form; `packed` stores the window maxima compactly (the store's form)."""
        d = {
            "name": self.name, "cpu": self.cpu, "tid": self.tid,
            "samples": self.samples, "missed": self.missed,
            "min_ns": self.min_ns, "max_ns": self.max_ns, "sum_ns": self.sum_ns,
            "max_at_ns": self.max_at_ns, "hist": self.hist.to_json(),
            "windows": self.windows.pack() if packed else self.windows.to_json(),
            "window_ns": self.window_ns,
            "windows_lost": self.windows_lost, "ring_lost": self.ring_lost,
        }
        if self.cpu_use is not None:
            d["cpu_use"] = self.cpu_use
        if self.window_hist is not None:
            d["window_hist"] = (self.window_hist.pack() if packed
                                else self.window_hist.to_json())
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Channel:
        return cls(
            name=str(d["name"]), cpu=d.get("cpu"), tid=d.get("tid"),
            samples=int(d.get("samples", 0)), missed=int(d.get("missed", 0)),
            min_ns=d.get("min_ns"), max_ns=d.get("max_ns"), sum_ns=int(d.get("sum_ns", 0)),
            max_at_ns=d.get("max_at_ns"), hist=LogLinHistogram.from_json(d["hist"]),
            windows=WindowMaxima.load(d.get("windows")),
            window_ns=d.get("window_ns"), windows_lost=int(d.get("windows_lost", 0)),
            ring_lost=int(d.get("ring_lost", 0)), cpu_use=d.get("cpu_use"),
            window_hist=WindowHist.load(d.get("window_hist")),
        )


@dataclass
class Phase:
    """A part of a scenario with its own channels (one phase `main` for now)."""

    name: str
    channels: list[Channel] = field(default_factory=list)
    elapsed_ns: int | None = None
    # spike attribution (`rtlab run --trace`; absent without tracing, docs/results.md)
    spikes: list[dict[str, Any]] | None = None
    spike_summary: dict[str, Any] | None = None
    trace: dict[str, Any] | None = None
    # the probe's own result objects beside its channels (switch `checks`, noise `noise`,
    # udp `udp`, ...: the engine's final record minus the common keys; docs/results.md)
    extras: dict[str, Any] | None = None

    def headline(self, shape: ResultShape) -> list[Channel]:
        """The channels of the probe's headline quantity (`ResultShape.headline`)."""
        return shape.headline_channels(self.channels)

    def merged(self, shape: ResultShape) -> Channel:
        """Exact merge of the headline channels (the `all` row)."""
        return Channel.merged("all", self.headline(shape))

    def all_row(self, shape: ResultShape) -> Channel | None:
        """The `all` row of tables and plots: the merge of the headline channels when
        there are several (one CPU each), None when one channel is the headline."""
        return self.merged(shape) if len(self.headline(shape)) > 1 else None

    def to_dict(self, packed: bool = False) -> dict[str, Any]:
        d: dict[str, Any] = {"name": self.name, "elapsed_ns": self.elapsed_ns,
                             "channels": [c.to_dict(packed) for c in self.channels]}
        for key in ("spikes", "spike_summary", "trace", "extras"):
            if getattr(self, key) is not None:
                d[key] = getattr(self, key)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Phase:
        return cls(name=str(d["name"]), elapsed_ns=d.get("elapsed_ns"),
                   channels=[Channel.from_dict(c) for c in d.get("channels", [])],
                   spikes=d.get("spikes"), spike_summary=d.get("spike_summary"),
                   trace=d.get("trace"), extras=d.get("extras"))


@dataclass
class Stream:
    """How the engine's output arrived: what was lost or damaged on the way."""

    records: int = 0
    snapshots: int = 0
    corrupt_lines: int = 0
    truncated_tail: bool = False
    ignored_records: int = 0
    engine_status: str | None = None  # the engine result's `status`, None if no result
    engine_exit_code: int | None = None  # process exit code; negative = killed by signal
    threshold_hit: dict[str, Any] | None = None
    logs: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Stream:
        known = {k: v for k, v in d.items() if k in cls.__dataclass_fields__}
        return cls(**known)


@dataclass
class RunResult:
    """Everything rtlab knows about one run. Serialised with `to_dict`, read with `load_result`."""

    run_id: str
    status: str
    probe: str
    phases: list[Phase]
    partial: bool = False
    notes: list[str] = field(default_factory=list)
    rt_valid: bool | None = None
    scenario: dict[str, Any] = field(default_factory=lambda: {"name": None, "hash": None})
    stream: Stream = field(default_factory=Stream)
    # provenance: {"engine": <header minus type/schema>, "host": {...}}
    provenance: dict[str, Any] = field(default_factory=lambda: {"engine": {}, "host": {}})
    version: int = RESULT_SCHEMA_VERSION

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"unknown run status {self.status!r}")

    # convenience ------------------------------------------------------------------
    def channels(self) -> Iterator[tuple[Phase, Channel]]:
        for phase in self.phases:
            for ch in phase.channels:
                yield phase, ch

    def headline_channels(self, shape: ResultShape) -> Iterator[tuple[Phase, Channel]]:
        """(phase, channel) of the headline channels of every phase (`shape`: the
        probe's, rtlab.probes.registry.shape)."""
        for phase in self.phases:
            for ch in phase.headline(shape):
                yield phase, ch

    def merged(self, shape: ResultShape) -> Channel:
        """Exact merge of the headline channels of every phase."""
        return Channel.merged("all", [ch for _, ch in self.headline_channels(shape)])

    @property
    def system(self) -> dict[str, Any]:
        return self.provenance.get("engine", {}).get("system") or {}

    @property
    def elapsed_ns(self) -> int | None:
        values = [p.elapsed_ns for p in self.phases if p.elapsed_ns is not None]
        return sum(values) if values else None

    # serialisation ----------------------------------------------------------------
    def to_dict(self, packed: bool = False) -> dict[str, Any]:
        """The versioned JSON form (docs/results.md); `packed` is the store's compact
        form of the window maxima, readable by `load_result` as well."""
        return {
            "version": self.version,
            "run_id": self.run_id,
            "status": self.status,
            "partial": self.partial,
            "notes": list(self.notes),
            "rt_valid": self.rt_valid,
            "probe": self.probe,
            "scenario": dict(self.scenario),
            "phases": [p.to_dict(packed) for p in self.phases],
            "stream": self.stream.to_dict(),
            "provenance": self.provenance,
        }


def _load_v1(d: dict[str, Any]) -> RunResult:
    return RunResult(
        run_id=str(d["run_id"]),
        status=str(d["status"]),
        probe=str(d["probe"]),
        phases=[Phase.from_dict(p) for p in d["phases"]],
        partial=bool(d.get("partial", False)),
        notes=[str(n) for n in d.get("notes", [])],
        rt_valid=d.get("rt_valid"),
        scenario=dict(d.get("scenario") or {"name": None, "hash": None}),
        stream=Stream.from_dict(d.get("stream") or {}),
        provenance=d.get("provenance") or {"engine": {}, "host": {}},
        version=1,
    )


_LOADERS: dict[int, Callable[[dict[str, Any]], RunResult]] = {1: _load_v1}


def load_result(d: dict[str, Any]) -> RunResult:
    """Read a result dict of any known version; refuse unknown versions clearly."""
    if not isinstance(d, dict):
        raise RtlabError("not an rtlab result: expected a JSON object")
    version = d.get("version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise RtlabError("not an rtlab result: no integer 'version' field")
    loader = _LOADERS.get(version)
    if loader is None:
        known = ", ".join(str(v) for v in sorted(_LOADERS))
        raise RtlabError(
            f"result version {version} is not supported by this rtlab (knows {known})",
            hint="upgrade rtlab to read it",
        )
    try:
        return loader(d)
    except (KeyError, TypeError, ValueError) as exc:
        raise RtlabError(f"malformed rtlab result (version {version}): {exc}") from exc
