# SPDX-License-Identifier: MIT
"""What rtlab concludes from results: confidence intervals of percentiles (stats),
comparisons (compare, compare_stats), worst-case estimates (evt), SLO gates (slo),
who else used a measured CPU (cpushare), and the simulations that calibrate them
(calibrate, evt_calibration). The percentile rule and summaries themselves are part of
the result model (rtlab.results.summary).
"""
