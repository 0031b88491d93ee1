# SPDX-License-Identifier: MIT
"""A real labgrid farm on this machine (docs/lab.md#labgrid), once per session:

- an emulated x86_64 PREEMPT_RT board of the test lab (tests/lab/boards.py), rebootable;
- a labgrid coordinator and an exporter (labgrid from PyPI, the `labgrid` extra) on free
  ports of 127.0.0.1, each in a directory of its own;
- the exporter exports the board's SSH service as a NetworkService and its power as a
  NetworkPowerPort (labgrid's `simplerest` model) whose HTTP backend, served here,
  power-cycles the board's qemu with the lab's reboot command (`boards.py reboot DIR`);
- a place `lg-x86` that matches the exporter's group, and a place `lg-empty` without
  resources.

An OpenSSH client configuration for 127.0.0.1 (the lab's key and host key) is what a
lab's users keep in ~/.ssh/config; the tests give it as $RTLAB_SSH_CONFIG. Everything
is stopped when the session ends; every process started here dies with this one.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.server
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import pytest

from tests.lab.boards import Board, _set_pdeathsig

REPO = Path(__file__).resolve().parent.parent.parent
PLACE = "lg-x86"
EMPTY = "lg-empty"
EXPORTER = "lg-exp"
GROUP = "lg-x86"
BIN = Path(sys.executable).parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class _Power(http.server.BaseHTTPRequestHandler):
    """labgrid's simplerest power model: GET /power/INDEX/VALUE sets, /power/INDEX reads.
    And the emulated board's "bootloader": GET /oneshot?cmdline=LINE arranges LINE for
    the next power-on only (as U-Boot's bootargs_once or grub-reboot would)."""

    board: Board
    state: ClassVar[dict[str, Any]] = {"on": True, "cycles": 0, "oneshot": None}

    def do_GET(self) -> None:
        url = urllib.parse.urlsplit(self.path)
        if url.path == "/oneshot":
            line = urllib.parse.parse_qs(url.query).get("cmdline", [""])[0]
            self.state["oneshot"] = line.strip() or None
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        m = re.fullmatch(r"/power/0(?:/([01]?))?", self.path)
        if m is None:
            self.send_error(404)
            return
        value = m.group(1)
        if value == "0":
            self.state["on"] = False
        elif value == "1":
            if not self.state["on"]:  # off then on: the plug was pulled, qemu restarts
                once, self.state["oneshot"] = self.state["oneshot"], None
                boot = ({"RTLAB_BOOT": "once", "RTLAB_CMDLINE": once} if once
                        else {"RTLAB_BOOT": "original"})
                r = subprocess.run([sys.executable, str(REPO / "tests/lab/boards.py"), "reboot",
                                    str(self.board.tmpdir)], capture_output=True, text=True,
                                   env={**os.environ, **boot}, timeout=120, check=False)
                if r.returncode != 0:
                    self.send_error(500, r.stderr.strip()[-200:])
                    return
                self.state["cycles"] += 1
            self.state["on"] = True
        body = (b"1" if self.state["on"] else b"0") if not value else b""
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@dataclass
class Farm:
    board: Board
    dir: Path
    coord_port: int
    power_port: int
    ssh_config: Path
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def coordinator(self) -> str:
        return f"127.0.0.1:{self.coord_port}"

    def env(self, **more: str) -> dict[str, str]:
        e = {**os.environ, "LG_COORDINATOR": self.coordinator, "PYTHONPATH": str(REPO),
             "RTLAB_SSH_CONFIG": str(self.ssh_config), "COLUMNS": "200",
             "XDG_DATA_HOME": str(self.dir / "xdg")}
        e.update(more)
        return e

    # ------------------------------------------------------------ processes
    def _start(self, name: str, argv: list[str], cwd: Path) -> None:
        cwd.mkdir(exist_ok=True)
        log = open(cwd / f"{name}.log", "ab")  # noqa: SIM115 (kept by the process)
        self.procs[name] = subprocess.Popen(argv, cwd=cwd, stdin=subprocess.DEVNULL,
                                            stdout=log, stderr=subprocess.STDOUT,
                                            env=self.env(), preexec_fn=_set_pdeathsig)
        log.close()

    def stop(self, name: str, sig: int = signal.SIGKILL) -> None:
        proc = self.procs.pop(name, None)
        if proc is not None and proc.poll() is None:
            proc.send_signal(sig)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=20)

    def start_coordinator(self) -> None:
        self._start("coordinator", [str(BIN / "labgrid-coordinator"), "-l", self.coordinator],
                    self.dir / "coordinator")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection(
                    ("127.0.0.1", self.coord_port), timeout=1):
                return
            if self.procs["coordinator"].poll() is not None:
                break
            time.sleep(0.2)
        pytest.fail("the labgrid coordinator did not start: "
                    + (self.dir / "coordinator" / "coordinator.log").read_text()[-2000:])

    def start_exporter(self) -> None:
        cfg = self.dir / "exporter.yaml"
        cfg.write_text(
            f"{GROUP}:\n"
            f"  NetworkService:\n"
            f"    address: 127.0.0.1\n"
            f"    username: root\n"
            f"    port: {self.board.port}\n"
            f"  NetworkPowerPort:\n"
            f"    model: simplerest\n"
            f"    host: 'http://127.0.0.1:{self.power_port}/power/{{index}}/{{value}}'\n"
            f"    index: 0\n")
        self._start("exporter", [str(BIN / "labgrid-exporter"), "-c", self.coordinator,
                                 "-n", EXPORTER, "--hostname", "127.0.0.1", str(cfg)],
                    self.dir / "exporter")
        self.wait(lambda s: s[1], "the exporter's NetworkService to be available")

    def client(self, *args: str, user: str | None = None) -> subprocess.CompletedProcess[str]:
        env = self.env(**({"LG_USERNAME": user} if user else {}))
        return subprocess.run([str(BIN / "labgrid-client"), *args], env=env,
                              capture_output=True, text=True, timeout=60, check=False)

    # ------------------------------------------------------------ state
    def state(self, place: str = PLACE) -> tuple[str | None, bool]:
        """(holder "host/user" or None, whether the NetworkService is available), read
        through labgrid's client library."""
        from labgrid.remote.client import ClientSession

        async def read() -> tuple[str | None, bool]:
            s = ClientSession(self.coordinator, asyncio.get_running_loop())
            await asyncio.wait_for(s.start(), 20)
            try:
                p = s.places.get(place)
                res = s.resources.get(EXPORTER, {}).get(GROUP, {}).get("NetworkService")
                avail = res is not None and bool(res.data.get("avail"))
                return (p.acquired if p is not None else None) or None, avail
            finally:
                await s.stop()
                await s.close()

        return asyncio.run(read())

    def wait(self, ok: Any, what: str, timeout: float = 60.0) -> tuple[str | None, bool]:
        deadline = time.monotonic() + timeout
        last: Any = None
        while time.monotonic() < deadline:
            with contextlib.suppress(Exception):
                last = self.state()
                if ok(last):
                    return last  # type: ignore[no-any-return]
            time.sleep(0.3)
        pytest.fail(f"waited {timeout:g} s for {what}; last state {last}")

    def rtlab(self, *args: str, user: str | None = None, timeout: float = 300,
              **more_env: str) -> subprocess.CompletedProcess[str]:
        env = self.env(**({"LG_USERNAME": user} if user else {}), **more_env)
        return subprocess.run([sys.executable, "-m", "rtlab", *args], env=env,
                              capture_output=True, text=True, timeout=timeout, check=False)

    def popen_rtlab(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen([sys.executable, "-m", "rtlab", *args], env=self.env(),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                preexec_fn=_set_pdeathsig)

    def ensure_up(self) -> None:
        """Coordinator, exporter and places as the tests expect them (after a test that
        killed some of it)."""
        if self.procs.get("coordinator") is None or self.procs["coordinator"].poll() is not None:
            self.stop("exporter")
            self.start_coordinator()
        for name in (PLACE, EMPTY):
            self.client("-p", name, "create")  # exists already after a restart: refused
        self.client("-p", PLACE, "add-match", f"{EXPORTER}/{GROUP}/*")
        if self.procs.get("exporter") is None or self.procs["exporter"].poll() is not None:
            self.start_exporter()
        self.wait(lambda s: s == (None, True), f"place {PLACE} idle with its NetworkService")


def _client_ssh_config(board: Board, path: Path) -> None:
    """The board's ssh_config for the address the NetworkService names (127.0.0.1):
    its key, known host key and options, without its alias's host name, port and user."""
    lines = [ln for ln in board.ssh_config.read_text().splitlines()
             if not re.match(r"\s*(Host|HostName|Port|User)\s", ln)]
    path.write_text("Host 127.0.0.1\n" + "\n".join(lines) + "\n")


@pytest.fixture(scope="session")
def farm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Farm]:
    try:
        import labgrid  # noqa: F401
    except ImportError:
        pytest.skip("labgrid is not installed: ./scripts/setup.sh installs the `labgrid` extra")
    for tool in ("labgrid-coordinator", "labgrid-exporter", "labgrid-client"):
        if not (BIN / tool).exists():
            pytest.skip(f"{tool} is not beside {sys.executable}: ./scripts/setup.sh")
    board = Board.boot("lg-x86", "x86_64-rt", rebootable=True)
    print(f"\n[labgrid] {board.describe()}")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Power)
    _Power.board = board
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    d = tmp_path_factory.mktemp("labgrid")
    f = Farm(board=board, dir=d, coord_port=_free_port(),
             power_port=int(server.server_address[1]), ssh_config=d / "ssh_config")
    try:
        _client_ssh_config(board, f.ssh_config)
        f.ensure_up()
        yield f
    finally:
        for name in ("exporter", "coordinator"):
            f.stop(name, signal.SIGTERM)
        server.shutdown()
        server.server_close()
        board.stop()


@pytest.fixture
def up(farm: Farm) -> Farm:
    """The farm, with coordinator, exporter and places as expected."""
    farm.ensure_up()
    return farm
