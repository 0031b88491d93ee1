# SPDX-License-Identifier: MIT
"""osadl-mid's board side without a board: its `peer` parameter, the engine's command
lines it builds, what is refused before anything starts, and how a comparison names
the load that ran (the runs themselves: tests/netns_boards/test_osadl_board.py and
tests/lab/test_osadl_on_boards.py)."""

from __future__ import annotations

from typing import Any

import pytest

from rtlab.analysis.loadmix import _what_ran
from rtlab.errors import UsageError
from rtlab.loads import from_spec, validate
from rtlab.loads.board import board_kind_error
from rtlab.loads.net import BoardPeer, parse_board_peer
from rtlab.loads.on_target import for_target
from rtlab.loads.osadl_board import BoardOsadlLoad


class FakeBoard:
    """Just enough of a board's Transport to build its loads (nothing is started)."""

    name = "ssh"
    is_local = False
    engine_path = "/tmp/rtlab.0/rtlab-probe-x"

    def __init__(self, target: str) -> None:
        self.target = target


@pytest.mark.parametrize(("text", "peer"), [
    ("", None), ("none", None),
    ("board8=10.77.0.2:7500", BoardPeer("board8", "10.77.0.2", 7500)),
    ("lab@b2:2222=[fd00::2]:9", BoardPeer("lab@b2:2222", "fd00::2", 9)),
])
def test_peer_values(text: str, peer: BoardPeer | None) -> None:
    assert parse_board_peer(text) == peer
    assert validate("osadl-mid", {"peer": text}) == []


@pytest.mark.parametrize("text", ["board8", "board8=10.77.0.2", "=10.77.0.2:7500",
                                  "board8=name:7500", "board8=10.77.0.2:0",
                                  "board8=0.0.0.0:7500", "b 8=10.77.0.2:7500", "host"])
def test_bad_peers_name_the_key_and_what_is_allowed(text: str) -> None:
    (err,) = validate("osadl-mid", {"peer": text})
    assert err.startswith(f"osadl-mid.peer: {text!r} is not a peer; allowed: \"\" (this "
                          "machine), \"none\", or \"TARGET=ADDR:PORT\"")


def test_the_engine_command_lines_on_a_board() -> None:
    load = from_spec({"kind": "osadl-mid", "cpus": "1", "alloc_bytes": "2M",
                      "alloc_period": 3, "io_bytes": "4M", "net_kbit": 500})
    assert board_kind_error("osadl-mid", "b") is None
    board = for_target(load, FakeBoard("b7"))  # type: ignore[arg-type]
    assert isinstance(board, BoardOsadlLoad)
    assert board.io_dir == "/tmp"
    (bc,) = board.board_commands()
    assert bc.args == ["load", "--alloc-bytes", "2M", "--alloc-period", "3s", "--io", "1",
                       "--io-bytes", "4M", "--io-dir", "/tmp", "--cpus", "1"]
    assert bc.argv == [FakeBoard.engine_path, *bc.args]
    board.network["to"] = "10.0.2.2:4000"
    board._stage = "net"
    (net,) = board.board_commands()
    assert net.args == ["load", "--net-kbit", "500", "--net-size", "1000", "--cpus", "1",
                        "--net-to", "10.0.2.2:4000", "--snapshot-interval", "250ms"]
    on_disk = for_target(from_spec({"kind": "osadl-mid", "temp_dir": "/data"}),
                         FakeBoard("b7"))  # type: ignore[arg-type]
    assert isinstance(on_disk, BoardOsadlLoad) and on_disk.io_dir == "/data"


def test_what_a_board_cannot_do_is_refused_before_anything_starts() -> None:
    fifo = from_spec({"kind": "osadl-mid", "policy": "fifo", "priority": 10})
    with pytest.raises(UsageError, match="policy 'fifo' is not available there"):
        for_target(fifo, FakeBoard("b7"))  # type: ignore[arg-type]
    itself = from_spec({"kind": "osadl-mid", "peer": "b7=10.0.0.7:7500"})
    with pytest.raises(UsageError, match=r"is the board the load runs on \(b7\)"):
        for_target(itself, FakeBoard("b7"))  # type: ignore[arg-type]
    assert board_kind_error("net", "b7") is not None


def _desc(**extra: Any) -> dict[str, Any]:
    return {"name": "mid", "kind": "osadl-mid", **extra}


def test_a_comparison_tells_the_osadl_loads_apart() -> None:
    assert _what_ran(_desc()) == "osadl-mid (stress-ng and sockperf)"
    assert _what_ran(_desc(network={"left_out": None})) == "osadl-mid as the engine's own load"
    assert _what_ran(_desc(network={"left_out": "peer = \"none\""})) == (
        "osadl-mid as the engine's own load without its network part")
