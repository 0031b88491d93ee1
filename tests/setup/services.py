# SPDX-License-Identifier: MIT
"""What services a machine has enabled and running, and what listens, read from the
files (so it works with and without systemd as the init system), and a runner that
catches every process a command leaves behind.

The judge of the set-up tests: written apart from scripts/setup.sh's own bookkeeping
and wider than it (every runlevel's start links, every .wants/.requires entry, every
listening TCP socket and bound UDP socket of this network namespace)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.support.procs import processes

SUBREAPER = Path(__file__).resolve().parent / "subreaper.py"

# /proc/net/* socket states: TCP LISTEN, and UDP "unconnected" (bound, no peer)
TCP_LISTEN = "0A"
UDP_UNCONNECTED = "07"


def enabled_services(root: Path = Path("/")) -> set[str]:
    """Every enabled unit link (/etc/systemd/system/*.wants|*.requires/*) and SysV start
    link (/etc/rc?.d/S*), as paths below root."""
    etc = root / "etc"
    found: set[str] = set()
    for pattern in ("systemd/system/*.wants/*", "systemd/system/*.requires/*",
                    "rc?.d/S*"):
        for path in etc.glob(pattern):
            found.add("/" + str(path.relative_to(root)))
    return found


def systemd_runs(root: Path = Path("/")) -> bool:
    """Whether systemd is this machine's init system (sd_booted()'s test)."""
    return (root / "run" / "systemd" / "system").is_dir()


def systemd_state() -> tuple[set[str], set[str]]:
    """(enabled unit files, running services and listening sockets) as systemctl sees
    them; empty where systemd is not the init system."""
    if not systemd_runs():
        return set(), set()

    def units(*args: str) -> set[str]:
        r = subprocess.run(["systemctl", *args, "--no-legend", "--plain", "--no-pager"],
                           capture_output=True, text=True, timeout=60, check=True)
        return {line.split()[0] for line in r.stdout.splitlines() if line.strip()}

    return (units("list-unit-files", "--state=enabled"),
            units("list-units", "--type=service,socket", "--state=running,listening"))


@dataclass(frozen=True, order=True)
class Listener:
    proto: str  # tcp, tcp6, udp, udp6
    address: str  # as /proc/net shows it (hex)
    port: int
    inode: int


def parse_proc_net(proto: str, text: str) -> set[Listener]:
    """The listening (TCP) or bound unconnected (UDP) sockets of one /proc/net table."""
    want = TCP_LISTEN if proto.startswith("tcp") else UDP_UNCONNECTED
    out: set[Listener] = set()
    for line in text.splitlines()[1:]:
        f = line.split()
        if len(f) < 10 or f[3] != want:
            continue
        address, port = f[1].rsplit(":", 1)
        out.add(Listener(proto, address, int(port, 16), int(f[9])))
    return out


def listeners(proc_net: Path = Path("/proc/net")) -> set[Listener]:
    found: set[Listener] = set()
    for proto in ("tcp", "tcp6", "udp", "udp6"):
        with contextlib.suppress(FileNotFoundError):  # no IPv6
            found |= parse_proc_net(proto, (proc_net / proto).read_text())
    return found


def socket_owners(inodes: set[int]) -> dict[int, set[int]]:
    """inode -> pids holding that socket open."""
    owners: dict[int, set[int]] = {}
    wanted = {f"socket:[{i}]": i for i in inodes}
    for pid, _ in processes():
        try:
            fds = os.scandir(f"/proc/{pid}/fd")
            for fd in fds:
                try:
                    target = os.readlink(fd.path)
                except OSError:
                    continue
                if target in wanted:
                    owners.setdefault(wanted[target], set()).add(pid)
        except OSError:
            continue
    return owners


def exe_of(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return None


def processes_running(files: set[str]) -> dict[int, str]:
    """pid -> executable of every live process whose executable is one of files."""
    out: dict[int, str] = {}
    for pid, fields in processes():
        if fields[0] == "Z":
            continue
        exe = exe_of(pid)
        if exe is not None and exe.removesuffix(" (deleted)") in files:
            out[pid] = exe
    return out


@dataclass(frozen=True)
class Snapshot:
    enabled: set[str]
    systemd_enabled: set[str]
    systemd_running: set[str]
    listening: set[Listener]

    @staticmethod
    def take() -> Snapshot:
        sd_enabled, sd_running = systemd_state()
        return Snapshot(enabled_services(), sd_enabled, sd_running, listeners())


@dataclass(frozen=True)
class Reaped:
    returncode: int
    output: str
    leftovers: list[dict[str, object]]  # {"pid", "exe", "cmdline"} of what outlived it


def run_subreaped(cmd: list[str], *, timeout: float, cwd: Path | None = None,
                  env: dict[str, str] | None = None) -> Reaped:
    """Run cmd under a child subreaper: every process it leaves behind (a daemon that
    double-forked away is re-parented to the subreaper, not to init) is reported and
    then killed, so nothing outlives the test either way."""
    report = Path(os.environ.get("TMPDIR", "/tmp")) / f"rtlab-subreaper-{os.getpid()}.json"
    try:
        r = subprocess.run([sys.executable, str(SUBREAPER), str(report), str(timeout), *cmd],
                           cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, timeout=timeout + 60)
        data = json.loads(report.read_text())
    finally:
        report.unlink(missing_ok=True)
    assert r.returncode == 0, f"the subreaper failed: {r.stdout}"
    return Reaped(data["returncode"], data["output"], data["leftovers"])
