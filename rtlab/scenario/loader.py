# SPDX-License-Identifier: MIT
"""Reading and validating scenario files (TOML) into runnable `Scenario`s.

Everything is checked here, before anything starts or changes on the system:
unknown keys, types, durations, priorities, CPU expressions against the
online CPUs, overlapping shield sets, load kinds and parameters (through the
loads layer's parameter tables), loads named by phases and variants. The
first problem is raised as a one-line `UsageError` that names the file, the
line (when the key can be found in the text), the key path and what is
allowed. The file format is documented in docs/scenarios.md.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from rtlab.engine.ssh import SshTarget
from rtlab.errors import RtlabError, UsageError
from rtlab.fileio import read_text_input
from rtlab.probes.registry import two_ended
from rtlab.scenario.cpus import CpuExprError, expand
from rtlab.scenario.model import (
    DEFAULT_SNAPSHOT_NS,
    LoadSpec,
    Phase,
    ProbeSpec,
    ReflectorSpec,
    Scenario,
    ShieldSpec,
    TraceSpec,
    _check_range,
)
from rtlab.scenario.units import format_duration as fd
from rtlab.scenario.units import online_cpus, parse_duration
from rtlab.textfmt import shown

PROBE_POLICIES = ("fifo", "rr", "other", "deadline")
RT_POLICIES = ("fifo", "rr")
MIN_PHASE_NS = 1_000_000  # the engine's --duration minimum
MAX_PHASE_NS = 1000 * 3_600_000_000_000
DEFAULT_PHASE_NS = 10_000_000_000
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_PROBE_RE = re.compile(r"[a-z][a-z0-9-]{0,31}")
_OPTION_RE = re.compile(r"[a-z][a-z0-9_-]{0,63}")

TOP_KEYS = ("scenario", "shield", "load", "probe", "phase", "matrix", "trace", "reflector")
REFLECTOR_KEYS = ("target", "address", "cpu", "thread_priorities", "irqs")
REFLECTOR_IRQ_KEYS = ("match", "cpus")
TRACE_KEYS = ("enabled", "threshold", "buffer_kb")
TRACE_MIN_BUFFER_KB, TRACE_MAX_BUFFER_KB = 16, 256 * 1024
SCENARIO_KEYS = ("name", "description", "targets")
SHIELD_KEYS = ("user", "system", "cpuset", "tasks", "kthreads", "irqs",
               "default_smp_affinity", "sched_rt_runtime_us", "dma_latency",
               "thread_priorities")
THREAD_PRIORITY_KEYS = ("match", "policy", "priority")
THREAD_POLICIES = ("fifo", "rr", "other", "batch", "idle")
SHIELD_BOOLS = {"cpuset": True, "tasks": True, "kthreads": False, "irqs": False,
                "default_smp_affinity": False}
LOAD_KEYS = ("name", "kind", "cpus", "policy", "priority", "fallback")  # + the kind's parameters
PROBE_KEYS = ("name", "probe", "cpus", "policy", "priority", "interval", "options")
PROBE_RESERVED_OPTIONS = ("cpus", "policy", "priority", "interval", "duration", "output",
                          "interval_ns", "duration_ns")
PHASE_KEYS = ("name", "duration", "loads")
MATRIX_KEYS = ("variant",)
# Each variant is a run of its own (shield, loads, every phase): a matrix beyond this
# is a generator gone wrong, refused before its checks start (docs/scenarios.md, [matrix]).
MAX_VARIANTS = 1000
VARIANT_KEYS = ("name", "description", "shield", "loads")

# Used only when the loads layer (rtlab.loads) is not available in this build.
_FALLBACK_LOAD_KINDS = ("stress", "rt-competitor", "net", "osadl-mid")


class ScenarioError(UsageError):
    """A problem of a scenario file, one line "FILE[:LINE]: DETAIL" (exit 2), with its
    parts kept for machine-readable output (`rtlab scenarios check --json`)."""

    def __init__(self, source: str, line: int | None, detail: str,
                 message: str | None = None) -> None:
        where = f"{source}:{line}" if line else source
        super().__init__(message or f"{where}: {detail}")
        self.source, self.line, self.detail = source, line, detail


@dataclass(frozen=True)
class ScenarioFile:
    """A parsed file: its variants (one without a matrix), each a runnable Scenario."""

    name: str
    description: str
    source: str
    text: str
    variants: tuple[Scenario, ...]
    has_matrix: bool
    reflector: ReflectorSpec | None = None  # [reflector]: the udp reflector's board


class _Ctx:
    """Where we are: the file name and text, for errors with line numbers."""

    def __init__(self, source: str, text: str) -> None:
        self.source = source
        self.lines = text.splitlines()
        self.headers = self._headers()

    def _headers(self) -> list[tuple[int, str, bool]]:
        out = []
        rx = re.compile(r"^\s*(\[\[?)\s*([A-Za-z0-9_.\-]+)\s*\]\]?\s*(#.*)?$")
        for i, line in enumerate(self.lines):
            m = rx.match(line)
            if m:
                out.append((i, m.group(2), m.group(1) == "[["))
        return out

    def line_of(self, table: str | None, index: int | None, key: str | None) -> int | None:
        """1-based line of `key` in `[table]` (or the index-th `[[table]]`)."""
        if table is None:
            start, end = 0, self.headers[0][0] if self.headers else len(self.lines)
            if key is not None:
                for h, name, _ in self.headers:
                    if name == key:
                        return h + 1
        else:
            found = [h for h, name, arr in self.headers
                     if name == table and arr == (index is not None)]
            pos = index or 0
            if pos >= len(found):
                return None
            start = found[pos] + 1
            later = [h for h, name, _ in self.headers
                     if h >= start and not name.startswith(f"{table}.")]
            end = later[0] if later else len(self.lines)
            if key is None:
                return start
        key_rx = re.compile(rf"^\s*(\"?){re.escape(key)}\1\s*=") if key else None
        for i in range(start, end):
            if key_rx is not None and key_rx.match(self.lines[i]):
                return i + 1
        if table is not None and key is not None:
            for h, name, _ in self.headers:
                if start <= h < end and name == f"{table}.{key}":
                    return h + 1
            return start
        return None

    def fail(self, path: str, message: str, table: str | None = None,
             index: int | None = None, key: str | None = None) -> UsageError:
        return ScenarioError(self.source, self.line_of(table, index, key),
                             f"{path}: {message}")


def _type_name(v: object) -> str:
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string",
            list: "an array", dict: "a table"}.get(type(v), type(v).__name__)


def _check_keys(ctx: _Ctx, d: Mapping[str, Any], allowed: Sequence[str], path: str,
                table: str | None, index: int | None) -> None:
    for key in d:
        if key not in allowed:
            raise ctx.fail(f"{path}.{key}" if path else key,
                           f"unknown key; allowed: {', '.join(allowed)}", table, index, key)


def _table(ctx: _Ctx, doc: Mapping[str, Any], key: str) -> dict[str, Any]:
    v = doc.get(key, {})
    if not isinstance(v, dict):
        raise ctx.fail(key, f"must be a table [{key}], not {_type_name(v)}", None, None, key)
    return v


def _array(ctx: _Ctx, doc: Mapping[str, Any], key: str) -> list[dict[str, Any]]:
    v = doc.get(key, [])
    if not isinstance(v, list) or not all(isinstance(x, dict) for x in v):
        raise ctx.fail(key, f"must be an array of tables [[{key}]]", None, None, key)
    return v


class _Getter:
    """Typed access to one table of the file, failing with the key's line."""

    def __init__(self, ctx: _Ctx, d: Mapping[str, Any], path: str, table: str | None,
                 index: int | None) -> None:
        self.ctx, self.d, self.path, self.table, self.index = ctx, d, path, table, index

    def fail(self, key: str, message: str) -> UsageError:
        return self.ctx.fail(f"{self.path}.{key}", message, self.table, self.index, key)

    def str(self, key: str, default: str | None = None, pattern: re.Pattern[str] | None = None,
            what: str = "a string") -> str | None:
        v = self.d.get(key, default)
        if v is None:
            return None
        if not isinstance(v, str) or (pattern is not None and not pattern.fullmatch(v)):
            raise self.fail(key, f"{v!r} is not allowed; allowed: {what}")
        return v

    def bool(self, key: str, default: bool) -> bool:
        v = self.d.get(key, default)
        if not isinstance(v, bool):
            raise self.fail(key, f"{v!r} is not allowed; allowed: true or false")
        return v

    def int(self, key: str, lo: int, hi: int, default: int | None = None) -> int | None:
        v = self.d.get(key, default)
        if v is None:
            return None
        if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
            raise self.fail(key, f"{v!r} is out of range; allowed: an integer {lo}..{hi}")
        return v

    def duration(self, key: str, lo: int, hi: int, default: int | None = None) -> int | None:
        v = self.d.get(key)
        if v is None:
            return default
        if not isinstance(v, str):
            raise self.fail(key, f"{v!r} is not a duration; allowed: a string with a unit "
                            "ns, us, ms, s, m or h, e.g. \"10s\"")
        try:
            ns = parse_duration(v, "duration")
        except UsageError as exc:
            raise self.fail(key, f"{exc.message}; allowed: a number with a unit "
                            "ns, us, ms, s, m or h, e.g. \"10s\"") from None
        if not lo <= ns <= hi:
            raise self.fail(key, f"{v!r} is out of range; allowed: {fd(lo)}..{fd(hi)}")
        return ns

    def cpus(self, key: str, online: Sequence[int], default: object,
             user: Sequence[int] | None = None, system: Sequence[int] | None = None) -> list[int]:
        v = self.d.get(key, default)
        try:
            return expand(v, online, user, system)
        except CpuExprError as exc:
            raise self.fail(key, str(exc)) from None

    def names(self, key: str, known: Sequence[str], what: str) -> list[str] | None:
        v = self.d.get(key)
        if v is None:
            return None
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            raise self.fail(key, f"{v!r} is not allowed; allowed: an array of {what} names")
        for name in v:
            if name not in known:
                raise self.fail(key, f"no {what} named {name!r}; defined: "
                                + (", ".join(known) if known else "none"))
        return list(v)


