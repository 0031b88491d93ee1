# SPDX-License-Identifier: MIT
"""`rtlab-probe load`'s OSADL mid load parts: the periodic allocation, the synced file
I/O in a private directory (removed on every way the load ends, also when the load
process is killed), the UDP sender at a bounded rate and the sink that counts what
arrives. No root needed; assertions are on records, counts, files and processes, and
rates only as upper bounds (the sender never exceeds its rate by construction)."""

from __future__ import annotations

import os
import signal
import socket
from pathlib import Path
from typing import Any

import pytest

from .helpers import (
    LoadRun,
    alive,
    parse_lines,
    run_probe,
    started_runs,
    wait_until,
)

WAIT = 120  # generous: a loaded 2-vCPU VM
LONG = "300s"  # a load's --duration: the most a test waits for its counts


@pytest.fixture
def loads(probe_bin: str) -> Any:
    yield from started_runs(LoadRun, probe_bin)


def _sink_port(rec: dict[str, Any]) -> int:
    return int(rec["config"]["net_sink"].rsplit(":", 1)[1])


def test_sender_to_sink_counts_both_ends_within_the_rate(loads: Any) -> None:
    # a --duration bounds every wait on a snapshot (a stop by SIGTERM comes long before)
    sink = loads("--net-sink", "127.0.0.1:0", "--snapshot-interval", "50ms", "--duration", LONG)
    assert sink.rec["config"]["net_sink"].startswith("127.0.0.1:")
    port = _sink_port(sink.rec)
    assert port > 0  # port 0: a free one, named in the record
    assert [w["kind"] for w in sink.rec["workers"]] == ["sink"]
    send = loads("--net-to", f"127.0.0.1:{port}", "--net-kbit", "800", "--net-size", "100",
                 "--snapshot-interval", "50ms", "--duration", LONG)
    cfg = send.rec["config"]
    assert cfg["net_to"] == f"127.0.0.1:{port}" and cfg["net_kbit"] == 800
    assert cfg["net_size"] == 100 and cfg["net_tick_ns"] == 1_000_000  # 1000/s: the 1 ms floor
    sink.snapshot_where(lambda r: r["sink"]["received"] >= 50)
    # a stranger's datagram is counted apart
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.sendto(b"not a load message", ("127.0.0.1", port))
    sink.snapshot_where(lambda r: r["sink"]["foreign"] == 1)
    os.kill(send.p.pid, signal.SIGTERM)
    code, res, _out, err = send.finish()
    assert code == 130, err
    net = res["net"]
    assert res["loops"]["net"] > 0 and net["sent"] > 0 and net["failed"] == 0
    assert net["bytes"] == 100 * net["sent"]
    # never above the rate: 1000 messages a second since the start
    assert net["sent"] <= res["elapsed_ns"] / 1e6 + 1
    (w,) = res["workers"]
    assert w["kind"] == "net" and w["sent"] == net["sent"] and w["end"] == "stopped"
    os.kill(sink.p.pid, signal.SIGTERM)
    code, res, _out, err = sink.finish()
    assert code == 130, err
    got = res["sink"]
    assert 50 <= got["received"] <= net["sent"] and got["foreign"] == 1
    assert got["bytes"] == 100 * got["received"]
    assert res["workers"][0]["received"] == got["received"]


def test_a_sender_with_nobody_listening_counts_failures(loads: Any) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # free once closed: nothing listens there
    send = loads("--net-to", f"127.0.0.1:{port}", "--net-kbit", "80", "--net-size", "100",
                 "--snapshot-interval", "50ms", "--duration", LONG)
    snap = send.snapshot_where(lambda r: r["net"]["failed"] > 0)
    assert snap["net"]["last_error"] == os.strerror(111)  # ECONNREFUSED, from the ICMP reply
    os.kill(send.p.pid, signal.SIGTERM)
    code, res, _out, _err = send.finish()
    assert code == 130 and res["net"]["failed"] > 0


