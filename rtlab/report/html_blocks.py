# SPDX-License-Identifier: MIT
"""The pieces every section of the HTML report is made of: escaped text, values as a
reader expects them, key/value and record tables, an inline SVG figure."""

from __future__ import annotations

import json
from collections.abc import Sequence
from html import escape
from typing import Any

from rtlab.cpulist import format_cpulist
from rtlab.textfmt import NA, human, seconds


def esc(v: object) -> str:
    return escape(str(v), quote=True)


def figure_html(fig: Any) -> str:
    from rtlab.report.plots import figure_svg

    svg = figure_svg(fig)
    fig.clear()
    return f"<div class='fig'>{svg}</div>"


def is_scalar(v: Any) -> bool:
    return v is None or isinstance(v, str | int | float | bool)


def as_text(v: Any) -> str:
    """A scalar as a reader expects it: yes/no, none, numbers and words as they are."""
    if v is None:
        return "none"
    if isinstance(v, bool):
        return "yes" if v else "no"
    return str(v)


def cpus_text(v: Any) -> str:
    """A CPU list as '0-3,6' ('none' when empty or unknown)."""

    if isinstance(v, list) and all(isinstance(x, int) and not isinstance(x, bool) for x in v):
        return format_cpulist(v) if v else "none"
    return as_text(v) if v not in ("", None) else "none"


def value_html(v: Any, key: str = "") -> str:
    if isinstance(v, list) and all(is_scalar(x) for x in v):
        if key in ("argv", "command", "command_line"):
            return f"<code>{esc(' '.join(map(str, v)))}</code>"
        return esc(", ".join(map(as_text, v))) if v else "none"
    if isinstance(v, dict) and all(is_scalar(x) or (isinstance(x, list) and all(map(is_scalar, x)))
                                   for x in v.values()):
        # a flat record: one line of `key value` pairs, nulls left out
        items = [f"<span class='muted'>{esc(k)}</span> "
                 + (esc(human(x)) if k.endswith("_ns") and isinstance(x, int)
                    and not isinstance(x, bool) else value_html(x, k))
                 for k, x in v.items() if x is not None and x != []]
        return " · ".join(items) if items else "none"
    if isinstance(v, dict | list):
        return f"<pre>{esc(json.dumps(v, indent=1, default=str))}</pre>"
    if v is None:
        return f"<span class='muted'>{NA}</span>"
    return esc(as_text(v))


def kv_table(pairs: Sequence[tuple[str, Any]]) -> str:
    rows = [f"<tr><th class='l'>{esc(k)}</th><td class='kv'>{value_html(v, k)}</td></tr>"
            for k, v in pairs if v not in (None, "", [], {})]
    return "<table>" + "".join(rows) + "</table>" if rows else ""


def records_table(records: Sequence[Any], prefer: Sequence[str] = ()) -> str:
    dicts = [r for r in records if isinstance(r, dict)]
    if not dicts:
        return "<ul>" + "".join(f"<li>{esc(r)}</li>" for r in records) + "</ul>"
    keys: list[str] = [k for k in prefer if any(k in d for d in dicts)]
    for d in dicts:
        keys += [k for k in d if k not in keys]
    keys = keys[:9]
    head = "".join(f"<th class='l'>{esc(k)}</th>" for k in keys)
    body = "".join("<tr>" + "".join(f"<td class='kv'>{cell_html(d.get(k), k)}</td>" for k in keys)
                   + "</tr>" for d in dicts)
    return f"<table><tr>{head}</tr>{body}</table>"


def cell_html(v: Any, key: str) -> str:
    if isinstance(v, int) and not isinstance(v, bool) and key.endswith("_ns"):
        return esc(human(v) if not key.startswith("at") else seconds(v))
    return value_html(v, key)