# -------------------------------------------------------------------------------------------
# sections


def _shield(ctx: _Ctx, raw: Mapping[str, Any], online: Sequence[int], path: str,
            table: str | None, index: int | None) -> ShieldSpec:
    _check_keys(ctx, raw, SHIELD_KEYS, path, table, index)
    g = _Getter(ctx, raw, path, table, index)
    relative = ("others", "system", "user", "isolated")
    uraw, sraw = raw.get("user", "last"), raw.get("system", "others")
    if isinstance(uraw, str) and uraw.strip().lower() in relative:
        # user = "others": every CPU not in the system set, which must then be absolute
        if isinstance(sraw, str) and sraw.strip().lower() in relative:
            raise g.fail("user", f"{uraw!r} and system = {sraw!r} refer to each other; "
                         "allowed: give one of the two sets absolutely (e.g. \"last\", "
                         "\"first\", \"2-3\")")
        system = g.cpus("system", online, "others")
        user = [c for c in online if c not in system]
        if not user:
            raise g.fail("user", f"no CPU is left for the user set (system: "
                         f"{','.join(map(str, system))}); allowed: a non-empty set")
    else:
        user = g.cpus("user", online, "last")
        default_system = [c for c in online if c not in user] or list(online)
        system = g.cpus("system", online, default_system, user=user)
    flags = {k: g.bool(k, v) for k, v in SHIELD_BOOLS.items()}
    overlap = sorted(set(user) & set(system))
    # a shield that moves nothing (thread priorities, sysctls, the DMA latency hold only)
    # has no use for two sets: it works on a one-CPU target too
    moves = any(flags[k] for k in ("cpuset", "tasks", "irqs", "default_smp_affinity"))
    if overlap and moves:
        raise g.fail("system", f"system CPUs and user CPUs overlap on CPU "
                     f"{','.join(map(str, overlap))}; allowed: disjoint sets (a shield needs "
                     f"at least 2 CPUs; online: {','.join(map(str, online))})")
    rt = g.int("sched_rt_runtime_us", -1, 1_000_000)
    dma = g.int("dma_latency", 0, 2_147_483_647)
    return ShieldSpec(tuple(system), tuple(user), sched_rt_runtime_us=rt, dma_latency=dma,
                      thread_priorities=_thread_priorities(g, raw.get("thread_priorities")),
                      **flags)


