# SPDX-License-Identifier: MIT
"""Emulated lab boards (docs/lab.md): qemu-system boots one of Debian 12's kernels
with a Python-free initramfs built by scripts/lab/build-image.sh, reachable over SSH
from 127.0.0.1 with the lab's key.

    with Board.boot("lab1", kind="aarch64-rt") as board:
        print(board.ssh("uname", "-m").stdout)      # -> aarch64
        # ssh -F <board.ssh_config> <board.alias> ... works from any tool

Two boards joined by a link (a second NIC whose frames travel between the two qemu
processes, never through the host's network stack):

    a_end, b_end = link_pair()
    a = Board.boot("a", link=a_end)                  # 10.77.0.1/24 on eth1
    b = Board.boot("b", kind="aarch64-rt", link=b_end)  # 10.77.0.2/24 on eth1

Several boards may run at once: each has its own port, temporary directory and qemu.
Start qemu processes from one thread (the one that stops them): a board's qemu is
killed by the kernel when the thread that started it ends (PR_SET_PDEATHSIG), so a
killed test session never leaves boards running.
"""

from __future__ import annotations

import contextlib
import ctypes
import gzip
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, NoReturn, Self

REPO = Path(__file__).resolve().parents[2]
LAB_SCRIPTS = REPO / "scripts" / "lab"
BUILD_SCRIPT = LAB_SCRIPTS / "build-image.sh"
KINDS: tuple[str, ...] = tuple(sorted(p.stem for p in (LAB_SCRIPTS / "boards").glob("*.conf")))

# build-image.sh exit codes
_BUILD_STALE = 3
_BUILD_UNAVAILABLE = 77

# The NIC on qemu's user network (eth0 on the board) and its fixed guest address.
USER_MAC = "52:54:00:12:34:56"
USER_ADDR = "10.0.2.15"
# Default boot timeout: generous, the machine may be loaded (TCG is slow then).
BOOT_TIMEOUT = float(os.environ.get("RTLAB_LAB_BOOT_TIMEOUT", "180"))
# How long a KVM boot may take before RTLAB_LAB_KVM=1 falls back to TCG.
KVM_TIMEOUT = float(os.environ.get("RTLAB_LAB_KVM_TIMEOUT", "30"))
DEFAULT_MEM_MB = 384
# What the board's init prints on the console once the network is up (init.sh).
READY_MARKER = "rtlab-lab: ready"
READY_GRACE = 30.0
# A rebootable board's control socket (in its directory) and what the kernel prints on
# the console when the guest powers itself off (then the board stays off).
REBOOT_SOCKET = "reboot.sock"
POWER_DOWN_MARKER = "reboot: Power down"
REBOOT_ENV_BOOT, REBOOT_ENV_CMDLINE = "RTLAB_BOOT", "RTLAB_CMDLINE"

Accel = Literal["tcg", "kvm"]

# Debian package of each qemu-system binary, for the skip reason when it is missing.
_QEMU_PACKAGE = {
    "qemu-system-x86_64": "qemu-system-x86",
    "qemu-system-aarch64": "qemu-system-arm",
    "qemu-system-arm": "qemu-system-arm",
}


class BoardError(RuntimeError):
    """A board did not boot or answer; the message ends with its console's last lines."""


class LabUnavailable(RuntimeError):
    """A board cannot be built or booted on this machine (outside pytest)."""


# $RTLAB_SSH_CONFIG is set in this process's environment only while `board_facts` reads
# a board in-process, under this lock: threads that did it at once restored each other's
# value and left one set for every later test.
SSH_CONFIG_ENV_LOCK = threading.RLock()


def board_facts(board: Board) -> Any:
    """The board's `sys facts`, read there by its engine, from this process."""
    from rtlab.engine.board import SshTransport
    from rtlab.system.facts import read_facts

    with SSH_CONFIG_ENV_LOCK:
        old = os.environ.get("RTLAB_SSH_CONFIG")
        os.environ["RTLAB_SSH_CONFIG"] = str(board.ssh_config)
        try:
            t = SshTransport(board.alias)
            try:
                return read_facts(t)
            finally:
                t.close()
        finally:
            if old is None:
                os.environ.pop("RTLAB_SSH_CONFIG", None)
            else:
                os.environ["RTLAB_SSH_CONFIG"] = old

