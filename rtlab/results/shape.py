# SPDX-License-Identifier: MIT
"""What one probe's results look like, as the result model and the analysis need to know
it: which channels carry the headline quantity, what that quantity is, and how a phase
that measured nothing is told.

Each probe module declares its shape (rtlab.probes: `ProbeInfo.shape`); the layers that
know the probe registry (runner, report, cli) look it up and hand it to the functions here
and in rtlab.analysis, which never name a probe themselves. A probe the host does not know
(a newer engine's) has `ResultShape()`: every channel is the headline, "latency".
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any, Protocol, TypeVar


class Phase(Protocol):
    """What a shape's `why_nothing` reads of a phase (rtlab.results.model.Phase)."""

    name: str
    channels: list[Any]
    extras: dict[str, Any] | None


class _Named(Protocol):
    name: str
    samples: int


C = TypeVar("C", bound=_Named)


@dataclass(frozen=True)
class ResultShape:
    """One probe's results, as the result model and the analysis read them."""

    # what one value means, for the verdict line ("wake-up latency")
    measures: str = "latency"
    # channel-name patterns (shell style) of the headline quantity, the first that
    # matches a channel with samples wins; () = every channel. Merged rows, verdicts, the
    # store's columns, SLO gates, comparisons and worst-case estimates use only these.
    headline: tuple[str, ...] = ()
    # an event-counting probe (a quiet CPU gives it no sample at all): the per-thread
    # count in its channels' records that shows it did its work ("loops")
    work_counter: str | None = None
    # its channels stand for every thread it runs on their CPU, so any other busy time
    # there is foreign (the "CPUn was shared" notes); probes with partner threads
    # without channels cannot say so
    owns_its_cpus: bool = False
    # what the probe's extras add to "measured nothing: no sample on ..." for a phase
    why_nothing: Callable[[Phase], str] | None = None

    def headline_channels(self, channels: Sequence[C]) -> list[C]:
        """The channels of one phase that measure the headline quantity: the first of the
        headline patterns that matches a channel with samples; every channel without
        patterns. The others break the headline down (a round trip's parts)."""
        first_match: list[C] | None = None
        for pattern in self.headline:
            chosen = [c for c in channels if fnmatchcase(c.name, pattern)]
            if any(c.samples for c in chosen):  # e.g. rtla's user@ columns, empty without -u
                return chosen
            first_match = first_match or chosen or None
        # all empty: the headline is still the headline (a round trip with every reply
        # lost), never its parts
        return first_match if first_match is not None else list(channels)


# How a caller that knows the probes finds a result's shape from its probe's name
# (rtlab.probes.registry.shape).
ShapeOf = Callable[[str], ResultShape]

__all__ = ["ResultShape", "ShapeOf"]
