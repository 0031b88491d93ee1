#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Does the engine's recorder explain spikes as the old Python recorder did?

Interleaved A/B of the same command, `rtlab run --trace --duration D --cpus 1
--priority 80`, with a known cause running: a SCHED_FIFO 90 spinner (tests/support/
spinner.py) taking CPU 1 for 300 µs every 20 ms. BASE is an older checkout of rtlab
(`--base DIR`: its Python package, whose runner recorded with a Python recorder of its own);
NEW is this tree (the runner has the measured probe's engine record, `--trace-dir`).
Both use this tree's engine binary for the measurement itself. Per run it reports the
spikes above 100 µs, how many the spinner is the top cause of, how many it is in at
all (>= 150 µs of it), how many were untraced (no trace for their window) or mostly
unexplained (host stalls on a VM), the trace pages, lost events, and whether a trace
instance was left behind.

Usage (as root, after scripts/setup.sh; BASE from `git worktree add /tmp/base REV`):
    .venv/bin/python bench/trace_attribution_ab.py --base /tmp/base --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
SPINNER = REPO / "tests" / "support" / "spinner.py"
sys.path.insert(0, str(REPO))

from rtlab.results.store import Store  # noqa: E402


def one_run(tree: Path, probe: str, duration_s: int, store: Path) -> dict[str, object]:
    spinner = subprocess.Popen([sys.executable, str(SPINNER), "1", "90", "300", "20",
                                str(duration_s + 60)])
    env = dict(os.environ, RTLAB_PROBE=probe, PYTHONPATH=str(tree))
    try:
        out = subprocess.run([sys.executable, "-m", "rtlab", "run", "--trace", "--duration",
                              f"{duration_s}s", "--cpus", "1", "--priority", "80",
                              "--no-progress", "--store", str(store)],
                             capture_output=True, text=True, env=env, cwd=tree,
                             timeout=duration_s + 300, check=False)
    finally:
        spinner.kill()
        spinner.wait()
    if out.returncode not in (0, 1):
        raise SystemExit(f"{tree}: exit {out.returncode}: {out.stderr.strip()[-300:]}")
    st = Store.open(str(store))
    res = st.get("last")
    st.close()
    spikes = [s for p in res.phases for s in (p.spikes or [])]
    summ = [p.spike_summary or {} for p in res.phases]
    info = [p.trace or {} for p in res.phases]
    pid = spinner.pid

    def spun(s: dict) -> int:
        return sum(c["duration_ns"] for c in s["components"]
                   if c["kind"] == "task" and c["id"] == pid)

    top = sum(1 for s in spikes if f"[{pid}]" in str(s.get("top")))
    inside = sum(1 for s in spikes if spun(s) >= 150_000)
    left = [p.name for p in Path("/sys/kernel/tracing/instances").iterdir()
            if p.name.startswith("rtlab-")] if Path("/sys/kernel/tracing/instances").is_dir() \
        else []
    return {"spikes": sum(int(s.get("spikes", 0)) for s in summ), "stored": len(spikes),
            "top_is_spinner": top, "spinner_inside": inside,
            "untraced": sum(int((x.get("by_class") or {}).get("untraced", 0)) for x in summ),
            "unexplained": sum(int((x.get("by_class") or {}).get("unexplained", 0))
                               for x in summ),
            "pages": sum(int(i.get("pages") or 0) for i in info),
            "lost": sum(int(v) for i in info for v in (i.get("lost_events") or {}).values()),
            "instances_left": len(left)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", required=True, help="a checkout of the older rtlab (BASE)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=int, default=4, help="seconds per run")
    ap.add_argument("--probe", default=str(REPO / ".venv" / "bin" / "rtlab-probe"))
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("needs root (SCHED_FIFO, tracefs)", file=sys.stderr)
        return 4
    rows: list[tuple[str, dict[str, object]]] = []
    with tempfile.TemporaryDirectory(prefix="rtlab-ab-") as tmp:
        for r in range(args.rounds):
            order = [("BASE", Path(args.base)), ("NEW", REPO)]
            if r % 2:
                order.reverse()
            for name, tree in order:
                store = Path(tmp) / f"{name}-{r}.db"
                rows.append((name, one_run(tree, args.probe, args.duration, store)))
                print(name, json.dumps(rows[-1][1]), flush=True)
    print("\n| side | spikes > 100 µs | stored | spinner top cause | spinner inside "
          "(>= 150 µs) | untraced | unexplained | pages | lost | instances left |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, row in rows:
        print(f"| {name} | {row['spikes']} | {row['stored']} | {row['top_is_spinner']} | "
              f"{row['spinner_inside']} | {row['untraced']} | {row['unexplained']} | "
              f"{row['pages']} | {row['lost']} | "
              f"{row['instances_left']} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