def test_io_and_alloc_work_in_a_private_dir_removed_at_the_stop(loads: Any,
                                                                 tmp_path: Path) -> None:
    ld = loads("--io", "2", "--io-bytes", "16k", "--io-dir", str(tmp_path), "--alloc-bytes",
               "64k", "--alloc-period", "20ms", "--snapshot-interval", "50ms", "--duration", LONG)
    cfg = ld.rec["config"]
    private = Path(cfg["io_dir"])
    assert private.parent == tmp_path and private.name.startswith("rtlab-load-")
    assert private.is_dir() and oct(private.stat().st_mode & 0o777) == "0o700"
    assert cfg["io"] == 2 and cfg["io_bytes"] == 16 << 10
    assert cfg["alloc_bytes"] == 64 << 10 and cfg["alloc_period_ns"] == 20_000_000
    prio = ld.rec["io_priority"]
    assert prio["class"] == "idle" and (prio["set"] or prio["error"])
    assert [w["kind"] for w in ld.rec["workers"]] == ["alloc", "io", "io"]
    snap = ld.snapshot_where(lambda r: r["io"]["files"] >= 2 and r["alloc"]["rounds"] >= 2)
    assert snap["io"]["bytes"] >= 2 * (16 << 10)
    # a file's name lives only between its creation and its unlink, before the writes
    assert {p.name for p in private.iterdir()} <= {"io-0", "io-1"}
    os.kill(ld.p.pid, signal.SIGTERM)
    code, res, _out, err = ld.finish()
    assert code == 130, err
    assert res["io"]["files"] >= 2 and res["io"]["bytes"] >= res["io"]["files"] * (16 << 10)
    # bounded: one round per period at most since the start
    assert 2 <= res["alloc"]["rounds"] <= res["elapsed_ns"] / 20e6 + 1
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("how", ["lifeline", "group", "kill9"])
def test_nothing_is_left_behind_however_the_load_ends(loads: Any, tmp_path: Path,
                                                      how: str) -> None:
    """stdin EOF (the host went away), SIGTERM to the group (a journal's restore) and a
    kill -9 of the load process: workers gone, no file, no private directory."""
    ld = loads("--io", "3", "--io-bytes", "8k", "--io-dir", str(tmp_path), "--alloc-bytes",
               "64k", "--snapshot-interval", "50ms", "--duration", LONG,
               lifeline=how == "lifeline",
               new_session=True)
    ld.snapshot_where(lambda r: r["io"]["files"] >= 3)
    if how == "lifeline":
        assert ld.p.stdin is not None
        ld.p.stdin.close()
        ld.p.stdin = None
    elif how == "group":
        os.killpg(ld.rec["pgid"], signal.SIGTERM)
    else:
        os.kill(ld.p.pid, signal.SIGKILL)
    code, res, _out, err = ld.finish(timeout=WAIT)
    if how == "kill9":
        assert code == -signal.SIGKILL
    else:
        assert code == 130, err
        assert res is not None and res["status"] == "interrupted"
    assert wait_until(lambda: not any(alive(w) for w in ld.workers), WAIT)
    # after a kill -9 the io workers remove the directory (their parent-death signal)
    assert wait_until(lambda: list(tmp_path.iterdir()) == [], WAIT), list(tmp_path.iterdir())


def test_an_io_dir_that_cannot_be_used_is_one_line(probe_bin: str, tmp_path: Path) -> None:
    r = run_probe(probe_bin, "load", "--io", "1", "--io-dir", str(tmp_path / "missing"),
                  "--alloc-bytes", "64k")
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.splitlines() == [
        f"rtlab-probe load: --io-dir {tmp_path / 'missing'}: cannot make a directory there: "
        "No such file or directory"]
    assert list(tmp_path.iterdir()) == []


def test_a_sink_port_in_use_is_one_line(probe_bin: str) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        r = run_probe(probe_bin, "load", "--net-sink", f"127.0.0.1:{port}", "--cpu", "1")
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.splitlines() == [
        f"rtlab-probe load: --net-sink 127.0.0.1:{port}: cannot receive there: "
        "Address already in use"]


def test_alloc_and_net_run_for_their_duration(probe_bin: str) -> None:
    r = run_probe(probe_bin, "load", "--alloc-bytes", "128k", "--alloc-period", "10ms",
                  "--net-to", "127.0.0.1:9", "--duration", "300ms", timeout=WAIT)
    assert r.returncode == 0, r.stderr
    start, res = parse_lines(r.stdout)
    assert start["config"]["net_to"] == "127.0.0.1:9" and start["io_priority"] is None
    assert res["status"] == "completed" and res["alloc"]["rounds"] >= 1
    assert res["io"] is None and res["sink"] is None
    assert res["net"]["sent"] + res["net"]["failed"] >= 1


@pytest.mark.parametrize(("args", "msg"), [
    ([], "give --cpu N and/or --vm M, or --alloc-bytes SIZE, --io N"),
    (["--alloc-period", "2s", "--cpu", "1"], "--alloc-period: only with --alloc-bytes SIZE"),
    (["--io-dir", "/tmp", "--cpu", "1"], "--io-dir: only with --io N"),
    (["--io-bytes", "1M", "--cpu", "1"], "--io-bytes: only with --io N"),
    (["--net-kbit", "10", "--cpu", "1"], "--net-kbit: only with --net-to ADDR:PORT"),
    (["--net-size", "100", "--cpu", "1"], "--net-size: only with --net-to ADDR:PORT"),
    (["--net-to", "board2:7500"], "--net-to: 'board2:7500' is not ADDR:PORT"),
    (["--net-to", "10.0.0.1"], "--net-to: '10.0.0.1' is not ADDR:PORT"),
    (["--net-sink", "x"], "--net-sink: 'x' is not [ADDR:]PORT"),
    (["--net-to", "10.0.0.1:9", "--net-kbit", "0"], "--net-kbit: 0 is out of range"),
    (["--io", "65"], "--io: 65 is out of range; allowed range 0..64"),
    (["--alloc-bytes", "1k"], "--alloc-bytes: 1k is out of range"),
    (["--cpu", "1", "--snapshot-interval", "1ms"], "--snapshot-interval: 1ms is out of range"),
])
def test_bad_options_exit_2(probe_bin: str, args: list[str], msg: str) -> None:
    r = run_probe(probe_bin, "load", *args)
    assert r.returncode == 2 and r.stdout == ""
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("rtlab-probe load: ") and msg in lines[0]


def test_help_lists_the_osadl_options(probe_bin: str) -> None:
    out = run_probe(probe_bin, "load", "--help").stdout
    for opt in ("--alloc-bytes SIZE", "--alloc-period DUR", "--io N", "--io-bytes SIZE",
                "--io-dir DIR", "--net-to ADDR:PORT", "--net-kbit N", "--net-size BYTES",
                "--net-sink [ADDR:]PORT", "--snapshot-interval DUR"):
        assert opt in out