def _thread_priorities(g: _Getter, raw: object) -> tuple[tuple[str, str, int], ...]:
    """[shield] thread_priorities = [{match = "irq/.*-eth0", policy = "fifo", priority = 99}]"""
    if raw is None:
        return ()
    allowed = ('an array of tables {match = "<regex of thread names>", policy = '
               f'"{"|".join(THREAD_POLICIES)}", priority = <int>}}')
    if not isinstance(raw, list) or not all(isinstance(x, dict) for x in raw):
        raise g.fail("thread_priorities", f"{raw!r} is not allowed; allowed: {allowed}")
    out = []
    for k, item in enumerate(raw):
        unknown = sorted(set(item) - set(THREAD_PRIORITY_KEYS))
        if unknown:
            raise g.fail(f"thread_priorities[{k}]", f"unknown key {unknown[0]!r}; allowed: "
                         + ", ".join(THREAD_PRIORITY_KEYS))
        match, policy, prio = item.get("match"), item.get("policy", "fifo"), item.get("priority")
        if not isinstance(match, str) or not match:
            raise g.fail(f"thread_priorities[{k}].match",
                         f"{match!r} is not allowed; allowed: a regular expression")
        try:
            re.compile(match)
        except re.error as exc:
            raise g.fail(f"thread_priorities[{k}].match",
                         f"{match!r} is not a regular expression ({exc})") from None
        if policy not in THREAD_POLICIES:
            raise g.fail(f"thread_priorities[{k}].policy",
                         f"{policy!r} is not allowed; allowed: {', '.join(THREAD_POLICIES)}")
        lo, hi = (1, 99) if policy in ("fifo", "rr") else (0, 0)
        if prio is None:
            prio = 99 if policy in ("fifo", "rr") else 0
        if isinstance(prio, bool) or not isinstance(prio, int) or not lo <= prio <= hi:
            raise g.fail(f"thread_priorities[{k}].priority",
                         f"{prio!r} is out of range for {policy}; allowed: an integer {lo}..{hi}")
        out.append((match, policy, prio))
    return tuple(out)


