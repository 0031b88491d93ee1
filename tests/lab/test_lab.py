# SPDX-License-Identifier: MIT
"""The lab itself (docs/lab.md): the emulated boards run Debian's PREEMPT_RT kernels
with the features rtlab relies on, have no Python, take the lab's keys (root and an
unprivileged user), accept files in /tmp, and two boards reach each other over a
link that is not the host's."""

from __future__ import annotations

import hashlib
import ipaddress
import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from .boards import (
    BUILD_SCRIPT,
    Board,
    BoardError,
    LinkSpec,
    ensure_image,
    initramfs_names,
    kvm_usable,
)

pytestmark = pytest.mark.slow

BOARD_FIXTURES = {"x86_64-rt": "x86_board", "aarch64-rt": "arm64_board"}


def out(board: Board, *argv: str, user: str | None = None) -> str:
    """stdout of a command that must succeed on the board."""
    r = board.ssh(*argv, user=user)
    assert r.returncode == 0, f"{board.name}: {argv} failed ({r.returncode}): {r.stderr}"
    return r.stdout.strip()


@pytest.mark.parametrize("kind", sorted(BOARD_FIXTURES))
def test_image_matches_its_manifest(kind: str) -> None:
    image = ensure_image(kind)
    files = image.manifest["files"]
    for name in ("vmlinuz", "initramfs.cpio.gz", "known_hosts", "id_ed25519.pub"):
        data = (image.dir / name).read_bytes()
        assert hashlib.sha256(data).hexdigest() == files[name]["sha256"], name
        assert len(data) == files[name]["bytes"], name
    names = {p["name"] for p in image.manifest["packages"]}
    assert image.manifest["kernel"]["package"] in names
    assert {"busybox-static", "dropbear-bin", "libc6"} <= names
    assert image.manifest["rootfs"]["python"] is False
    check = subprocess.run([str(BUILD_SCRIPT), "--check", kind], capture_output=True,
                           check=False)
    assert check.returncode == 0, "an image just ensured must be up to date"


def assert_preempt_rt_with_cpuset(board: Board, machine: str,
                                  record_property: Callable[[str, object], None]) -> None:
    """The board is `machine` (uname -m), runs a PREEMPT_RT kernel, and its cgroup root
    offers the cpuset controller (recorded with the board's description)."""
    record_property("lab_board", board.describe())
    assert out(board, "uname", "-m") == machine
    assert "PREEMPT_RT" in out(board, "uname", "-v")
    assert out(board, "cat", "/sys/kernel/realtime") == "1"
    controllers = out(board, "cat", "/sys/fs/cgroup/cgroup.controllers").split()
    assert "cpuset" in controllers


def test_x86_board_is_preempt_rt_with_tracers_and_cgroup2(
        x86_board: Board, record_property: Callable[[str, object], None]) -> None:
    assert_preempt_rt_with_cpuset(x86_board, "x86_64", record_property)
    tracers = out(x86_board, "cat", "/sys/kernel/tracing/available_tracers").split()
    assert {"timerlat", "osnoise", "hwlat"} <= set(tracers)
    # cgroup v2 only, mounted where rtlab looks for it, and no controller enabled by the
    # board's init (rtlab's shield enables and restores them itself).
    mounts = out(x86_board, "cat", "/proc/mounts").splitlines()
    assert any(m.split()[1:3] == ["/sys/fs/cgroup", "cgroup2"] for m in mounts)
    assert out(x86_board, "cat", "/sys/fs/cgroup/cgroup.subtree_control") == ""
    assert out(x86_board, "nproc") == str(x86_board.cpus)


def test_arm64_board_is_preempt_rt(
        arm64_board: Board, record_property: Callable[[str, object], None]) -> None:
    assert_preempt_rt_with_cpuset(arm64_board, "aarch64", record_property)


@pytest.mark.parametrize("kind", sorted(BOARD_FIXTURES))
def test_no_python_on_the_board(kind: str, request: pytest.FixtureRequest) -> None:
    board: Board = request.getfixturevalue(BOARD_FIXTURES[kind])
    # In the image: every path of the initramfs, read from the archive itself.
    names = initramfs_names(board.image)
    assert "init" in names and "bin/busybox" in names
    assert [n for n in names if any(part.lower().startswith("python")
                                    for part in n.split("/"))] == []
    # On the running board: no interpreter on PATH, no python* file anywhere.
    r = board.ssh("sh", "-c", "command -v python3 python")
    assert r.returncode != 0 and r.stdout.strip() == ""
    found = out(board, "find", "/", "/tmp", "/run", "-xdev", "-iname", "python*")
    assert found == ""


def test_the_unprivileged_user_logs_in_and_is_not_root(x86_board: Board) -> None:
    assert out(x86_board, "id", "-un", user="lab") == "lab"
    assert out(x86_board, "id", "-u", user="lab") == "1000"
    denied = x86_board.ssh("sh", "-c", "echo 950000 >/proc/sys/kernel/sched_rt_runtime_us",
                           user="lab")
    assert denied.returncode != 0
    assert out(x86_board, "id", "-u") == "0"


def test_the_host_copies_and_runs_a_file_in_tmp(x86_board: Board, tmp_path: Path) -> None:
    script = tmp_path / "hello.sh"
    script.write_text("#!/bin/sh\necho \"hello from $(hostname) $1\"\n")
    x86_board.copy_to(script, "/tmp/hello.sh")
    assert out(x86_board, "/tmp/hello.sh", "it's me") == "hello from lab-x86 it's me"
    out(x86_board, "rm", "/tmp/hello.sh")


