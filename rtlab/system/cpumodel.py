# SPDX-License-Identifier: MIT
"""Every CPU's core as the target's engine names it (`rtlab-probe sys cpumodel`).

The engine holds the one table of ARM implementer/part ids (engine/src/cpuname.c) and
writes the same answer into every probe's header (`system.cpu_model`,
`system.cpu_models`), so the doctor and a run's provenance cannot disagree
(docs/engine-output.md#cpu-model).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rtlab.system.facts import read_sys_record

if TYPE_CHECKING:
    from rtlab.engine.transport import Transport

SCHEMA = 1


@dataclass(frozen=True)
class CpuModels:
    """`cpu_model` (one line for the machine), `cpu_models` (the CPUs of each core
    name, as in the header) and where they were read."""

    cpu_model: str | None
    cpu_models: tuple[tuple[frozenset[int], str], ...] | None  # None: cpuinfo unreadable
    cpuinfo: str
    error: str | None  # why cpuinfo was not read

    def as_system(self) -> dict[str, Any]:
        """The two members as a header's `system` holds them (for rtlab.textfmt)."""
        return {"cpu_model": self.cpu_model,
                "cpu_models": None if self.cpu_models is None else [
                    {"cpus": sorted(c), "model": m} for c, m in self.cpu_models]}


def parse_cpu_models(obj: dict[str, Any]) -> CpuModels:
    """A `sys cpumodel` record; ValueError/KeyError/TypeError when it is not one."""
    if obj.get("type") != "cpumodel" or obj.get("schema") != SCHEMA:
        raise ValueError(f"type={obj.get('type')!r}, schema={obj.get('schema')!r}")
    groups = obj["cpu_models"]
    return CpuModels(
        cpu_model=obj["cpu_model"],
        cpu_models=None if groups is None else tuple(
            (frozenset(int(c) for c in g["cpus"]), str(g["model"])) for g in groups),
        cpuinfo=str(obj["cpuinfo"]),
        error=obj.get("error"),
    )


def read_cpu_models(transport: Transport, root: str | None = None,
                    timeout_s: float = 30.0) -> CpuModels:
    """`rtlab-probe sys cpumodel [--root DIR]` on the transport's target; RtlabError if
    it fails."""
    return read_sys_record(transport, "cpumodel", parse_cpu_models, root, timeout_s)
