# SPDX-License-Identifier: MIT
"""A "board" on this machine for fast SSH tests: a network namespace joined to the
root namespace by a veth pair, with dropbear (Debian's dropbear-bin, the SSH server
of the emulated boards too) listening inside it.

The board shares this machine's kernel and files, so it proves the SSH path (the
connection, quoting, engine copy, streaming, journals on the far side, dropped
links), not a foreign kernel: that is what the emulated boards (tests/lab) are for.
Root's home is replaced by a private directory in the server's mount namespace, so
the test key never touches this machine's /root/.ssh.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

BOOT_TIMEOUT_S = 30.0


@dataclass
class NsBoard:
    name: str  # the ssh_config alias
    netns: str
    addr: str
    ssh_config: Path
    key: Path
    server: subprocess.Popen[bytes]
    workdir: Path
    host_addr: str
    veth: str
    run_dir: Path  # what the board sees as /run/rtlab (its journals, its owner lock)

    def ssh_argv(self, *remote: str) -> list[str]:
        import shlex

        return ["ssh", "-F", str(self.ssh_config), "-T", "--", self.name,
                shlex.join(remote)]

    def ssh(self, *remote: str, timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.ssh_argv(*remote), capture_output=True, text=True,
                              timeout=timeout, check=False)

    def cut_link(self) -> None:
        """Take the board's link down (packets stop; nothing closes cleanly)."""
        subprocess.run(["ip", "link", "set", self.veth, "down"], check=True)

    def restore_link(self) -> None:
        subprocess.run(["ip", "link", "set", self.veth, "up"], check=True)


