# SPDX-License-Identifier: MIT
"""How long `rtlab results push` / `pull` take (docs/results.md#lab-store-push-and-pull).

Stores N small runs, each with its raw files (an engine output file of --raw-kb, a
later phase's, the layout and a trace page file), in an SQLite store, starts a private
PostgreSQL server (the tests' helper: Unix socket, fsync off) and times, through the
CLI in this process: push SQLite -> PostgreSQL, the same push again (nothing to copy),
pull PostgreSQL -> a new SQLite store, pull again, and push SQLite -> SQLite.

    .venv/bin/python bench/push_pull.py --runs 200 --raw-kb 1000
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "results"))  # make_run, seed (the tests' runs)

from test_push_pull import PgServer, seed  # noqa: E402

from rtlab.cli import main  # noqa: E402


def timed(*argv: str) -> tuple[float, dict]:
    out = io.StringIO()
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(out):
        code = main([*argv, "--json"])
    elapsed = time.perf_counter() - t0
    assert code == 0, code
    return elapsed, json.loads(out.getvalue())


def main_() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--raw-kb", type=int, default=1000, help="size of each run's main raw file")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="rtlab-bench-push-") as tmp:
        os.environ["XDG_DATA_HOME"] = str(Path(tmp) / "xdg")
        local = str(Path(tmp) / "laptop" / "rtlab.db")
        ids = [f"{i:08x}" for i in range(args.runs)]
        seed(local, ids, size=args.raw_kb * 1000).close()
        server = PgServer.start()
        try:
            lab = server.url(server.create_database())
            rows = [
                ("push sqlite -> postgresql", timed("results", "push", "--store", local,
                                                    "--to", lab)),
                ("push again (all there)", timed("results", "push", "--store", local,
                                                 "--to", lab)),
                ("pull postgresql -> new sqlite", timed("results", "pull", "--from", lab,
                                                        "--store", str(Path(tmp) / "b.db"))),
                ("pull again (all there)", timed("results", "pull", "--from", lab,
                                                 "--store", str(Path(tmp) / "b.db"))),
                ("push sqlite -> new sqlite", timed("results", "push", "--store", local,
                                                    "--to", str(Path(tmp) / "c" / "c.db"))),
            ]
        finally:
            server.stop()
    print(f"{args.runs} runs, raw files {args.raw_kb} kB + 3 small ones per run")
    for what, (secs, doc) in rows:
        print(f"{what:32s} {secs:7.2f} s  copied {len(doc['copied']):5d}  already "
              f"{len(doc['already']):5d}  {doc['bytes'] / 1e6:8.1f} MB")


if __name__ == "__main__":
    main_()
