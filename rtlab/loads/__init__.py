# SPDX-License-Identifier: MIT
"""Load generators for loaded scenarios (see docs/loads.md).

    from rtlab.loads import LOAD_KINDS, LoadSet, from_spec
    loads = [from_spec({"kind": "stress", "preset": "seed", "cpus": "0"})]
    with LoadSet(loads, recorder=session) as ls:   # session: SpawnRecorder (the journal)
        ...measure...
        if ls.died(): ...mark the run...
    ls.describe()  # argv, placement, pids, times, exit status, died_early, stderr tail
"""

from rtlab.loads.kinds import LOAD_KINDS, LoadKind, from_spec, validate, validate_spec
from rtlab.loads.lifecycle import (
    PLACEMENT_PARAMS,
    CommandLoad,
    Load,
    LoadError,
    NullRecorder,
    Placement,
    SpawnRecorder,
    check_placement,
)
from rtlab.loads.loadset import LoadSet
from rtlab.loads.proc import reap_recorded

__all__ = [
    "LOAD_KINDS",
    "PLACEMENT_PARAMS",
    "CommandLoad",
    "Load",
    "LoadError",
    "LoadKind",
    "LoadSet",
    "NullRecorder",
    "Placement",
    "SpawnRecorder",
    "check_placement",
    "from_spec",
    "reap_recorded",
    "validate",
    "validate_spec",
]
