# SPDX-License-Identifier: MIT
"""The sections of a scenario file ([shield], [trace], [[load]], [[probe]], [[phase]],
[matrix], [scenario] targets, [reflector]), each checked and resolved into the model
(docs/scenarios.md)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from rtlab.engine.ssh import SshTarget
from rtlab.errors import UsageError
from rtlab.netaddr import parse_peer
from rtlab.probes.registry import DEFAULT_PROBE, two_ended
from rtlab.scenario.fields import Ctx, Getter, check_keys
from rtlab.scenario.model import (
    DEFAULT_SNAPSHOT_NS,
    LoadSpec,
    ProbeSpec,
    ReflectorSpec,
    ShieldSpec,
    TraceSpec,
)
from rtlab.system.shield_knobs import KNOB_NAMES, check_knob

PROBE_POLICIES = ("fifo", "rr", "other", "deadline")
RT_POLICIES = ("fifo", "rr")
MIN_PHASE_NS = 1_000_000  # the engine's --duration minimum
MAX_PHASE_NS = 1000 * 3_600_000_000_000
DEFAULT_PHASE_NS = 10_000_000_000
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_PROBE_RE = re.compile(r"[a-z][a-z0-9-]{0,31}")
_OPTION_RE = re.compile(r"[a-z][a-z0-9_-]{0,63}")

TOP_KEYS = ("scenario", "shield", "load", "probe", "phase", "matrix", "trace", "reflector")
REFLECTOR_KEYS = ("target", "address", "cpu", "thread_priorities", "irqs")
REFLECTOR_IRQ_KEYS = ("match", "cpus")
TRACE_KEYS = ("enabled", "threshold", "buffer_kb", "kernel_split")
TRACE_MIN_BUFFER_KB, TRACE_MAX_BUFFER_KB = 16, 256 * 1024
SCENARIO_KEYS = ("name", "description", "targets")
SHIELD_KEYS = ("user", "system", "cpuset", "tasks", "kthreads", "irqs",
               "default_smp_affinity", "sched_rt_runtime_us", "dma_latency",
               "thread_priorities", *KNOB_NAMES)
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


def shield(ctx: Ctx, raw: Mapping[str, Any], online: Sequence[int], path: str,
            table: str | None, index: int | None) -> ShieldSpec:
    check_keys(ctx, raw, SHIELD_KEYS, path, table, index)
    g = Getter(ctx, raw, path, table, index)
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
    knobs = {}
    for name in KNOB_NAMES:
        try:
            knobs[name] = check_knob(name, raw.get(name))
        except ValueError as exc:
            raise g.fail(name, str(exc)) from None
    return ShieldSpec(tuple(system), tuple(user), sched_rt_runtime_us=rt, dma_latency=dma,
                      thread_priorities=thread_priorities(g, raw.get("thread_priorities")),
                      **flags, **knobs)


def thread_priorities(g: Getter, raw: object) -> tuple[tuple[str, str, int], ...]:
    """[shield] thread_priorities = [{match = "irq/.*-eth0", policy = "fifo", priority = 99}]"""
    if raw is None:
        return ()
    allowed = ('an array of tables {match = "<regex of thread names>", policy = '
               f'"{"|".join(THREAD_POLICIES)}", priority = <int>}}')
    out = []
    for k, item in enumerate(g.tables("thread_priorities", raw, allowed)):
        g.known_keys(f"thread_priorities[{k}]", item, THREAD_PRIORITY_KEYS)
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


def trace(ctx: Ctx, raw: Mapping[str, Any]) -> TraceSpec:
    check_keys(ctx, raw, TRACE_KEYS, "trace", "trace", None)
    g = Getter(ctx, raw, "trace", "trace", None)
    default = TraceSpec()
    threshold = g.duration("threshold", 1_000, 3_600_000_000_000, default.threshold_ns)
    buffer_kb = g.int("buffer_kb", TRACE_MIN_BUFFER_KB, TRACE_MAX_BUFFER_KB, default.buffer_kb)
    assert threshold is not None and buffer_kb is not None
    return TraceSpec(enabled=g.bool("enabled", True), threshold_ns=threshold,
                     buffer_kb=buffer_kb, kernel_split=g.bool("kernel_split", False))


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


def loads(ctx: Ctx, raws: list[dict[str, Any]], online: Sequence[int],
           shield: ShieldSpec | None) -> list[LoadSpec]:
    kinds, lk = _load_kinds()
    out: list[LoadSpec] = []
    user = list(shield.user) if shield else None
    system = list(shield.system) if shield else None
    for i, raw in enumerate(raws):
        path = f"load[{i}]"
        g = Getter(ctx, raw, path, "load", i)
        kind = raw.get("kind")
        if not isinstance(kind, str) or kind not in kinds:
            raise ctx.fail(f"{path}.kind", f"{kind!r} is not a load kind; allowed: "
                           + ", ".join(kinds), "load", i, "kind" if "kind" in raw else None)
        name = g.str("name", kind, NAME_RE, "a name of letters, digits, _ . -")
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


def _load_error(ctx: Ctx, path: str, index: int, error: str, raw: Mapping[str, Any]
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


def probes(ctx: Ctx, raws: list[dict[str, Any]], online: Sequence[int],
            shield: ShieldSpec | None) -> list[ProbeSpec]:
    out: list[ProbeSpec] = []
    user = list(shield.user) if shield else None
    system = list(shield.system) if shield else None
    if not raws:
        raws = [{}]
    for i, raw in enumerate(raws):
        path = f"probe[{i}]"
        check_keys(ctx, raw, PROBE_KEYS, path, "probe", i)
        g = Getter(ctx, raw, path, "probe", i)
        probe = g.str("probe", DEFAULT_PROBE, _PROBE_RE,
                      f"a probe name such as \"{DEFAULT_PROBE}\"")
        assert probe is not None
        label = g.str("name", probe, NAME_RE, "a name of letters, digits, _ . -")
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
                options["snapshot_interval_ns"] = Getter(
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


def named_entry(ctx: Ctx, raw: Mapping[str, Any], keys: Sequence[str], table: str, i: int,
                what: str) -> tuple[Getter, str, str]:
    """Entry i of an array of tables ([[phase]], [[matrix.variant]]) that must have a name:
    its keys checked; its getter, key path and name."""
    path = f"{table}[{i}]"
    check_keys(ctx, raw, keys, path, table, i)
    g = Getter(ctx, raw, path, table, i)
    if "name" not in raw:
        raise ctx.fail(f"{path}.name", f"missing; every {what} needs a name", table, i, None)
    name = g.str("name", None, NAME_RE, "a name of letters, digits, _ . -")
    assert name is not None
    return g, path, name


def phases(ctx: Ctx, raws: list[dict[str, Any]], loads: list[LoadSpec]
            ) -> list[tuple[str, int, list[str]]]:
    names = [ld.name for ld in loads]
    if not raws:
        return [("main", DEFAULT_PHASE_NS, names)]
    out: list[tuple[str, int, list[str]]] = []
    for i, raw in enumerate(raws):
        g, path, name = named_entry(ctx, raw, PHASE_KEYS, "phase", i, "[[phase]]")
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


def check_matrix_size(ctx: Ctx, count: int) -> None:
    """At most MAX_VARIANTS variants; the error points at the first one beyond."""
    if count > MAX_VARIANTS:
        raise ctx.fail("matrix.variant", f"{count} variants; allowed: at most {MAX_VARIANTS} "
                       "per file (split the matrix into several files)",
                       "matrix.variant", MAX_VARIANTS, None)


def variants(ctx: Ctx, matrix: Mapping[str, Any], loads: list[LoadSpec]
              ) -> list[dict[str, Any]]:
    check_keys(ctx, matrix, MATRIX_KEYS, "matrix", "matrix", None)
    raws = matrix.get("variant", [])
    if not isinstance(raws, list) or not all(isinstance(x, dict) for x in raws) or not raws:
        raise ctx.fail("matrix.variant", "must be one or more [[matrix.variant]] tables",
                       None, None, "matrix.variant")
    check_matrix_size(ctx, len(raws))
    out: list[dict[str, Any]] = []
    seen: dict[str, int] = {}  # name -> index: duplicates found in linear time
    names = [ld.name for ld in loads]
    for i, raw in enumerate(raws):
        g, _, name = named_entry(ctx, raw, VARIANT_KEYS, "matrix.variant", i, "variant")
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


def targets(ctx: Ctx, head: Mapping[str, Any]) -> list[str]:
    """`[scenario] targets`: the boards the scenario is measured on (docs/boards.md)."""

    raw = head.get("targets", [])
    g = Getter(ctx, head, "scenario", "scenario", None)
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


def reflector(ctx: Ctx, raw: Mapping[str, Any]) -> ReflectorSpec:
    """[reflector]: the board that runs the udp reflector, its address on the link to
    the pinging board, and the seed's priorities there (docs/scenarios.md#reflector)."""
    check_keys(ctx, raw, REFLECTOR_KEYS, "reflector", "reflector", None)
    g = Getter(ctx, raw, "reflector", "reflector", None)
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
    irqs_raw = g.tables("irqs", raw.get("irqs", []),
                        'a list of {match = "eth1", cpus = "0"} tables')
    from rtlab.system.shield_plan import irq_move_problem

    irqs = []
    for k, item in enumerate(irqs_raw):
        g.known_keys(f"irqs[{k}]", item, REFLECTOR_IRQ_KEYS)
        match, cpus = item.get("match"), item.get("cpus")
        why = irq_move_problem(match, cpus)
        if why == "shape":
            raise g.fail(f"irqs[{k}]", "expected match = \"PATTERN\" (an IRQ name from its "
                         "start) and cpus = \"LIST\", e.g. {match = \"eth1\", cpus = \"0\"}")
        if why is not None:
            raise g.fail(f"irqs[{k}].match", why)
        irqs.append((str(match), str(cpus)))
    return ReflectorSpec(target, address, cpu,
                         thread_priorities(g, raw.get("thread_priorities")), tuple(irqs))