def available() -> str | None:
    """Why this fixture cannot run here, or None."""
    if os.geteuid() != 0:
        return "needs root (network namespaces)"
    for tool in ("ip", "dropbear", "dropbearkey", "ssh", "ssh-keygen", "unshare", "nsenter"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (make setup installs dropbear-bin, openssh-client)"
    return None


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


def _wait_port(ns: str, addr: str, port: int, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + BOOT_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
            raise RuntimeError(f"dropbear exited: {err[-500:]}")
        with socket.socket() as s:
            s.settimeout(0.5)
            with suppress(OSError):
                s.connect((addr, port))
                return
        time.sleep(0.1)
    raise RuntimeError(f"dropbear in {ns} did not listen within {BOOT_TIMEOUT_S:g} s")


def _free_net(first: int) -> int:
    """A 10.N.0.0/16 that no address of this machine's namespace is in (another test
    run's boards live there too), searched from `first` on."""
    out = subprocess.run(["ip", "-o", "-4", "addr", "show"], capture_output=True, text=True,
                         check=True).stdout
    used = {int(w.split(".")[1]) for w in out.split() if w.startswith("10.") and "/" in w}
    for k in range(200):
        net = 16 + (first - 16 + k) % 200
        if net not in used:
            return net
    raise RuntimeError("no free 10.N.0.0/16 for a namespace board")


@contextmanager
def ns_board(workdir: Path, tag: str = "b", index: int = 0) -> Iterator[NsBoard]:
    """Boot one namespace board; everything is removed at the end."""
    pid = os.getpid()
    ns = f"rtlb-{tag}{index}-{pid}"
    veth, peer = f"rtlh{tag[:2]}{index}{pid}"[:15], "eth0"  # in this machine's namespace
    net = _free_net(16 + (pid + 7 * index) % 200)
    host_addr, addr = f"10.{net}.{index + 40}.1", f"10.{net}.{index + 40}.2"
    workdir.mkdir(parents=True, exist_ok=True)
    home = workdir / "home"
    (home / ".ssh").mkdir(parents=True, exist_ok=True)
    key = workdir / "id_ed25519"
    hostkey = workdir / "hostkey"
    if not key.exists():
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)],
                       check=True)
    subprocess.run(["dropbearkey", "-t", "ed25519", "-f", str(hostkey)], check=True,
                   capture_output=True)
    pub = subprocess.run(["dropbearkey", "-y", "-f", str(hostkey)], check=True,
                         capture_output=True, text=True).stdout
    hostline = next(ln for ln in pub.splitlines() if ln.startswith("ssh-"))
    (home / ".ssh" / "authorized_keys").write_text(key.with_suffix(".pub").read_text())
    os.chmod(home / ".ssh" / "authorized_keys", 0o600)
    os.chmod(home / ".ssh", 0o700)
    known = workdir / "known_hosts"
    known.write_text(f"{addr} {' '.join(hostline.split()[:2])}\n")
    name = f"nsboard{index}"
    run_dir = workdir / "run-rtlab"  # the board's /run/rtlab
    run_dir.mkdir(mode=0o700, exist_ok=True)
    config = workdir / "ssh_config"
    config.write_text(
        f"Host {name}\n  HostName {addr}\n  User root\n  IdentityFile {key}\n"
        f"  IdentitiesOnly yes\n  UserKnownHostsFile {known}\n"
        "  StrictHostKeyChecking yes\n  LogLevel ERROR\n"
        # the same board under a second name whose host key is wrong (changed key test)
        f"Host {name}-badkey\n  HostName {addr}\n  User root\n  IdentityFile {key}\n"
        f"  IdentitiesOnly yes\n  UserKnownHostsFile {workdir / 'known_hosts.bad'}\n"
        "  StrictHostKeyChecking yes\n  LogLevel ERROR\n")
    wrong = subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f",
                            str(workdir / "wronghost")], check=True)
    del wrong
    (workdir / "known_hosts.bad").write_text(
        f"{addr} {' '.join((workdir / 'wronghost.pub').read_text().split()[:2])}\n")
    server: subprocess.Popen[bytes] | None = None
    try:
        _ip("netns", "add", ns)
        _ip("link", "add", veth, "type", "veth", "peer", "name", peer, "netns", ns)
        _ip("addr", "add", f"{host_addr}/30", "dev", veth)
        _ip("link", "set", veth, "up")
        _ip("-n", ns, "addr", "add", f"{addr}/30", "dev", peer)
        _ip("-n", ns, "link", "set", peer, "up")
        _ip("-n", ns, "link", "set", "lo", "up")
        # its own hostname, root's home and /run/rtlab (journals and the owner lock of
        # this board, apart from this machine's and other boards')
        script = ('hostname "$5" && mount --bind "$1" /root && mkdir -p /run/rtlab && '
                  'mount --bind "$6" /run/rtlab && exec dropbear -F -E -s -j -k '
                  '-r "$2" -p "$3:22" -P "$4"')
        server = subprocess.Popen(
            # nsenter, not `ip netns exec`: that remounts /sys, which hides the cgroup
            # hierarchies the board's shield must see
            ["nsenter", f"--net=/run/netns/{ns}", "unshare", "--mount", "--uts",
             "--propagation", "private",
             "sh", "-c", script, "nsboard", str(home), str(hostkey), addr,
             str(workdir / "dropbear.pid"), name, str(run_dir)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            start_new_session=True)
        _wait_port(ns, addr, 22, server)
        yield NsBoard(name=name, netns=ns, addr=addr, ssh_config=config, key=key,
                      server=server, workdir=workdir, host_addr=host_addr, veth=veth,
                      run_dir=run_dir)
    finally:
        if server is not None:
            with suppress(ProcessLookupError):
                os.killpg(server.pid, signal.SIGTERM)
            with suppress(subprocess.TimeoutExpired):
                server.wait(timeout=5)
        # every process still in the namespace (dropbear's children) goes with it
        pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True,
                              check=False).stdout.split()
        for p in pids:
            with suppress(ProcessLookupError, ValueError):
                os.kill(int(p), signal.SIGKILL)
        subprocess.run(["ip", "link", "del", veth], capture_output=True, check=False)
        subprocess.run(["ip", "netns", "del", ns], capture_output=True, check=False)


@contextmanager
def board_link(a: NsBoard, b: NsBoard, subnet: str = "10.78.0") -> Iterator[tuple[str, str]]:
    """A cable between two namespace boards (a veth pair, eth1 on each):
    (a's address, b's address). Traffic between them never enters this machine's
    own namespace."""
    try:
        _ip("link", "add", "eth1", "netns", a.netns, "type", "veth", "peer", "name", "eth1",
            "netns", b.netns)
        for board, host in ((a, 1), (b, 2)):
            _ip("-n", board.netns, "addr", "add", f"{subnet}.{host}/24", "dev", "eth1")
            _ip("-n", board.netns, "link", "set", "eth1", "up")
        yield f"{subnet}.1", f"{subnet}.2"
    finally:
        subprocess.run(["ip", "-n", a.netns, "link", "del", "eth1"], capture_output=True,
                       check=False)
