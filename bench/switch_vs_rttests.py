#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Side-by-side: `rtlab-probe switch` vs rt-tests ptsematest/pmqtest/sigwaittest/svsematest.

Runs are interleaved (ours, peer, ours, peer, ...) with the same CPU, priority and
interval. Peers are read only through their --json file (min/avg/max per thread);
our figures come from the histogram (min/avg/max plus p50/p99).

    sudo python3 bench/switch_vs_rttests.py --runs 2 --duration 10 --cpu 1

Mapping: ptsematest (pthread mutex hand-over) ~ our futex and condvar, pmqtest ~ mq,
sigwaittest ~ signal, svsematest ~ sysv-sem. All peer pairs run on one CPU (-a CPU).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from benchlib import channel_percentile, default_probe, lacks

PEERS: dict[str, list[str]] = {
    "ptsematest": ["futex", "condvar"],
    "pmqtest": ["mq"],
    "sigwaittest": ["signal"],
    "svsematest": ["sysv-sem"],
}


def us(ns: int | None) -> float:
    return float("nan") if ns is None else ns / 1e3


def find_peer(name: str) -> str | None:
    # svsematest calls ftok(argv[0]): it must be started by an absolute path
    path = shutil.which(name)
    return str(Path(path).resolve()) if path else None


def run_ours(probe: str, mech: str, a: argparse.Namespace) -> dict[str, float]:
    cmd = [probe, "switch", "--mechanism", mech, "--cpus", str(a.cpu), "--priority",
           str(a.prio), "--interval", f"{a.interval}us", "--duration", f"{a.duration}s",
           "--no-order-check", "--no-pi-check"]
    if not a.busy:
        cmd.append("--no-busy")
    r = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)}: exit {r.returncode}: {r.stderr.strip()}")
    res = [json.loads(x) for x in r.stdout.splitlines() if x][-1]
    ch = res["channels"][0]
    n = max(ch["samples"], 1)
    return {"min": ch["min_ns"] / 1e3, "avg": ch["sum_ns"] / n / 1e3, "max": ch["max_ns"] / 1e3,
            "p50": us(channel_percentile(ch, 50.0)), "p99": us(channel_percentile(ch, 99.0)),
            "n": ch["samples"]}


def run_peer(path: str, a: argparse.Namespace) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as td:
        out = Path(td) / "peer.json"
        cmd = [path, "-a", str(a.cpu), "-p", str(a.prio), "-i", str(a.interval), "-d", "0",
               "-t", "1", "-D", str(a.duration), "-q", f"--json={out}"]
        r = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if r.returncode != 0 or not out.exists():
            raise SystemExit(f"{' '.join(cmd)}: exit {r.returncode}: {r.stderr.strip()}")
        data = json.loads(out.read_text())
    threads = data.get("thread", {})
    t = threads[sorted(threads)[0]]
    rx = t.get("receiver", t)
    return {"min": float(rx["min"]), "avg": float(rx["avg"]), "max": float(rx["max"]),
            "n": float(t.get("sender", {}).get("samples", 0))}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--probe", default=default_probe())
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--duration", type=int, default=10, help="seconds per run")
    ap.add_argument("--cpu", type=int, default=max(os.sched_getaffinity(0)))
    ap.add_argument("--prio", type=int, default=90)
    ap.add_argument("--interval", type=int, default=1000, help="microseconds")
    ap.add_argument("--busy", action=argparse.BooleanOptionalAction, default=False,
                    help="our busy runner (peers have none; off for a like-for-like run)")
    a = ap.parse_args()
    if lacks(root="needs root (SCHED_FIFO)"):
        return 4
    rows: list[tuple[str, str, dict[str, float], dict[str, float]]] = []
    for peer, mechs in PEERS.items():
        path = find_peer(peer)
        if not path:
            print(f"{peer}: not installed, skipped", file=sys.stderr)
            continue
        for mech in mechs:
            for _ in range(a.runs):
                ours = run_ours(a.probe, mech, a)
                theirs = run_peer(path, a)
                rows.append((peer, mech, ours, theirs))
    hdr = (f"{'peer':<12} {'ours':<9} | {'peer min/avg/max us':>22} | "
           f"{'ours min/avg/max us':>22} | {'p50':>6} {'p99':>6} | {'avg ratio':>9}")
    print(f"cpu {a.cpu}, prio {a.prio}, interval {a.interval} us, {a.duration} s per run,"
          f" busy runner {'on' if a.busy else 'off'}")
    print(hdr)
    print("-" * len(hdr))
    for peer, mech, o, t in rows:
        ratio = o["avg"] / t["avg"] if t["avg"] else float("nan")
        print(f"{peer:<12} {mech:<9} | {t['min']:6.1f} {t['avg']:7.1f} {t['max']:7.0f} | "
              f"{o['min']:6.1f} {o['avg']:7.1f} {o['max']:7.0f} | {o['p50']:6.1f} "
              f"{o['p99']:6.1f} | {ratio:9.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