def test_plain_ssh_and_scp_work_with_the_boards_ssh_config(x86_board: Board,
                                                            tmp_path: Path) -> None:
    cfg, alias = str(x86_board.ssh_config), x86_board.alias
    r = subprocess.run(["ssh", "-F", cfg, alias, "hostname"], stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == x86_board.name
    # scp (SFTP protocol): the board has OpenSSH's sftp-server for dropbear.
    src = tmp_path / "data.bin"
    src.write_bytes(bytes(range(256)) * 64)
    r = subprocess.run(["scp", "-q", "-F", cfg, str(src), f"{alias}:/tmp/data.bin"],
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120,
                       check=False)
    assert r.returncode == 0, r.stderr
    remote_sum = out(x86_board, "sha256sum", "/tmp/data.bin").split()[0]
    assert remote_sum == hashlib.sha256(src.read_bytes()).hexdigest()
    out(x86_board, "rm", "/tmp/data.bin")


def test_rtla_runs_on_the_x86_board(x86_board: Board) -> None:
    """Debian's rtla (and its libraries) is on the board, for timerlat histograms."""
    r = x86_board.ssh("rtla", "timerlat", "hist", "-d", "2s", "-c", "0", timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "count:" in r.stdout and "max:" in r.stdout


def test_a_fresh_board_respawns_dropbear_and_powers_off(
        fresh_board: Callable[..., Board]) -> None:
    board = fresh_board("aarch64-rt", cpus=1, mem_mb=256)
    assert out(board, "nproc") == "1"
    # Kill the listening dropbear (the parent of the one serving this command): init
    # starts another, and the board answers again.
    listener = out(board, "sh", "-c", 'cut -d" " -f4 "/proc/$PPID/stat"')
    assert out(board, "cat", f"/proc/{listener}/comm") == "dropbear"
    out(board, "kill", listener)
    board.wait_ready()
    assert out(board, "sh", "-c", 'cut -d" " -f4 "/proc/$PPID/stat"') != listener
    assert out(board, "cat", "/sys/kernel/realtime") == "1"
    board.ssh("poweroff")
    assert board.wait_exited(120) is not None, "the board did not power off"
    assert not board.running


def _rx_packets(board: Board) -> int:
    return int(out(board, "cat", "/sys/class/net/eth1/statistics/rx_packets"))


def test_linked_boards_ping_each_other_over_their_own_link(
        x86_board: Board, arm64_board: Board, lab_link: tuple[LinkSpec, LinkSpec]) -> None:
    x86_end, arm_end = lab_link
    rx_before = _rx_packets(arm64_board), _rx_packets(x86_board)
    # -w: overall deadline; busybox ping exits 0 once it got its replies.
    r = x86_board.ssh("ping", "-c", "3", "-i", "0.2", "-w", "60", arm_end.ip)
    assert r.returncode == 0, r.stdout + r.stderr
    r = arm64_board.ssh("ping", "-c", "3", "-i", "0.2", "-w", "60", x86_end.ip)
    assert r.returncode == 0, r.stdout + r.stderr
    # The echo requests arrived on each board's link NIC (eth1), not on eth0.
    assert _rx_packets(arm64_board) >= rx_before[0] + 3
    assert _rx_packets(x86_board) >= rx_before[1] + 3
    assert f"inet {arm_end.address}" in out(arm64_board, "ip", "-4", "addr", "show", "eth1")


def test_the_link_is_not_the_hosts() -> None:
    """The host has no address on the link's subnet and no on-link route to it: its
    frames only pass through the host inside qemu's UDP datagrams. Checked from the
    host's own tables; no packet is sent to the link's private addresses from here."""
    if shutil.which("ip") is None:
        pytest.skip("iproute2's ip is not installed")
    subnet = ipaddress.ip_network("10.77.0.0/24")
    addrs = json.loads(subprocess.run(["ip", "-j", "-4", "addr", "show"], capture_output=True,
                                      text=True, check=True).stdout)
    mine = [a["local"] for link in addrs for a in link.get("addr_info", [])]
    assert mine and not [a for a in mine if ipaddress.ip_address(a) in subnet]
    for dst in ("10.77.0.1", "10.77.0.2"):
        r = subprocess.run(["ip", "-j", "-4", "route", "get", dst], capture_output=True,
                           text=True, check=False)
        if r.returncode != 0:
            continue  # unreachable from the host at all
        route = json.loads(r.stdout)[0]
        assert "gateway" in route or route.get("type") in ("unreachable", "prohibit",
                                                           "blackhole"), route


def test_kvm_is_tried_once_for_x86(lab_note: Callable[[str], None]) -> None:
    """RTLAB_LAB_KVM=1 lets boards try KVM; this records whether it works here. Either
    way the hung or booted qemu is stopped for good."""
    usable, why = kvm_usable()
    if not usable:
        lab_note(f"KVM not tried: {why}")
        pytest.skip(f"KVM not tried: {why}")
    timeout = float(os.environ.get("RTLAB_LAB_KVM_PROBE_TIMEOUT", "10"))
    board = Board.start("lab-kvm", "x86_64-rt", accel="kvm", mem_mb=256)
    pid = board.pid
    assert pid is not None
    try:
        board.wait_ready(timeout)
    except BoardError as exc:
        assert not board.running
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)  # wait_ready's failure killed and reaped the hung qemu
        console = [ln for ln in board.console_log().splitlines() if ln.strip()]
        last = console[-1] if console else "no console output at all"
        note = (f"KVM x86_64: {str(exc).splitlines()[0]}; last console line: {last!r}"
                + (f"; {why}" if why else ""))
        lab_note(note)
        pytest.skip(note)
    with board:
        lab_note(board.describe())
        assert "PREEMPT_RT" in out(board, "uname", "-v")
    assert not board.running