def _trace(ctx: _Ctx, raw: Mapping[str, Any]) -> TraceSpec:
    _check_keys(ctx, raw, TRACE_KEYS, "trace", "trace", None)
    g = _Getter(ctx, raw, "trace", "trace", None)
    default = TraceSpec()
    threshold = g.duration("threshold", 1_000, 3_600_000_000_000, default.threshold_ns)
    buffer_kb = g.int("buffer_kb", TRACE_MIN_BUFFER_KB, TRACE_MAX_BUFFER_KB, default.buffer_kb)
    assert threshold is not None and buffer_kb is not None
    return TraceSpec(enabled=g.bool("enabled", True), threshold_ns=threshold,
                     buffer_kb=buffer_kb)


def _load_kinds() -> tuple[Sequence[str], Any]:
    """The loads layer's table of kinds and its validator, or the fallback list."""
    try:
        from rtlab.loads import kinds as lk
    except ImportError:  # pragma: no cover - the loads layer is part of rtlab
        return _FALLBACK_LOAD_KINDS, None
    return tuple(lk.LOAD_KINDS), lk


def _ncpus(params: dict[str, Any], n: int) -> dict[str, Any]:
    """Integer parameters given as "ncpus": the number of CPUs the load is placed on."""
    return {k: (n if v == "ncpus" else v) for k, v in params.items()}


def _loads(ctx: _Ctx, raws: list[dict[str, Any]], online: Sequence[int],
           shield: ShieldSpec | None) -> list[LoadSpec]:
    kinds, lk = _load_kinds()
    out: list[LoadSpec] = []
    user = list(shield.user) if shield else None
    system = list(shield.system) if shield else None
    for i, raw in enumerate(raws):
        path = f"load[{i}]"
        g = _Getter(ctx, raw, path, "load", i)
        kind = raw.get("kind")
        if not isinstance(kind, str) or kind not in kinds:
            raise ctx.fail(f"{path}.kind", f"{kind!r} is not a load kind; allowed: "
                           + ", ".join(kinds), "load", i, "kind" if "kind" in raw else None)
        name = g.str("name", kind, _NAME_RE, "a name of letters, digits, _ . -")
        assert name is not None
        if any(ld.name == name for ld in out):
            raise g.fail("name", f"duplicate load name {name!r}; give each [[load]] a "
                         "unique name")
        cpus = g.cpus("cpus", online, "all", user, system) if "cpus" in raw else None
        params = {k: v for k, v in raw.items() if k not in LOAD_KEYS}
        n = len(cpus) if cpus is not None else len(online)
        params = _ncpus(params, n)
        policy = raw.get("policy")
        priority = raw.get("priority")
        fallback = raw.get("fallback")
        if "fallback" in raw and lk is not None:
            from rtlab.loads.fallback import check_fallback

            why = check_fallback(kind, fallback)
            if why is not None:
                raise g.fail("fallback", why)
        spec = LoadSpec(name, kind, params, tuple(cpus) if cpus is not None else None,
                        policy, priority, fallback)
        if lk is not None:
            errors = lk.validate_spec(spec.to_spec(), list(online))
            if errors:
                raise _load_error(ctx, path, i, errors[0], raw)
        out.append(spec)
    return out


def _load_error(ctx: _Ctx, path: str, index: int, error: str, raw: Mapping[str, Any]
                ) -> UsageError:
    """Map a loads-layer error ("stress.cpu: ..." / "kind: ...") to the key's line."""
    head, _, rest = error.partition(": ")
    key = head.rsplit(".", 1)[-1] if "." in head else None
    if key not in raw:
        m = re.search(r"unknown key '([^']+)'", error)
        key = m.group(1) if m else None
    if key is None or key not in raw:
        return ctx.fail(path, error, "load", index, None)
    return ctx.fail(f"{path}.{key}", rest or error, "load", index, key)


