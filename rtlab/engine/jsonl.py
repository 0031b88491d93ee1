# SPDX-License-Identifier: MIT
"""Reader of the engine's JSON Lines (docs/engine-output.md, schema 1).

`StreamCollector.feed()` takes the lines one by one as they arrive. It never
raises on damaged input: a line that is not a JSON object with a string `type`
and an integer `schema` is counted as corrupt, an unterminated last line is
counted as truncated and dropped. The one thing it refuses is a record of a
`schema` this rtlab does not know, because then every field could mean
something else (`UnknownSchemaError`).

The collector keeps the header, the latest cumulative channel state (last
snapshot, then the result), the per-window maxima accumulated over all records,
and the logs; `to_result()` turns that into a `RunResult`.
"""

from __future__ import annotations

import json
from typing import Any

from rtlab import __version__
from rtlab.errors import RtlabError
from rtlab.results.histogram import LogLinHistogram
from rtlab.results.model import Channel, Phase, RunResult, Stream
from rtlab.results.windows import WindowHist, WindowMaxima

SUPPORTED_SCHEMAS: frozenset[int] = frozenset({1})
RECORD_TYPES = ("header", "log", "snapshot", "result")
_MAX_LOGS = 200


class UnknownSchemaError(RtlabError):
    def __init__(self, schema: object) -> None:
        known = ", ".join(str(s) for s in sorted(SUPPORTED_SCHEMAS))
        super().__init__(
            f"engine output uses schema {schema!r}, which rtlab {__version__} does not know "
            f"(it reads schema {known})",
            hint="use an rtlab-probe built from the same release as rtlab",
        )


class CorruptLine(ValueError):
    """A line that is not a valid record."""


def parse_line(line: str) -> dict[str, Any]:
    """One complete line -> record dict. Raises CorruptLine or UnknownSchemaError."""
    try:
        rec = json.loads(line)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise CorruptLine(f"not JSON: {exc.msg if hasattr(exc, 'msg') else exc}") from exc
    if not isinstance(rec, dict):
        raise CorruptLine("not a JSON object")
    rtype = rec.get("type")
    schema = rec.get("schema")
    if not isinstance(rtype, str):
        raise CorruptLine("no string 'type'")
    if not isinstance(schema, int) or isinstance(schema, bool):
        raise CorruptLine("no integer 'schema'")
    if schema not in SUPPORTED_SCHEMAS:
        raise UnknownSchemaError(schema)
    return rec


# keys every snapshot/result has; everything else in it belongs to the probe
_COMMON_RECORD_KEYS = frozenset((
    "type", "schema", "seq", "status", "exit_code", "elapsed_ns", "end_realtime_ns",
    "realtime_ns", "monotonic_ns", "channels", "threshold_hit", "samples_file", "error"))


