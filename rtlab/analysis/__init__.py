# SPDX-License-Identifier: MIT
"""Statistics computed from histograms: percentiles, mean, mode, summaries.

This layer knows nothing about runs or storage; it works on anything that looks
like a histogram (see `stats.HistogramLike`) plus the exact min/max/sum kept
beside it.
"""

from rtlab.analysis.stats import (
    DEFAULT_PERCENTILES,
    ChannelSummary,
    mean,
    mode,
    percentile,
    percentile_label,
    summarize,
)

__all__ = [
    "DEFAULT_PERCENTILES",
    "ChannelSummary",
    "mean",
    "mode",
    "percentile",
    "percentile_label",
    "summarize",
]