def _probes(ctx: _Ctx, raws: list[dict[str, Any]], online: Sequence[int],
            shield: ShieldSpec | None) -> list[ProbeSpec]:
    out: list[ProbeSpec] = []
    user = list(shield.user) if shield else None
    system = list(shield.system) if shield else None
    if not raws:
        raws = [{}]
    for i, raw in enumerate(raws):
        path = f"probe[{i}]"
        _check_keys(ctx, raw, PROBE_KEYS, path, "probe", i)
        g = _Getter(ctx, raw, path, "probe", i)
        probe = g.str("probe", "timer", _PROBE_RE, "a probe name such as \"timer\"")
        assert probe is not None
        label = g.str("name", probe, _NAME_RE, "a name of letters, digits, _ . -")
        if any(p.label == label for p in out):
            raise g.fail("name", f"duplicate probe name {label!r}; give each [[probe]] a "
                         "unique name")
        cpus = g.cpus("cpus", online, "user" if shield else "all", user, system)
        policy = g.str("policy", "fifo", None)
        if policy not in PROBE_POLICIES:
            raise g.fail("policy", f"{policy!r} is not allowed; allowed: "
                         + ", ".join(PROBE_POLICIES))
        if policy in RT_POLICIES:
            priority = g.int("priority", 1, 99, 99)
        else:
            priority = g.int("priority", 0, 0, 0)
        interval = g.duration("interval", 1_000, 10_000_000_000, 1_000_000)
        options: dict[str, Any] = {"cpus": cpus, "policy": policy, "priority": priority,
                                   "interval_ns": interval,
                                   "snapshot_interval_ns": DEFAULT_SNAPSHOT_NS}
        extra = raw.get("options", {})
        if not isinstance(extra, dict):
            raise g.fail("options", "must be a table of engine options, e.g. "
                         "options = { window = \"100ms\" }")
        for key, value in extra.items():
            opath = f"{path}.options.{key}"
            if not _OPTION_RE.fullmatch(key) or key in PROBE_RESERVED_OPTIONS:
                raise ctx.fail(opath, "not allowed here; allowed: engine options of "
                               f"`rtlab-probe {probe} --help` other than "
                               + ", ".join(PROBE_RESERVED_OPTIONS[:6])
                               + " (use the probe's own keys)", "probe", i, "options")
            if isinstance(value, bool | int | str) and not isinstance(value, float):
                pass
            else:
                raise ctx.fail(opath, f"{value!r} is not allowed; allowed: a string, an "
                               "integer or a boolean", "probe", i, "options")
            k = key.replace("-", "_")
            if k == "snapshot_interval" and isinstance(value, str):
                options["snapshot_interval_ns"] = _Getter(
                    ctx, {key: value}, f"{path}.options", "probe", i).duration(
                        key, 10_000_000, 3_600_000_000_000)
                continue
            options[k] = value if isinstance(value, bool | str) else str(value)
            ends = two_ended(probe)  # a two-ended probe's options the host acts on
            allowed = ends.host_choices.get(k) if ends is not None else None
            if allowed and options[k] not in allowed:
                raise ctx.fail(opath, f"{value!r} is not allowed; allowed: "
                               + ", ".join(allowed), "probe", i, "options")
        out.append(ProbeSpec(probe, options, label))
    return out


def _phases(ctx: _Ctx, raws: list[dict[str, Any]], loads: list[LoadSpec]
            ) -> list[tuple[str, int, list[str]]]:
    names = [ld.name for ld in loads]
    if not raws:
        return [("main", DEFAULT_PHASE_NS, names)]
    out: list[tuple[str, int, list[str]]] = []
    for i, raw in enumerate(raws):
        path = f"phase[{i}]"
        _check_keys(ctx, raw, PHASE_KEYS, path, "phase", i)
        g = _Getter(ctx, raw, path, "phase", i)
        if "name" not in raw:
            raise ctx.fail(f"{path}.name", "missing; every [[phase]] needs a name",
                           "phase", i, None)
        name = g.str("name", None, _NAME_RE, "a name of letters, digits, _ . -")
        assert name is not None
        if any(n == name for n, _, _ in out):
            raise g.fail("name", f"duplicate phase name {name!r}")
        if "duration" not in raw:
            raise ctx.fail(f"{path}.duration", "missing; allowed: a duration such as "
                           "\"10s\" or \"10m\"", "phase", i, None)
        dur = g.duration("duration", MIN_PHASE_NS, MAX_PHASE_NS)
        assert dur is not None
        active = g.names("loads", names, "load") or []
        out.append((name, dur, active))
    return out


