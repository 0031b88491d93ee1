# SPDX-License-Identifier: MIT
"""Test helper: hold a shield in a SystemSession until killed.

usage: python holder.py PROBE JOURNAL_DIR EXCLUDE_PIDS
Prints one JSON line {"applier": PID, "answers": N, ...} once applied.
"""

from __future__ import annotations

import json
import sys
import time

from rtlab.engine.transport import LocalTransport
from rtlab.system.applier import SystemSession
from rtlab.system.facts import read_facts
from rtlab.system.shield_plan import ShieldRequest, plan_shield


def main() -> None:
    probe, directory, exclude = sys.argv[1], sys.argv[2], sys.argv[3]
    pids = frozenset(int(x) for x in exclude.split(",") if x)
    facts = read_facts(LocalTransport(probe))
    plan = plan_shield(
        facts, ShieldRequest(cpus=frozenset({1}), irqs=True, kthreads=True, exclude_pids=pids)
    )
    with SystemSession(LocalTransport(probe), directory, name="holder") as s:
        answers = s.apply(plan.ops, required=plan.required)
        assert s.applier is not None
        print(json.dumps({"applier": s.applier.pid, "answers": len(answers)}), flush=True)
        while True:
            time.sleep(1)


if __name__ == "__main__":
    main()
