# SPDX-License-Identifier: MIT
"""The exporter interface: `serialize(result) -> bytes` under a name, a file extension
and a media type. Each format is a class of its own; the registry by name is
rtlab.report.exporters."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from rtlab.results.model import RunResult


class Exporter(ABC):
    name: str
    extension: str
    media_type: str

    @abstractmethod
    def serialize(self, result: RunResult) -> bytes: ...
