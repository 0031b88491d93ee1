# SPDX-License-Identifier: MIT
"""The versioned result model, the histogram mirror and the store."""

from rtlab.results.histogram import Bucket, LogLinHistogram, bucket_bounds, index_of
from rtlab.results.model import (
    RESULT_SCHEMA_VERSION,
    Channel,
    Phase,
    RunResult,
    Stream,
    load_result,
    new_run_id,
)

__all__ = [
    "RESULT_SCHEMA_VERSION",
    "Bucket",
    "Channel",
    "LogLinHistogram",
    "Phase",
    "RunResult",
    "Stream",
    "bucket_bounds",
    "index_of",
    "load_result",
    "new_run_id",
]
