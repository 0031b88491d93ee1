# SPDX-License-Identifier: MIT
"""Parameter tables: exact validation errors, argv building, derived CLI flags and docs."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from rtlab.errors import UsageError
from rtlab.loads import LOAD_KINDS, Placement, from_spec, validate, validate_spec
from rtlab.loads.params import add_arguments, from_namespace, markdown_table

ROOT = Path(__file__).resolve().parents[2]


def test_unknown_kind() -> None:
    assert validate("hog", {}) == [
        "kind: unknown load kind 'hog'; allowed: stress, rt-competitor, net, osadl-mid, builtin"]


def test_unknown_key_names_the_allowed_keys() -> None:
    keys = ", ".join(p.name for p in LOAD_KINDS["net"].params)
    assert validate("net", {"rate": 5}) == [f"net: unknown key 'rate'; allowed keys: {keys}"]


@pytest.mark.parametrize(("params", "error"), [
    ({"vm": 1, "vm_bytes": "20X"},
     "stress.vm_bytes: '20X' is not a size (a number with an optional unit K, M, G)"),
    ({"vm": 1, "vm_bytes": "1K"},
     "stress.vm_bytes: '1K' is out of range; allowed: a size such as \"20M\" 4K..64G"),
    ({"cpu": 5000}, "stress.cpu: 5000 is out of range; allowed: an integer 0..4096"),
    ({"cpu": True}, "stress.cpu: True is not an integer 0..4096"),
    ({"cpu": 1, "hdd_sync": "yes"}, "stress.hdd_sync: 'yes' is not true or false"),
    ({"preset": "rteval"}, "stress.preset: 'rteval' is not one of 'none', 'seed'"),
    ({"cpu": 1, "timeout": "5 minutes"},
     "stress.timeout: '5 minutes' is not a duration (a number with a unit ns, us, ms, s, m, h)"),
    ({}, "stress: no stressor selected; set at least one of cpu, vm, io, hdd, sock, switch, "
         "sem, pipe, timer to a positive number, or preset = \"seed\""),
])
def test_stress_errors_are_exact(params: dict, error: str) -> None:
    assert validate("stress", params) == [error]


def test_net_subnet_must_be_a_private_slash_30() -> None:
    allowed = "allowed: a private IPv4 /30 such as \"198.18.0.0/30\""
    assert validate("net", {"subnet": "8.8.8.0/30"}) == [
        f"net.subnet: '8.8.8.0/30' is not private; {allowed}"]
    assert validate("net", {"subnet": "10.0.0.0/24"}) == [
        f"net.subnet: '10.0.0.0/24' is not a /30; {allowed}"]
    assert validate("net", {"subnet": "10.0.0.1/30"}) == [
        f"net.subnet: '10.0.0.1/30' is not an IPv4 network; {allowed}"]
    assert validate("net", {}) == []


def test_placement_errors_are_exact() -> None:
    assert validate_spec({"kind": "stress", "cpu": 1, "policy": "fifo", "priority": 0}) == [
        "stress.priority: 0 is out of range for policy 'fifo'; allowed: an integer 1..99"]
    assert validate_spec({"kind": "stress", "cpu": 1, "priority": 5}) == [
        "stress.priority: 5 is out of range for policy 'other'; allowed: 0"]
    assert validate_spec({"kind": "stress", "cpu": 1, "cpus": "0-3"}, online=[0, 1]) == [
        "stress.cpus: CPU 2,3 is not online; online CPUs: 0,1"]
    assert validate_spec({"kind": "stress", "cpu": 1, "policy": "deadline"}) == [
        "stress.policy: 'deadline' is not one of 'other', 'batch', 'idle', 'fifo', 'rr'"]
    assert validate_spec({"cpu": 1}) == [
        "kind: missing; allowed: stress, rt-competitor, net, osadl-mid, builtin"]
    with pytest.raises(UsageError, match=r"stress\.cpu: 'x' is not an integer"):
        from_spec({"kind": "stress", "cpu": "x"})


def test_seed_preset_argv() -> None:
    load = from_spec({"kind": "stress", "preset": "seed", "cpus": "1"})
    assert load.argv("T") == ["stress-ng", "--cpu", "8", "--vm", "8", "--vm-bytes", "20M",
                              "--taskset", "1", "--timeout", "0", "--temp-path", "T"]
    # explicit keys win over the preset
    assert from_spec({"kind": "stress", "preset": "seed", "vm": 2}).params["vm"] == 2


def test_stress_sched_and_hdd_argv() -> None:
    load = from_spec({"kind": "stress", "hdd": 1, "hdd_bytes": "8M", "timer": 1,
                      "timer_freq": 1000, "policy": "fifo", "priority": 10, "timeout": "90s"})
    assert load.argv("T") == [
        "stress-ng", "--hdd", "1", "--timer", "1", "--hdd-bytes", "8M", "--hdd-write-size",
        "65536", "--timer-freq", "1000", "--sched", "fifo", "--sched-prio", "10",
        "--timeout", "90s", "--temp-path", "T"]


def test_sock_runs_in_a_private_namespace() -> None:
    argv = from_spec({"kind": "stress", "sock": 1}).argv("T")
    assert argv[:3] == ["unshare", "--net", "--"]
    assert argv[argv.index("stress-ng"):][:3] == ["stress-ng", "--sock", "1"]


def test_rt_competitor_defaults_to_fifo_98() -> None:
    load = from_spec({"kind": "rt-competitor", "cpus": [0, 1], "interval": "500us"})
    assert load.placement == Placement((0, 1), "fifo", 98)
    load.probe = "rtlab-probe"
    assert load.argv("out.jsonl") == [
        "rtlab-probe", "timer", "--policy", "fifo", "--priority", "98",
        "--interval", "500000ns", "--output", "out.jsonl", "--cpus", "0-1"]
    # a policy of the same class keeps the kind's priority; another class gets its minimum
    assert from_spec({"kind": "rt-competitor", "policy": "rr"}).placement.priority == 98
    assert from_spec({"kind": "stress", "cpu": 1, "policy": "rr"}).placement.priority == 1


def test_net_mps_from_rate() -> None:
    assert from_spec({"kind": "net", "rate_kbit": 1000, "msg_bytes": 1000}).mps == 125
    assert from_spec({"kind": "net", "rate_kbit": 1, "msg_bytes": 65000}).mps == 1


def test_osadl_mid_parts() -> None:
    load = from_spec({"kind": "osadl-mid", "cpus": "0"})
    stress, net = load.parts
    assert stress.argv("T") == [
        "stress-ng", "--vm", "1", "--hdd", "1", "--vm-bytes", "1M", "--vm-hang", "1",
        "--hdd-bytes", "1M", "--hdd-write-size", "4096", "--hdd-opts", "fsync",
        "--ionice-class", "idle", "--taskset", "0", "--timeout", "0", "--temp-path", "T"]
    assert net.params["rate_kbit"] == 1000
    assert net.placement.cpus == (0,)


def test_build_from_kind_table() -> None:
    load = LOAD_KINDS["stress"].build({"cpu": 2}, Placement((0,), "other", 0))
    assert load.params["cpu"] == 2 and load.placement.cpus == (0,)
    with pytest.raises(UsageError, match=r"stress.priority: 50 is out of range"):
        LOAD_KINDS["stress"].build({"cpu": 2}, Placement((0,), "other", 50))


def test_cli_flags_derive_from_the_table() -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser, LOAD_KINDS["stress"].params, "stress")
    ns = parser.parse_args(["--stress-vm", "2", "--stress-vm-bytes", "20M", "--stress-hdd-sync"])
    given = from_namespace(ns, LOAD_KINDS["stress"].params, "stress")
    assert given == {"vm": "2", "vm_bytes": "20M", "hdd_sync": True}
    assert validate("stress", given) == []
    assert from_spec({"kind": "stress", **given}).params["vm_bytes"] == 20 << 20
    assert "allowed" not in parser.format_help() and "0..4096" in parser.format_help()


def test_docs_tables_match_the_code() -> None:
    doc = (ROOT / "docs" / "loads.md").read_text()
    for kind in LOAD_KINDS.values():
        assert markdown_table(kind.params) in doc, f"docs/loads.md: table of {kind.name} is stale"
