# SPDX-License-Identifier: MIT
"""`rtlab tune`: experiments over configuration knobs (docs/tune.md).

The tune plans a designed experiment over the catalogue's knobs (`knobs`), drives each
block's run through the runner's one run path (`rtlab.runner.job.run_job`), decides
with the calibrated comparison (`rtlab.analysis.compare`), and writes the latency
ledger. Boot knobs go through the one reboot interface (`reboot`).
"""
