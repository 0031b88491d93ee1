# SPDX-License-Identifier: MIT
"""The timer probe (cyclictest's measurement): wake-up latency of a periodic thread."""

from __future__ import annotations

from rtlab.probes.description import Monitored, ProbeInfo
from rtlab.results.shape import ResultShape

# An imported rtla timerlat run (probe "timer") has irq@cpuN, thread@cpuN and user@cpuN:
# the wake-up latency of a task is user@ (timerlat -u) else thread@, never both at once
# with irq@ (that would count every period twice). rtlab's own channels (cpuN) match
# none of these, so every channel is the headline.
INFO = ProbeInfo("timer", ResultShape(measures="wake-up latency",
                                      headline=("user@cpu*", "thread@cpu*"),
                                      owns_its_cpus=True),
                 takes_common_options=True,
                 monitor=Monitored("wake-up latency of a SCHED_FIFO thread (default)",
                                   fixed_args=("--policy", "fifo")))