def _unavailable(reason: str) -> NoReturn:
    """Skip the calling test with `reason` (under pytest), else raise LabUnavailable."""
    if "pytest" in sys.modules:
        import pytest

        pytest.skip(reason)
    raise LabUnavailable(reason)


def lab_cache() -> Path:
    """Where images are cached: $RTLAB_LAB_CACHE, else $XDG_CACHE_HOME/rtlab/lab."""
    env = os.environ.get("RTLAB_LAB_CACHE")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "rtlab" / "lab"


class _ImageFile:
    """A file of a built image, by its name in the image's directory (build-image.sh
    writes them): `image.kernel` is `image.dir / "vmlinuz"`."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, image: ImagePaths, owner: type | None = None) -> Path:
        return image.dir / self.name


@dataclass(frozen=True)
class ImagePaths:
    """A built board image in the cache (scripts/lab/build-image.sh)."""

    kind: str
    dir: Path
    manifest: dict[str, Any]

    kernel = _ImageFile("vmlinuz")
    initramfs = _ImageFile("initramfs.cpio.gz")
    kernel_config = _ImageFile("config")
    client_key = _ImageFile("id_ed25519")
    client_key_pub = _ImageFile("id_ed25519.pub")
    host_key = _ImageFile("dropbear_ed25519_host_key")
    known_hosts = _ImageFile("known_hosts")
    manifest_path = _ImageFile("manifest.json")

    @property
    def host_key_alias(self) -> str:
        return str(self.manifest["host_key_alias"])

    @property
    def qemu(self) -> dict[str, str]:
        return dict(self.manifest["qemu"])

    @property
    def kernel_release(self) -> str:
        return str(self.manifest["kernel"]["release"])


_UNBUILDABLE: dict[str, str] = {}


def ensure_image(kind: str) -> ImagePaths:
    """The cached image of board `kind`, built first when it is missing or its recipe
    changed. Skips the calling test, with the reason, when it cannot be built or
    booted here (no network for the download, a missing host tool or qemu); outside
    pytest it raises LabUnavailable instead."""
    if kind not in KINDS:
        raise ValueError(f"unknown board kind {kind!r} (known: {', '.join(KINDS)})")
    if kind in _UNBUILDABLE:  # tried and failed in this process: do not wait again
        _unavailable(_UNBUILDABLE[kind])
    for tool, package in (("ssh", "openssh-client"), ("ssh-keygen", "openssh-client")):
        if shutil.which(tool) is None:
            _unavailable(f"lab board {kind}: {tool} is not installed (Debian: {package})")
    check = subprocess.run([str(BUILD_SCRIPT), "--check", kind], capture_output=True,
                           text=True, check=False)
    if check.returncode not in (0, _BUILD_STALE):
        raise BoardError(f"{BUILD_SCRIPT} --check {kind} failed: {check.stderr.strip()}")
    if check.returncode == _BUILD_STALE:
        build = subprocess.run([str(BUILD_SCRIPT), kind], capture_output=True, text=True,
                               check=False, timeout=3600)
        lines = build.stderr.strip().splitlines()
        if build.returncode == _BUILD_UNAVAILABLE:
            _UNBUILDABLE[kind] = (f"lab board {kind} cannot be built here: "
                                  f"{lines[-1] if lines else 'no reason given'}")
            _unavailable(_UNBUILDABLE[kind])
        if build.returncode != 0:
            raise BoardError(f"building lab board {kind} failed (exit {build.returncode}):\n"
                             + "\n".join(lines[-30:]))
    out = lab_cache() / kind
    image = ImagePaths(kind, out, json.loads((out / "manifest.json").read_text()))
    qemu = image.qemu["binary"]
    if shutil.which(qemu) is None:
        _unavailable(f"lab board {kind}: {qemu} is not installed "
                     f"(Debian: {_QEMU_PACKAGE.get(qemu, qemu)}; scripts/setup.sh installs it)")
    return image


def initramfs_names(image: ImagePaths) -> list[str]:
    """Every path in the image's initramfs, read from the cpio archive itself
    ("newc" format: 110-byte ASCII headers, names and data padded to 4 bytes)."""
    data = gzip.decompress(image.initramfs.read_bytes())
    names: list[str] = []
    off = 0
    while True:
        header = data[off:off + 110]
        if header[:6] not in (b"070701", b"070702"):
            raise ValueError(f"{image.initramfs}: no cpio newc header at byte {off}")
        fields = [int(header[6 + 8 * i:14 + 8 * i], 16) for i in range(13)]
        filesize, namesize = fields[6], fields[11]
        name = data[off + 110:off + 110 + namesize - 1].decode()
        off = (off + 110 + namesize + 3) & ~3
        if name == "TRAILER!!!":
            return names
        names.append(name)
        off = (off + filesize + 3) & ~3


def _free_port(kind: int) -> int:
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class LinkSpec:
    """One end of a board-to-board link: a second virtio NIC (eth1 on the board) whose
    Ethernet frames qemu sends as UDP datagrams from 127.0.0.1:local_port to the other
    end's qemu at 127.0.0.1:peer_port (`-netdev socket,udp=...,localaddr=...`). The
    host's stack only carries the datagrams; it has no address on the link."""

    address: str  # the board's address with prefix, e.g. "10.77.0.1/24"
    mac: str
    local_port: int
    peer_port: int

    @property
    def ip(self) -> str:
        return self.address.split("/")[0]