def _check_matrix_size(ctx: _Ctx, count: int) -> None:
    """At most MAX_VARIANTS variants; the error points at the first one beyond."""
    if count > MAX_VARIANTS:
        raise ctx.fail("matrix.variant", f"{count} variants; allowed: at most {MAX_VARIANTS} "
                       "per file (split the matrix into several files)",
                       "matrix.variant", MAX_VARIANTS, None)


def _variants(ctx: _Ctx, matrix: Mapping[str, Any], loads: list[LoadSpec]
              ) -> list[dict[str, Any]]:
    _check_keys(ctx, matrix, MATRIX_KEYS, "matrix", "matrix", None)
    raws = matrix.get("variant", [])
    if not isinstance(raws, list) or not all(isinstance(x, dict) for x in raws) or not raws:
        raise ctx.fail("matrix.variant", "must be one or more [[matrix.variant]] tables",
                       None, None, "matrix.variant")
    _check_matrix_size(ctx, len(raws))
    out: list[dict[str, Any]] = []
    seen: dict[str, int] = {}  # name -> index: duplicates found in linear time
    names = [ld.name for ld in loads]
    for i, raw in enumerate(raws):
        path = f"matrix.variant[{i}]"
        _check_keys(ctx, raw, VARIANT_KEYS, path, "matrix.variant", i)
        g = _Getter(ctx, raw, path, "matrix.variant", i)
        if "name" not in raw:
            raise ctx.fail(f"{path}.name", "missing; every variant needs a name",
                           "matrix.variant", i, None)
        name = g.str("name", None, _NAME_RE, "a name of letters, digits, _ . -")
        assert name is not None
        if name in seen:
            raise g.fail("name", f"duplicate variant name {name!r} (also "
                         f"matrix.variant[{seen[name]}])")
        seen[name] = i
        shield = raw.get("shield", True)
        if not isinstance(shield, bool | dict):
            raise g.fail("shield", f"{shield!r} is not allowed; allowed: false (no shield), "
                         "true (the [shield] table) or a table of [shield] keys")
        out.append({"name": name, "description": g.str("description", ""),
                    "shield": shield, "loads": g.names("loads", names, "load"),
                    "index": i})
    return out


# -------------------------------------------------------------------------------------------
# the file


def _targets(ctx: _Ctx, head: Mapping[str, Any]) -> list[str]:
    """`[scenario] targets`: the boards the scenario is measured on (docs/boards.md)."""

    raw = head.get("targets", [])
    g = _Getter(ctx, head, "scenario", "scenario", None)
    if not isinstance(raw, list) or not all(isinstance(t, str) for t in raw):
        raise g.fail("targets", f"{raw!r} is not allowed; allowed: a list of "
                     '"[USER@]HOST[:PORT]" strings')
    for t in raw:
        try:
            SshTarget.parse(t)
        except UsageError as exc:
            raise g.fail("targets", exc.message) from None
    if len(set(raw)) != len(raw):
        raise g.fail("targets", "a board is named twice")
    return list(raw)


def _reflector(ctx: _Ctx, raw: Mapping[str, Any]) -> ReflectorSpec:
    """[reflector]: the board that runs the udp reflector, its address on the link to
    the pinging board, and the seed's priorities there (docs/scenarios.md#reflector)."""
    _check_keys(ctx, raw, REFLECTOR_KEYS, "reflector", "reflector", None)
    g = _Getter(ctx, raw, "reflector", "reflector", None)
    target = raw.get("target")
    if not isinstance(target, str):
        raise g.fail("target", "missing or not a string; the reflector's board, "
                     "\"[USER@]HOST[:PORT]\" or an ssh alias")
    try:
        SshTarget.parse(target)
    except UsageError as exc:
        raise g.fail("target", exc.message) from None
    address = raw.get("address")
    if address is not None:
        from rtlab.runner.netpeer import parse_peer

        if not isinstance(address, str):
            raise g.fail("address", f"{address!r} is not allowed; allowed: \"ADDR:PORT\", "
                         "the reflector board's address on the link and a port")
        try:
            parse_peer(address)
        except UsageError as exc:
            raise g.fail("address", exc.message) from None
    cpu = raw.get("cpu")
    if cpu is not None and (isinstance(cpu, bool) or not isinstance(cpu, int) or cpu < 0):
        raise g.fail("cpu", f"{cpu!r} is not allowed; allowed: a CPU number of the board")
    irqs_raw = raw.get("irqs", [])
    if not isinstance(irqs_raw, list) or not all(isinstance(i, dict) for i in irqs_raw):
        raise g.fail("irqs", f"{irqs_raw!r} is not allowed; allowed: a list of "
                     '{match = "eth1", cpus = "0"} tables')
    from rtlab.system.shield import irq_move_problem

    irqs = []
    for k, item in enumerate(irqs_raw):
        unknown = sorted(set(item) - set(REFLECTOR_IRQ_KEYS))
        if unknown:
            raise g.fail(f"irqs[{k}]", f"unknown key {unknown[0]!r}; allowed: "
                         + ", ".join(REFLECTOR_IRQ_KEYS))
        match, cpus = item.get("match"), item.get("cpus")
        why = irq_move_problem(match, cpus)
        if why == "shape":
            raise g.fail(f"irqs[{k}]", "expected match = \"PATTERN\" (an IRQ name from its "
                         "start) and cpus = \"LIST\", e.g. {match = \"eth1\", cpus = \"0\"}")
        if why is not None:
            raise g.fail(f"irqs[{k}].match", why)
        irqs.append((str(match), str(cpus)))
    return ReflectorSpec(target, address, cpu,
                         _thread_priorities(g, raw.get("thread_priorities")), tuple(irqs))


