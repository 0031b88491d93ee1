# SPDX-License-Identifier: MIT
"""Text and HTML of the kernel's own split stored with a traced run (`rtlab run --trace
--kernel-split`; a phase's `trace["kernel_split"]`, docs/results.md): one line per CPU
for `rtlab run`, the worst activations' rows for `rtlab spikes`, a small HTML block."""

from __future__ import annotations

from collections.abc import Mapping
from html import escape
from typing import Any

from rtlab.textfmt import human

HEAD = "kernel's view (timerlat)"


def _cpus(split: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    cpus = split.get("cpus") or {}
    return sorted(((str(c), d) for c, d in cpus.items() if isinstance(d, dict)),
                  key=lambda kv: int(kv[0]) if kv[0].isdigit() else -1)


def _p99_max(stats: Any) -> str:
    if not isinstance(stats, dict) or not stats.get("count"):
        return "none recorded"
    return f"p99 {human(stats.get('p99'))} max {human(stats.get('max'))}"


def _worst(d: Mapping[str, Any]) -> dict[str, Any] | None:
    worst = [w for w in d.get("worst") or [] if isinstance(w, dict)]
    return max(worst, key=lambda w: int(w.get("latency_ns") or 0), default=None)


def cpu_line(cpu: str, d: Mapping[str, Any], threshold_ns: Any = None) -> str:
    """'kernel's view (timerlat) CPU1: IRQ p99 X max Y, thread p99 X max Y; worst: IRQ
    late by .. (..), thread late by .. (blocked by task T[pid] ..)'."""
    line = f"{HEAD} CPU{cpu}: IRQ {_p99_max(d.get('irq'))}, thread {_p99_max(d.get('thread'))}"
    if isinstance(d.get("user"), dict):
        line += f", return-to-user {_p99_max(d.get('user'))}"
    w = _worst(d)
    if w is not None:
        line += f"; worst: {w.get('summary', '')}"
    elif threshold_ns is not None:
        line += f"; none above {human(threshold_ns)}"
    return line


def culprit_line(cpu: str, d: Mapping[str, Any], threshold_ns: Any = None) -> str:
    """'CPU1: 27 activations above 10 ms: 26 task rtlab-spin[219], 1 interrupts off'."""
    n = int(d.get("splits") or 0)
    head = f"CPU{cpu}: {n} activation{'' if n == 1 else 's'} above {human(threshold_ns)}"
    culprits = d.get("culprits") or {}
    if not culprits:
        return head
    return head + ": " + ", ".join(f"{v} {k}" for k, v in culprits.items())


def lines(split: Mapping[str, Any] | None, prefix: str = "") -> list[str]:
    """`rtlab run`'s lines of one phase's kernel split (none when it has none)."""
    if not split:
        return []
    if split.get("error") and not split.get("cpus"):
        return [f"{prefix}{HEAD}: {split['error']}"]
    return [prefix + cpu_line(c, d, split.get("threshold_ns")) for c, d in _cpus(split)]


def notes(split: Mapping[str, Any]) -> list[str]:
    """What the split cannot show, and what it measures (the timerlat threads' own path)."""
    out = []
    if any(d.get("user_note") for _, d in _cpus(split)):
        out.append(next(str(d["user_note"]) for _, d in _cpus(split) if d.get("user_note")))
    if split.get("note"):
        out.append(str(split["note"]))
    return out


def split_rows(split: Mapping[str, Any], limit: int = 0) -> list[list[str]]:
    """[time into the phase (s), CPU, latency, culprit, summary] of the stored worst
    activations (the `limit` worst when given), in time order."""
    acts = [(cpu, w) for cpu, d in _cpus(split) for w in d.get("worst") or []
            if isinstance(w, dict)]
    if limit:
        acts = sorted(acts, key=lambda a: -int(a[1].get("latency_ns") or 0))[:limit]
    acts.sort(key=lambda a: int(a[1].get("at_ns") or 0))
    rows = []
    for cpu, w in acts:
        at, culprit = w.get("at_ns"), w.get("culprit")
        rows.append([f"{at / 1e9:.6f}" if at is not None else "?", cpu,
                     human(w.get("latency_ns")),
                     _blocker_label(culprit) if isinstance(culprit, dict) else "none named",
                     str(w.get("summary", ""))])
    return rows


def _blocker_label(b: Mapping[str, Any]) -> str:
    kind, name, ident = b.get("kind"), b.get("name"), b.get("id")
    if kind == "thread":
        return f"task {name}[{ident}]"
    if kind == "irq":
        return f"irq {name}:{ident}"
    return f"{kind} {name}"


def html_block(split: Mapping[str, Any] | None, limit: int = 10) -> str:
    """A small HTML block: the per-CPU lines, the culprit counts, the worst splits."""
    if not split:
        return ""
    out = [f"<h4>{escape(HEAD[0].upper() + HEAD[1:])}</h4>"]
    out += [f"<p>{escape(line)}</p>" for line in lines(split)]
    thr = split.get("threshold_ns")
    counts = [culprit_line(c, d, thr) for c, d in _cpus(split)]
    if counts:
        out.append("<p class='sub'>culprits: " + escape("; ".join(counts)) + "</p>")
    rows = split_rows(split, limit)
    if rows:
        out.append("<table><tr><th>at (s)</th><th>CPU</th><th>latency</th>"
                   "<th class='l'>culprit</th><th class='l'>split</th></tr>"
                   + "".join("<tr>" + "".join(f"<td{' class=kv' if i >= 3 else ''}>"
                                              f"{escape(c)}</td>" for i, c in enumerate(r))
                             + "</tr>" for r in rows) + "</table>")
    out += [f"<p class='sub'>{escape(n)}</p>" for n in notes(split)]
    return "".join(out)