def link_pair(subnet: str = "10.77.0") -> tuple[LinkSpec, LinkSpec]:
    """Both ends of a new link: <subnet>.1/24 and <subnet>.2/24."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s1, \
            socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s2:
        s1.bind(("127.0.0.1", 0))
        s2.bind(("127.0.0.1", 0))
        p1, p2 = int(s1.getsockname()[1]), int(s2.getsockname()[1])
    tag = p1 % 256
    return (LinkSpec(f"{subnet}.1/24", f"52:54:00:77:{tag:02x}:01", p1, p2),
            LinkSpec(f"{subnet}.2/24", f"52:54:00:77:{tag:02x}:02", p2, p1))


def kvm_usable() -> tuple[bool, str]:
    """Whether -enable-kvm can be tried here, and why not."""
    if not os.path.exists("/dev/kvm"):
        return False, "no /dev/kvm"
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return False, "/dev/kvm is not accessible to this user"
    if os.path.isdir("/sys/module/kvm_pvm"):
        return True, ("the host's KVM is kvm_pvm (PVM nested virtualization), which runs "
                      "only guest kernels built for PVM: Debian's kernels are expected to hang")
    return True, ""


def _set_pdeathsig() -> None:
    """In the child before exec: die with the thread that started us."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


@dataclass
class Board:
    """A running emulated board. Create it with Board.boot() (or start() then
    wait_ready()); always stop() it (a `with` block does)."""

    name: str
    image: ImagePaths
    cpus: int
    mem_mb: int
    link: LinkSpec | None
    accel: Accel
    tmpdir: Path
    own_tmpdir: bool
    port: int = 0
    accel_note: str = ""
    boot_seconds: float | None = None
    qemu_cmd: list[str] = field(default_factory=list)
    _proc: subprocess.Popen[bytes] | None = None
    _started: float = 0.0
    _console_final: str | None = None
    rebootable: bool = False
    # every qemu start of a rebootable board: (why, -append) -- "boot", "once",
    # "original", "reboot" (the guest rebooted or qemu ended: the original again)
    boots: list[tuple[str, str]] = field(default_factory=list)
    _lock: threading.RLock = field(default_factory=threading.RLock)
    _stopping: threading.Event = field(default_factory=threading.Event)
    _control: threading.Thread | None = None
    _answered: bool = False  # SSH answered once (until then wait_ready handles qemu)

    # ------------------------------------------------------------------ lifecycle
    @classmethod
    def start(cls, name: str, kind: str = "x86_64-rt", *, cpus: int = 2,
              mem_mb: int = DEFAULT_MEM_MB, link: LinkSpec | None = None,
              accel: Accel = "tcg", tmpdir: Path | None = None,
              rebootable: bool = False) -> Board:
        """Start qemu for a new board and return at once (see wait_ready). `rebootable`:
        the board also answers the lab's reboot command (`reboot_command`, docs/lab.md)
        and comes back by itself when its guest reboots or panics."""
        if not re.fullmatch(r"[a-z0-9][a-z0-9-]{0,62}", name):
            raise ValueError(f"board name {name!r}: lower-case letters, digits and '-' only")
        image = ensure_image(kind)
        if accel == "kvm" and not image.qemu.get("kvm_cpu"):
            raise ValueError(f"board kind {kind} has no KVM CPU model (QEMU_KVM_CPU)")
        own = tmpdir is None
        path = Path(tempfile.mkdtemp(prefix=f"rtlab-lab-{name}-")) if tmpdir is None else tmpdir
        path.mkdir(parents=True, exist_ok=True)
        board = cls(name=name, image=image, cpus=cpus, mem_mb=mem_mb, link=link, accel=accel,
                    tmpdir=path, own_tmpdir=own, rebootable=rebootable)
        shutil.copyfile(image.known_hosts, board.known_hosts)
        board._launch()
        if rebootable:
            board._start_control()
        return board

    @classmethod
    def boot(cls, name: str, kind: str = "x86_64-rt", *, cpus: int = 2,
             mem_mb: int = DEFAULT_MEM_MB, link: LinkSpec | None = None,
             accel: Accel | None = None, timeout: float | None = None,
             tmpdir: Path | None = None, rebootable: bool = False) -> Board:
        """Start a board and wait until it answers over SSH. accel None: TCG, or KVM
        first when RTLAB_LAB_KVM=1 (falling back to TCG, with the reason in
        accel_note, when KVM does not boot within RTLAB_LAB_KVM_TIMEOUT seconds)."""
        note = ""
        if accel is None:
            accel = "tcg"
            image = ensure_image(kind)
            if os.environ.get("RTLAB_LAB_KVM") == "1":
                usable, why = kvm_usable()
                if not image.qemu.get("kvm_cpu"):
                    note = f"RTLAB_LAB_KVM=1 ignored: board kind {kind} has no KVM CPU model"
                elif not usable:
                    note = f"RTLAB_LAB_KVM=1 ignored: {why}"
                else:
                    board = cls.start(name, kind, cpus=cpus, mem_mb=mem_mb, link=link,
                                      accel="kvm", tmpdir=tmpdir, rebootable=rebootable)
                    try:
                        return board.wait_ready(KVM_TIMEOUT)
                    except BoardError as exc:
                        first = str(exc).splitlines()[0]
                        note = f"KVM tried first and fell back to TCG: {first}"
                        if why:
                            note += f" ({why})"
        board = cls.start(name, kind, cpus=cpus, mem_mb=mem_mb, link=link, accel=accel,
                          tmpdir=tmpdir, rebootable=rebootable)
        board.accel_note = note
        return board.wait_ready(timeout)

    @property
    def original_append(self) -> str:
        """The board's own kernel command line (the lab's arguments: console, panic=1,
        host name, NIC MACs, link address)."""
        q = self.image.qemu
        append = [f"console={q['console']}", "panic=1", f"rtlab.hostname={self.name}",
                  f"rtlab.mac={USER_MAC}"]
        if self.link is not None:
            append += [f"rtlab.link={self.link.address}", f"rtlab.linkmac={self.link.mac}"]
        if q.get("kernel_args"):
            append.append(q["kernel_args"])
        return " ".join(append)

    def _qemu_command(self, append: str | None = None) -> list[str]:
        """qemu's command line; `append` instead of the original kernel command line."""
        q = self.image.qemu
        con = self.tmpdir / "console.sock"
        log = self.tmpdir / "console.log"
        if len(str(con)) < 100:  # a Unix socket path is at most 107 bytes
            chardev = f"socket,id=con,path={con},server=on,wait=off,logfile={log}"
        else:
            chardev = f"file,id=con,path={log}"
        cmd = [q["binary"], "-M", q["machine"]]
        if self.accel == "kvm":
            cmd += ["-accel", "kvm", "-cpu", q["kvm_cpu"]]
        else:
            cmd += ["-accel", "tcg", "-cpu", q["cpu"]]
        cmd += ["-smp", str(self.cpus), "-m", str(self.mem_mb),
                "-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
                "-monitor", "none",
                "-kernel", str(self.image.kernel), "-initrd", str(self.image.initramfs),
                "-append", self.original_append if append is None else append,
                "-chardev", chardev, "-serial", "chardev:con",
                # restrict=on: the board reaches nothing through the user network; only
                # the forwarded SSH port (on the host's loopback) reaches it.
                "-netdev", f"user,id=net0,restrict=on,hostfwd=tcp:127.0.0.1:{self.port}-:22",
                "-device", f"{q['nic']},netdev=net0,mac={USER_MAC}"]
        if q.get("rng"):
            cmd += ["-device", q["rng"]]
        if self.link is not None:
            cmd += ["-netdev", (f"socket,id=link0,udp=127.0.0.1:{self.link.peer_port},"
                                f"localaddr=127.0.0.1:{self.link.local_port}"),
                    "-device", f"{q['nic']},netdev=link0,mac={self.link.mac}"]
        return cmd

    def _launch(self) -> None:
        self.port = _free_port(socket.SOCK_STREAM)
        self._write_ssh_config()
        for f in ("console.log", "qemu.log"):
            (self.tmpdir / f).unlink(missing_ok=True)
        self._popen_qemu("boot", None)

    def _popen_qemu(self, why: str, append: str | None) -> None:
        """Start qemu (the board powered on) with `append`, else the original command
        line; the board's log of boots notes it."""
        self.qemu_cmd = self._qemu_command(append)
        with open(self.tmpdir / "qemu.log", "wb") as out:
            self._proc = subprocess.Popen(self.qemu_cmd, stdin=subprocess.DEVNULL, stdout=out,
                                          stderr=subprocess.STDOUT, preexec_fn=_set_pdeathsig)
        self._started = time.monotonic()
        self.boots.append((why, self.original_append if append is None else append))

    def wait_ready(self, timeout: float | None = None) -> Self:
        """Wait until the board answers over SSH; on failure stop it and raise BoardError
        with the tail of its console."""
        limit = BOOT_TIMEOUT if timeout is None else timeout
        deadline = time.monotonic() + limit
        relaunches = 0
        try:
            while True:
                assert self._proc is not None
                rc = self._proc.poll()
                if rc is not None:
                    qlog = self.qemu_log()
                    if "host forwarding" in qlog and relaunches < 3:
                        relaunches += 1  # the SSH port was taken meanwhile: another one
                        self._launch()
                        continue
                    raise BoardError(f"qemu exited with status {rc} before SSH answered"
                                     + self._diagnostics())
                # Until the board's network is up, qemu accepts the forwarded connection
                # and the SSH client waits for its ConnectTimeout: try SSH once init says
                # it is ready (or after READY_GRACE seconds, should the console be silent).
                now = time.monotonic()
                if READY_MARKER in self.console_log() or now - self._started > READY_GRACE:
                    probe = self._ssh_argv(None, ["true"], connect_timeout=5)
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        r = subprocess.run(probe, stdin=subprocess.DEVNULL, capture_output=True,
                                           timeout=30, check=False)
                        if r.returncode == 0:
                            self.boot_seconds = time.monotonic() - self._started
                            self._answered = True
                            return self
                if time.monotonic() > deadline:
                    raise BoardError(f"no SSH answer within {limit:.0f} s" + self._diagnostics())
                time.sleep(0.2)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Kill qemu (always; idempotent) and remove the board's own temporary directory
        (kept with RTLAB_LAB_KEEP=1). console_log() still answers afterwards."""
        self._stopping.set()
        control, self._control = self._control, None
        if control is not None and control is not threading.current_thread():
            control.join(timeout=60)
        with self._lock:
            proc, self._proc = self._proc, None
        if proc is not None:
            if proc.poll() is None:
                proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=30)
        if self._console_final is None:
            self._console_final = self._read(self.tmpdir / "console.log")
        if self.own_tmpdir and os.environ.get("RTLAB_LAB_KEEP") != "1":
            shutil.rmtree(self.tmpdir, ignore_errors=True)

    def wait_exited(self, timeout: float) -> int | None:
        """Wait for qemu to exit by itself (e.g. after `poweroff` on the board); its exit
        status, or None if it still runs after `timeout` seconds."""
        if self._proc is None:
            return None
        try:
            return self._proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    # ------------------------------------------------------------------ SSH
    @property
    def alias(self) -> str:
        """The Host alias of this board in ssh_config (its name)."""
        return self.name

    @property
    def ssh_config(self) -> Path:
        """An OpenSSH client configuration with `Host <alias>`: ssh -F <it> <alias> ..."""
        return self.tmpdir / "ssh_config"

    @property
    def known_hosts(self) -> Path:
        return self.tmpdir / "known_hosts"

    def _write_ssh_config(self) -> None:
        def q(p: Path) -> str:
            return f'"{p}"'

        self.ssh_config.write_text(
            f"Host {self.alias}\n"
            f"  HostName 127.0.0.1\n"
            f"  Port {self.port}\n"
            f"  User root\n"
            f"  IdentityFile {q(self.image.client_key)}\n"
            f"  IdentitiesOnly yes\n"
            f"  UserKnownHostsFile {q(self.known_hosts)}\n"
            f"  GlobalKnownHostsFile /dev/null\n"
            f"  HostKeyAlias {self.image.host_key_alias}\n"
            f"  StrictHostKeyChecking yes\n"
            f"  UpdateHostKeys no\n"
            f"  BatchMode yes\n"
            f"  LogLevel ERROR\n"
            f"  ConnectTimeout 30\n"
            f"  ServerAliveInterval 10\n"
            f"  ServerAliveCountMax 6\n")

    def _ssh_argv(self, user: str | None, argv: list[str] | tuple[str, ...],
                  connect_timeout: int | None = None) -> list[str]:
        cmd = ["ssh", "-F", str(self.ssh_config)]
        if connect_timeout is not None:
            cmd += ["-o", f"ConnectTimeout={connect_timeout}"]
        if user is not None:
            cmd += ["-l", user]
        return [*cmd, self.alias, "--", " ".join(shlex.quote(a) for a in argv)]

    def ssh(self, *argv: str, user: str | None = None, input: str | bytes | None = None,
            timeout: float = 120, check: bool = False) -> subprocess.CompletedProcess[str]:
        """Run argv on the board (each argument quoted for the remote shell) as root, or
        as `user`; text output. bytes `input` is sent as is."""
        if not argv:
            raise ValueError("ssh(): no command")
        data = input.decode("utf-8", "surrogateescape") if isinstance(input, bytes) else input
        return subprocess.run(self._ssh_argv(user, argv), input=data,
                              stdin=subprocess.DEVNULL if data is None else None,
                              capture_output=True, text=True, timeout=timeout, check=check,
                              errors="surrogateescape")

    def sh(self, script: str, **kw: Any) -> subprocess.CompletedProcess[str]:
        """Run a shell script (busybox sh) on the board."""
        return self.ssh("sh", "-c", script, **kw)

    def copy_to(self, local: Path, remote: str, mode: int = 0o755,
                timeout: float = 300) -> None:
        """Copy a local file onto the board (e.g. the engine into /tmp)."""
        argv = ["sh", "-c", 'cat >"$1" && chmod "$2" "$1"', "sh", remote, f"{mode:o}"]
        with open(local, "rb") as src:
            r = subprocess.run(self._ssh_argv(None, argv), stdin=src, capture_output=True,
                               timeout=timeout, check=False)
        if r.returncode != 0:
            raise BoardError(f"copy of {local} to {self.name}:{remote} failed: "
                             f"{r.stderr.decode(errors='replace').strip()}")

    # ------------------------------------------------------------------ diagnostics
    @staticmethod
    def _read(path: Path) -> str:
        try:
            return path.read_text(errors="replace")
        except OSError:
            return ""

    def console_log(self) -> str:
        """Everything the board wrote on its serial console so far (kernel, init,
        dropbear's log)."""
        if self._console_final is not None:
            return self._console_final
        return self._read(self.tmpdir / "console.log")

    def qemu_log(self) -> str:
        return self._read(self.tmpdir / "qemu.log")

    def _diagnostics(self, lines: int = 25) -> str:
        console = self.console_log().splitlines()[-lines:]
        qlog = self.qemu_log().strip()
        return (f"\nboard {self.name} ({self.image.kind}, {self.describe_accel()}),"
                f" console tail:\n  " + "\n  ".join(console or ["(empty)"])
                + (f"\nqemu: {qlog}" if qlog else ""))

    def describe_accel(self) -> str:
        return "KVM" if self.accel == "kvm" else "TCG"

    def describe(self) -> str:
        boot = "not ready" if self.boot_seconds is None else f"SSH after {self.boot_seconds:.1f} s"
        text = (f"{self.image.kind} board {self.name!r}: {self.describe_accel()}, "
                f"{self.cpus} vCPUs, {self.mem_mb} MB, kernel {self.image.kernel_release}, {boot}")
        return text + (f" [{self.accel_note}]" if self.accel_note else "")

    def restart(self, off_s: float = 0.0, timeout: float | None = None) -> Self:
        """Reboot the board for real: power it off (qemu killed, as a pulled plug), wait
        `off_s` seconds, boot it again with the same forwarded SSH port, host key and
        ssh_config, so its alias reaches the new boot (another kernel boot, another boot
        id, /tmp empty again). Returns once SSH answers, as wait_ready does (which may
        move the board to another port, in ssh_config, should its own be taken). It
        boots the original command line, as any reboot of a rebootable board."""
        with self._lock:
            self._power_off()
            time.sleep(off_s)
            self._power_on("restart", None)
        return self.wait_ready(timeout)

    def _power_off(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=30)

    def _power_on(self, why: str, append: str | None) -> None:
        """qemu again on the same port, host key and ssh_config."""
        for f in ("console.log", "qemu.log", "console.sock"):
            (self.tmpdir / f).unlink(missing_ok=True)
        self.boot_seconds = None
        self._popen_qemu(why, append)

    # ------------------------------------------------------------------ reboot interface
    @property
    def reboot_socket(self) -> Path:
        return self.tmpdir / REBOOT_SOCKET

    @property
    def reboot_command(self) -> str:
        """The command that implements rtlab's reboot interface for this board (a
        `--reboot-cmd`): `python3 tests/lab/boards.py reboot DIR` (docs/lab.md)."""
        return " ".join(shlex.quote(a) for a in (sys.executable, str(Path(__file__).resolve()),
                                                 "reboot", str(self.tmpdir)))

    def _start_control(self) -> None:
        """Listen on the board's control socket, from a thread of its own: the qemu it
        starts dies with that thread, which ends when the board is stopped."""
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.reboot_socket.unlink(missing_ok=True)
        server.bind(str(self.reboot_socket))
        server.listen(4)
        server.settimeout(0.5)
        self._control = threading.Thread(target=self._serve, args=(server,),
                                         name=f"lab-reboot-{self.name}", daemon=True)
        self._control.start()

    def _serve(self, server: socket.socket) -> None:
        try:
            while not self._stopping.is_set():
                self._supervise()
                try:
                    conn, _ = server.accept()
                except TimeoutError:
                    continue
                with conn:
                    conn.settimeout(30)
                    reply = self._handle(conn)
                    with contextlib.suppress(OSError):
                        conn.sendall((json.dumps(reply) + "\n").encode())
        finally:
            server.close()
            # qemu started here would die with this thread anyway
            with self._lock, contextlib.suppress(OSError, subprocess.TimeoutExpired):
                self._power_off()

    def _supervise(self) -> None:
        """A qemu that ended by itself (-no-reboot: the guest rebooted or panicked) is a
        reboot: the board boots again, with its original command line (a one-shot
        command line was for one boot only). A guest that powered off stays off."""
        with self._lock:
            proc = self._proc
            if (proc is None or proc.poll() is None or self._stopping.is_set()
                    or not self._answered):
                return
            if POWER_DOWN_MARKER in self.console_log():
                return
            self._power_on("reboot", None)

    def _handle(self, conn: socket.socket) -> dict[str, Any]:
        data = b""
        with contextlib.suppress(OSError):
            while not data.endswith(b"\n") and len(data) < 65536:
                chunk = conn.recv(4096)
                if not chunk:
                    break
                data += chunk
        try:
            req = json.loads(data)
            boot, cmdline = req["boot"], req.get("cmdline")
        except (ValueError, TypeError, KeyError):
            return {"ok": False, "error": "bad request"}
        if boot not in ("once", "original"):
            return {"ok": False, "error": f"boot {boot!r}: expected once or original"}
        if boot == "once" and (not isinstance(cmdline, str) or not cmdline.strip()
                               or any(c in cmdline for c in "\n\0")):
            return {"ok": False, "error": "once needs a one-line kernel command line"}
        with self._lock:
            if self._stopping.is_set():
                return {"ok": False, "error": "the board is being stopped"}
            append = cmdline.strip() if boot == "once" else None
            self._power_off()  # a pulled plug: the power-cycle also ends a hung board
            self._power_on(boot, append)
            pid = self.pid
        return {"ok": True, "boot": boot, "append": self.boots[-1][1], "qemu_pid": pid}


def reboot_main(argv: list[str]) -> int:
    """`boards.py reboot DIR`: rtlab's reboot interface for a rebootable board whose
    directory is DIR (docs/lab.md): RTLAB_BOOT=once boots RTLAB_CMDLINE one time,
    RTLAB_BOOT=original boots the board's own command line (power-cycling it)."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="python3 tests/lab/boards.py reboot",
        description="Reboot a rebootable lab board (rtlab's reboot interface: "
                    "RTLAB_BOOT=once|original, RTLAB_CMDLINE).")
    parser.add_argument("dir", metavar="DIR", help="the board's directory (board.tmpdir)")
    args = parser.parse_args(argv)
    boot = os.environ.get(REBOOT_ENV_BOOT, "")
    cmdline = os.environ.get(REBOOT_ENV_CMDLINE, "")
    if boot not in ("once", "original"):
        print(f"boards.py reboot: {REBOOT_ENV_BOOT}={boot!r}: expected once or original",
              file=sys.stderr)
        return 2
    if boot == "once" and not cmdline.strip():
        print(f"boards.py reboot: {REBOOT_ENV_BOOT}=once needs {REBOOT_ENV_CMDLINE}",
              file=sys.stderr)
        return 2
    sock_path = Path(args.dir) / REBOOT_SOCKET
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(120)
            s.connect(str(sock_path))
            s.sendall((json.dumps({"boot": boot, "cmdline": cmdline}) + "\n").encode())
            data = b""
            while not data.endswith(b"\n"):
                chunk = s.recv(4096)
                if not chunk:
                    break
                data += chunk
    except OSError as exc:
        print(f"boards.py reboot: no rebootable lab board answers at {sock_path}: "
              f"{exc.strerror or exc}", file=sys.stderr)
        return 1
    try:
        reply = json.loads(data)
    except ValueError:
        print("boards.py reboot: the board gave no answer", file=sys.stderr)
        return 1
    if not reply.get("ok"):
        print(f"boards.py reboot: {reply.get('error')}", file=sys.stderr)
        return 1
    print(f"powered on again ({boot}): qemu {reply['qemu_pid']}, -append {reply['append']}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Boot boards by hand and keep them until Ctrl-C (docs/lab.md)."""
    import argparse

    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["reboot"]:
        return reboot_main(argv[1:])

    parser = argparse.ArgumentParser(
        prog="python3 tests/lab/boards.py",
        description="Boot emulated lab boards (docs/lab.md); Ctrl-C stops them.")
    parser.add_argument("kinds", nargs="+", choices=KINDS, metavar="KIND",
                        help=f"board kind: {', '.join(KINDS)}")
    parser.add_argument("--link", action="store_true",
                        help="join two boards by a link (10.77.0.1/24 and 10.77.0.2/24)")
    parser.add_argument("--cpus", type=int, default=2)
    parser.add_argument("--mem-mb", type=int, default=DEFAULT_MEM_MB)
    parser.add_argument("--rebootable", action="store_true",
                        help="boards answer the lab's reboot command (printed), rtlab's "
                             "reboot interface (docs/reboot.md)")
    args = parser.parse_args(argv)
    if args.link and len(args.kinds) != 2:
        parser.error("--link needs exactly two boards")
    ends: tuple[LinkSpec | None, ...] = link_pair() if args.link else (None,) * len(args.kinds)
    boards: list[Board] = []
    try:
        for i, (kind, end) in enumerate(zip(args.kinds, ends, strict=True), start=1):
            board = Board.boot(f"board{i}", kind, cpus=args.cpus, mem_mb=args.mem_mb,
                               link=end, rebootable=args.rebootable)
            boards.append(board)
            print(board.describe())
            print(f"  ssh -F {board.ssh_config} {board.alias}")
            sock = board.tmpdir / "console.sock"
            print(f"  console: {board.tmpdir / 'console.log'}"
                  f" (interactive: socat -,raw,echo=0 UNIX-CONNECT:{sock})")
            if board.rebootable:
                print(f"  reboot command (--reboot-cmd): {board.reboot_command}")
        print("Ctrl-C stops the boards.", flush=True)
        while all(b.running or b.rebootable for b in boards):
            time.sleep(1)
        print("a board stopped by itself", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
    except (BoardError, LabUnavailable) as exc:
        print(exc, file=sys.stderr)
        return 1
    finally:
        for b in boards:
            b.stop()


if __name__ == "__main__":
    sys.exit(main())