class StreamCollector:
    """Accumulates the records of one engine run."""

    def __init__(self, *, cumulative: bool = False) -> None:
        """`cumulative`: refuse a record whose counts or extremes went backwards since an
        earlier one (an imported file; a live run's and a monitor's own checks see the
        damage themselves)."""
        self.cumulative = cumulative
        self.header: dict[str, Any] | None = None
        self.state: dict[str, Any] | None = None  # last snapshot or result
        self.result: dict[str, Any] | None = None
        self.stream = Stream()
        self.corrupt_examples: list[str] = []
        self.line_no = 0
        self.state_line: int | None = None  # the line of the record `state` came from
        # channel name -> window index -> (max_ns, samples)
        self._windows: dict[str, dict[int, tuple[int, int]]] = {}
        # channel name -> window index -> (sum_ns, [[bucket, count], ...]) (newer engines)
        self._window_hist: dict[str, dict[int, tuple[int, list[Any]]]] = {}
        self._wh_bits: dict[str, int] = {}
        # (cpu, start, end) CLOCK_MONOTONIC ns of the gaps a polling probe (noise) listed;
        # each snapshot lists those since the previous one, so they are collected here
        self.gaps: list[tuple[int, int, int]] = []
        # channel name -> (samples, min_ns, max_ns, line) of the last accepted record:
        # a run's records are cumulative, so none of them may shrink
        self._totals: dict[str, tuple[int, int | None, int | None, int]] = {}
        self.contradiction: str | None = None  # the first record that went backwards

    # feeding --------------------------------------------------------------------
    def feed(self, line: str | bytes) -> dict[str, Any] | None:
        """Feed one line as read (with its newline if it had one). Returns the record or None."""
        if isinstance(line, bytes):
            line = line.decode("utf-8", errors="replace")
        self.line_no += 1
        if not line.endswith("\n"):
            # The engine writes each line with one write(2): an unterminated line means it
            # died inside that call (or the file was cut). Drop it.
            if line.strip():
                self.stream.truncated_tail = True
            return None
        if not line.strip():
            return None
        try:
            rec = parse_line(line)
        except CorruptLine as exc:
            self.stream.corrupt_lines += 1
            if len(self.corrupt_examples) < 5:
                self.corrupt_examples.append(f"line {self.line_no}: {exc}")
            return None
        try:
            self._accept(rec)
        except (KeyError, TypeError, ValueError) as exc:
            self.stream.corrupt_lines += 1
            if len(self.corrupt_examples) < 5:
                self.corrupt_examples.append(f"line {self.line_no}: bad {rec['type']}: {exc}")
            return None
        self.stream.records += 1
        return rec

    def _accept(self, rec: dict[str, Any]) -> None:
        rtype = rec["type"]
        if rtype == "header":
            if self.header is None:
                self.header = rec
            else:
                raise ValueError("second header")
        elif rtype in ("snapshot", "result"):
            channels = rec["channels"]
            if not isinstance(channels, list):
                raise TypeError("channels is not a list")
            parsed = [_channel_from_engine(c) for c in channels]  # validates before accepting
            if self.cumulative:
                self._check_cumulative(parsed)
            for ch, raw in zip(parsed, channels, strict=True):
                acc = self._windows.setdefault(ch.name, {})
                for w in raw.get("windows") or []:
                    idx, mx, n = int(w[0]), int(w[1]), int(w[2])
                    old = acc.get(idx)
                    acc[idx] = (max(mx, old[0]), max(n, old[1])) if old else (mx, n)
                wh = raw.get("window_hist")
                if isinstance(wh, dict):
                    self._wh_bits[ch.name] = int(wh.get("sub_bits", 2))
                    det = self._window_hist.setdefault(ch.name, {})
                    for w in wh.get("windows") or []:
                        idx, pairs = int(w[0]), list(w[2])
                        old_d = det.get(idx)
                        if old_d is None or sum(c for _, c in pairs) >= sum(
                                c for _, c in old_d[1]):
                            det[idx] = (int(w[1]), pairs)
            self._collect_gaps(rec.get("noise"))
            self.state = rec
            self.state_line = self.line_no
            if rtype == "snapshot":
                self.stream.snapshots += 1
            else:
                self.result = rec
                self.stream.engine_status = rec.get("status")
                self.stream.threshold_hit = rec.get("threshold_hit")
        elif rtype == "log":
            if len(self.stream.logs) < _MAX_LOGS:
                self.stream.logs.append(
                    {k: rec.get(k) for k in ("level", "code", "msg")}
                )
        else:
            self.stream.ignored_records += 1

    def _check_cumulative(self, parsed: list[Channel]) -> None:
        """Refuse (ValueError: the line is skipped as corrupt, and `contradiction` says
        why) a record whose counts or extremes went backwards since an earlier one."""
        why = None
        for ch in parsed:
            old = self._totals.get(ch.name)
            if old is None:
                continue
            n, lo, hi, line = old
            if min(ch.samples, n, *(v for v in (lo, hi, ch.min_ns, ch.max_ns)
                                    if v is not None)) < 0:
                continue  # a negative count or latency: the record's validation says so
            if ch.samples < n:
                why = f"{ch.samples:,} samples, fewer than the {n:,} of line {line}"
            elif hi is not None and ch.max_ns is not None and ch.max_ns < hi:
                why = f"max {ch.max_ns} ns, below the {hi} ns of line {line}"
            elif lo is not None and ch.min_ns is not None and ch.min_ns > lo:
                why = f"min {ch.min_ns} ns, above the {lo} ns of line {line}"
            if why is not None:
                why = (f"line {self.line_no}: channel {ch.name} has {why} (a run's records "
                       "only grow)")
                break
        if why is not None:
            if self.contradiction is None:
                self.contradiction = why
            raise ValueError(why)
        for ch in parsed:
            self._totals[ch.name] = (ch.samples, ch.min_ns, ch.max_ns, self.line_no)

    def _collect_gaps(self, extra: Any) -> None:
        if not isinstance(extra, dict):
            return
        for ch in extra.get("channels") or []:
            cpu = ch.get("cpu") if isinstance(ch, dict) else None
            if not isinstance(cpu, int):
                continue
            for gap in ch.get("gaps") or []:
                self.gaps.append((cpu, int(gap[0]), int(gap[1])))

    # views ------------------------------------------------------------------------
    @property
    def probe(self) -> str | None:
        return self.header.get("probe") if self.header else None

    def channels(self) -> list[Channel]:
        """The latest cumulative channel states with all window maxima seen so far."""
        if self.state is None:
            return []
        window_ns = None
        if self.header:
            window_ns = (self.header.get("config") or {}).get("window_ns")
        out = []
        for raw in self.state["channels"]:
            ch = _channel_from_engine(raw)
            ch.window_ns = window_ns
            acc = self._windows.get(ch.name, {})
            ch.windows = WindowMaxima.from_mapping(acc)
            det = self._window_hist.get(ch.name)
            if det is not None and set(det) == set(acc):  # every window has its detail
                ch.window_hist = WindowHist.from_rows(self._wh_bits[ch.name], det)
            out.append(ch)
        return out

    def elapsed_ns(self) -> int | None:
        return self.state.get("elapsed_ns") if self.state else None

    def loss_notes(self) -> list[str]:
        """Human notes on what was lost or damaged."""
        notes = []
        if self.stream.corrupt_lines:
            notes.append(
                f"{self.stream.corrupt_lines} corrupt engine output line(s) skipped"
                + (f" ({'; '.join(self.corrupt_examples[:3])})" if self.corrupt_examples else "")
            )
        if self.stream.truncated_tail:
            notes.append("engine output ended inside a line (truncated last line dropped)")
        if self.header is None:
            notes.append("no engine header: configuration and system facts unknown")
        if self.result is None:
            if self.stream.snapshots:
                notes.append(
                    f"no final engine result: kept the last snapshot (#{self.stream.snapshots}, "
                    f"{(self.elapsed_ns() or 0) / 1e9:.1f} s); the tail of the run is lost"
                )
            else:
                notes.append("no final engine result and no snapshot: nothing was measured")
        lost = sum(int(c.get("windows_lost") or 0) for c in (self.state or {}).get("channels", []))
        if lost:
            notes.append(f"{lost} window maxima not published by the engine (reporter fell behind)")
        return notes

    def extras(self) -> dict[str, Any] | None:
        """The probe's own objects of the last snapshot/result (None if it has none)."""
        if self.state is None:
            return None
        out = {k: v for k, v in self.state.items() if k not in _COMMON_RECORD_KEYS}
        return out or None

    def to_result(
        self,
        run_id: str,
        *,
        status: str,
        partial: bool,
        host: dict[str, Any],
        scenario: dict[str, Any] | None = None,
        phase: str = "main",
        extra_notes: list[str] | None = None,
    ) -> RunResult:
        header = self.header or {}
        engine = {k: v for k, v in header.items() if k not in ("type", "schema")}
        engine["schema"] = header.get("schema")
        effective = header.get("effective") or {}
        rt_valid = effective.get("rt_valid")
        return RunResult(
            run_id=run_id,
            status=status,
            probe=str(header.get("probe") or "unknown"),
            phases=[Phase(phase, self.channels(), self.elapsed_ns(), extras=self.extras())],
            partial=partial,
            notes=[*self.loss_notes(), *(extra_notes or [])],
            rt_valid=rt_valid if isinstance(rt_valid, bool) else None,
            scenario=dict(scenario or {"name": None, "hash": None}),
            stream=self.stream,
            provenance={"engine": engine, "host": host},
        )


