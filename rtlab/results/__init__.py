# SPDX-License-Identifier: MIT
"""The versioned result model (model), the histogram mirror (histogram), the percentile
rule and summaries (summary), per-window data (windows), validation (validate), the
importers of peer formats (importers) and the store (store)."""