def read_scenario_text(path: Path | str) -> str:
    """A scenario file's text, read the one safe way (rtlab.fileio: a regular file of at
    most 4 MiB, UTF-8 text; anything else is one line, exit 2)."""
    try:
        text = read_text_input(path, "scenario file")
    except RtlabError as exc:  # one kind of error for `rtlab scenarios check --json`
        raise ScenarioError(str(path), None, exc.one_line(), exc.one_line()) from None
    if not text.strip():  # not "the defaults": a file emptied by mistake runs nothing
        raise ScenarioError(str(path), None, "the scenario file is empty",
                            f"scenario file {shown(str(path), 200)} is empty: nothing to run")
    return text


def toml_document(text: str, source: str) -> dict[str, Any]:
    """The TOML document of a scenario text; ScenarioError (one line, with the line where
    the parser knows it) when it is not valid TOML or nests too deeply to read."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        m = re.search(r"\(at line (\d+), column (\d+)\)", str(exc))
        msg = re.sub(r"\s*\(at line \d+, column \d+\)", "", str(exc))
        raise ScenarioError(source, int(m.group(1)) if m else None,
                            f"not valid TOML: {msg}") from None
    except RecursionError:
        raise ScenarioError(source, None, "arrays or tables nested too deeply to read "
                            "(a scenario needs a few levels)") from None


def declared_targets(path: Path | str) -> list[str]:
    """The boards a scenario file names (`[scenario] targets`), checked; [] if none."""
    p = Path(path)
    text = read_scenario_text(p)
    ctx = _Ctx(str(p), text)
    try:
        doc = toml_document(text, str(p))
    except ScenarioError:
        return []  # the full parse says what is wrong, with the line
    head = doc.get("scenario")
    return _targets(ctx, head) if isinstance(head, dict) else []


def parse_text(text: str, source: str = "<scenario>", online: Sequence[int] | None = None,
               default_name: str | None = None) -> ScenarioFile:
    """Parse and validate a scenario text; UsageError naming source:line on any problem."""
    ctx = _Ctx(source, text)
    # before the TOML parse: a file of 200,000 [[matrix.variant]] headers fails at once
    _check_matrix_size(ctx, sum(1 for _, n, arr in ctx.headers if arr and n == "matrix.variant"))
    doc = toml_document(text, source)
    cpus = sorted(online) if online is not None else online_cpus()
    _check_keys(ctx, doc, TOP_KEYS, "", None, None)
    head = _table(ctx, doc, "scenario")
    _check_keys(ctx, head, SCENARIO_KEYS, "scenario", "scenario", None)
    g = _Getter(ctx, head, "scenario", "scenario", None)
    name = g.str("name", default_name or "unnamed", _NAME_RE,
                 "a name of letters, digits, _ . -")
    description = g.str("description", "") or ""
    _targets(ctx, head)
    assert name is not None

    shield_raw = _table(ctx, doc, "shield")
    shield = (_shield(ctx, shield_raw, cpus, "shield", "shield", None)
              if "shield" in doc else None)
    trace = _trace(ctx, _table(ctx, doc, "trace")) if "trace" in doc else None
    loads = _loads(ctx, _array(ctx, doc, "load"), cpus, shield)
    probes = _probes(ctx, _array(ctx, doc, "probe"), cpus, shield)
    phases = _phases(ctx, _array(ctx, doc, "phase"), loads)
    variants = (_variants(ctx, _table(ctx, doc, "matrix"), loads) if "matrix" in doc
                else [{"name": None, "description": "", "shield": True, "loads": None,
                       "index": None}])

    out: list[Scenario] = []
    for v in variants:
        vshield: ShieldSpec | None = shield
        if v["shield"] is False:
            vshield = None
        elif isinstance(v["shield"], dict):
            merged = {**shield_raw, **v["shield"]}
            vshield = _shield(ctx, merged, cpus, f"matrix.variant[{v['index']}].shield",
                              "matrix.variant", v["index"])
        vprobes, vloads = probes, loads
        if vshield is not shield:  # CPU words like "user" follow the variant's shield
            vprobes = _probes(ctx, _array(ctx, doc, "probe"), cpus, vshield)
            vloads = _loads(ctx, _array(ctx, doc, "load"), cpus, vshield)
        enabled = v["loads"]
        built: list[Phase] = []
        for pname, dur, active in phases:
            act = tuple(n for n in active if enabled is None or n in enabled)
            ps = [ProbeSpec(p.name, {**p.options, "duration_ns": dur}, p.label)
                  for p in vprobes]
            built.append(Phase(pname, ps[0], dur, "+".join(act) if act else "idle",
                               act, tuple(ps[1:])))
        used = {n for p in built for n in p.loads}
        out.append(Scenario(
            name=name, description=description, phases=tuple(built),
            loads=tuple(ld for ld in vloads if ld.name in used), shield=vshield,
            variant=v["name"], source=source, text=text, trace=trace))
    reflector = (_reflector(ctx, _table(ctx, doc, "reflector")) if "reflector" in doc
                 else None)
    return ScenarioFile(name, description, source, text, tuple(out), "matrix" in doc,
                        reflector)


def load_file(path: Path | str, online: Sequence[int] | None = None) -> ScenarioFile:
    p = Path(path)
    return parse_text(read_scenario_text(p), str(p), online, default_name=p.stem)


# -------------------------------------------------------------------------------------------
# command-line adjustments (validated like the file)


def scale_durations(sc: Scenario, total_ns: int) -> Scenario:
    """`--duration`: the phases keep their proportions and add up to `total_ns`."""
    durs = [p.duration_ns or DEFAULT_PHASE_NS for p in sc.phases]
    whole = sum(durs)
    new: list[int] = []
    for i, d in enumerate(durs):
        if i == len(durs) - 1:
            ns = total_ns - sum(new)
        else:
            ns = total_ns * d // whole
            ns -= ns % 1_000_000 if ns > 1_000_000_000 else 0
        new.append(ns)
    if min(new) < MIN_PHASE_NS:
        raise UsageError(f"--duration is too short for {len(durs)} phases: each phase needs "
                         "at least 1ms")
    phases = tuple(
        replace(p, duration_ns=ns,
                probe=with_options(p.probe, duration_ns=ns),
                more_probes=tuple(with_options(q, duration_ns=ns) for q in p.more_probes))
        for p, ns in zip(sc.phases, new, strict=True))
    return replace(sc, phases=phases)


def with_options(p: ProbeSpec, **opts: Any) -> ProbeSpec:
    options = dict(p.options)
    for k, v in opts.items():
        if v is None:
            options.pop(k, None)
        else:
            options[k] = v
    return ProbeSpec(p.name, options, p.label)


def override_probes(sc: Scenario, **opts: Any) -> Scenario:
    """Command-line probe options (cpus, interval_ns, ...) replace the file's, for the
    measured (first) probe of every phase. Keys whose value is None are left alone."""
    given = {k: v for k, v in opts.items() if v is not None}
    if not given:
        return sc
    phases = tuple(replace(p, probe=with_options(p.probe, **given)) for p in sc.phases)
    return replace(sc, phases=phases)


def validate_probes(sc: Scenario) -> None:
    """The measured probes after command-line overrides: policy/priority and ranges."""

    for phase in sc.phases:
        o = phase.probe.options
        policy, priority = o.get("policy", "fifo"), o.get("priority", 99)
        if policy in RT_POLICIES and not 1 <= int(priority) <= 99:
            raise UsageError(f"--priority {priority} out of range for {policy} (1-99)")
        if policy not in RT_POLICIES and int(priority) != 0:
            raise UsageError(f"--priority {priority} out of range for {policy} (0)")
        _check_range("--interval", int(o.get("interval_ns", 1_000_000)), 1_000,
                     10_000_000_000)
        if o.get("threshold_ns") is not None:
            _check_range("--stop-threshold", int(o["threshold_ns"]), 1, 3_600_000_000_000)