def _opt_int(v: object) -> int | None:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError(f"expected an integer, got {v!r}")
    return v


def _channel_from_engine(raw: dict[str, Any]) -> Channel:
    if not isinstance(raw, dict):
        raise TypeError("channel is not an object")
    return Channel(
        name=str(raw["name"]),
        cpu=_opt_int(raw.get("cpu")),
        tid=_opt_int(raw.get("tid")),
        samples=int(raw["samples"]),
        missed=int(raw.get("missed") or 0),
        min_ns=_opt_int(raw.get("min_ns")),
        max_ns=_opt_int(raw.get("max_ns")),
        sum_ns=int(raw.get("sum_ns") or 0),
        max_at_ns=_opt_int(raw.get("max_at_ns")),
        hist=LogLinHistogram.from_json(raw["hist"]),
        windows_lost=int(raw.get("windows_lost") or 0),
        ring_lost=int(raw.get("ring_lost") or 0),
        cpu_use=raw["cpu_use"] if isinstance(raw.get("cpu_use"), dict) else None,
    )


# engine log codes that change what a stored run means (docs/engine.md, `--tee`)
_LOG_NOTES = {
    "tee_failed": "the engine's own copy of its output (--tee) is incomplete",
    "stdout_lost": "the engine's output stopped reaching the host; the rest of this run "
                   "comes from the copy the engine kept (--tee)",
    # the udp pinger that measured nothing says why it believes so (docs/probes/udp.md)
    "no_replies": "why no round trip was measured",
    "nothing_sent": "why no round trip was measured",
}


def log_notes(logs: list[dict[str, Any]]) -> list[str]:
    """Notes for the engine log records that a reader of the result must know."""
    out = []
    for rec in logs:
        what = _LOG_NOTES.get(str(rec.get("code")))
        if what is not None:
            out.append(f"{what}: {rec.get('msg')}" if rec.get("msg") else what)
    return out
