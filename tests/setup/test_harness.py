# SPDX-License-Identifier: MIT
"""The set-up tests' judge can fail: it sees enabled links, listening sockets and
daemons that fork away; and the set-up's start guard (a temporary policy-rc.d) puts
back exactly what was there, also after a set-up that was killed. No root needed."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.support.paths import REPO

from .services import enabled_services, listeners, run_subreaped, socket_owners

SETUP = REPO / "scripts" / "setup.sh"


def test_enabled_services_reads_unit_and_start_links(tmp_path: Path) -> None:
    etc = tmp_path / "etc"
    wants = etc / "systemd" / "system" / "multi-user.target.wants"
    req = etc / "systemd" / "system" / "sockets.target.requires"
    for d in (wants, req, etc / "rc2.d", etc / "rc0.d", etc / "rcS.d"):
        d.mkdir(parents=True)
    (wants / "food.service").symlink_to("/lib/systemd/system/food.service")
    (req / "food.socket").symlink_to("/lib/systemd/system/food.socket")
    (etc / "rc2.d" / "S01food").symlink_to("../init.d/food")
    (etc / "rc0.d" / "K01food").symlink_to("../init.d/food")  # a stop link: not enabled
    (etc / "rcS.d" / "S02early").symlink_to("../init.d/early")
    assert enabled_services(tmp_path) == {
        "/etc/systemd/system/multi-user.target.wants/food.service",
        "/etc/systemd/system/sockets.target.requires/food.socket",
        "/etc/rc2.d/S01food", "/etc/rcS.d/S02early"}


def test_listeners_and_their_owners_are_seen() -> None:
    with socket.socket() as tcp, socket.socket(socket.AF_INET6, socket.SOCK_DGRAM) as udp:
        tcp.bind(("127.0.0.1", 0))
        before = listeners()
        tcp.listen()
        udp.bind(("::1", 0))
        new = listeners() - before
        ports = {(x.proto, x.port) for x in new}
        assert ("tcp", tcp.getsockname()[1]) in ports
        assert ("udp6", udp.getsockname()[1]) in ports
        owners = socket_owners({x.inode for x in new})
        assert all(os.getpid() in owners.get(x.inode, set()) for x in new
                   if x.port in (tcp.getsockname()[1], udp.getsockname()[1]))


DAEMON = textwrap.dedent("""\
    import os, socket, sys, time
    if os.fork():
        sys.exit(0)
    os.setsid()
    if os.fork():
        sys.exit(0)
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen()
    os.close(0); os.close(1); os.close(2)
    time.sleep(600)
    """)


def test_subreaper_catches_a_daemon_that_forked_away() -> None:
    got = run_subreaped([sys.executable, "-c", DAEMON], timeout=60)
    assert got.returncode == 0
    assert len(got.leftovers) == 1, got
    left = got.leftovers[0]
    assert "time.sleep(600)" in str(left["cmdline"])
    # and it is gone now: the judge cleans up after itself
    assert not Path(f"/proc/{left['pid']}").exists() or \
        Path(f"/proc/{left['pid']}/stat").read_text().split(") ")[1][0] == "Z"


def test_subreaper_passes_exit_status_and_output_and_finds_nothing_left() -> None:
    got = run_subreaped(["sh", "-c", "echo hello; sleep 0.2 & wait; exit 3"], timeout=60)
    assert (got.returncode, got.output.strip(), got.leftovers) == (3, "hello", [])


def guard(tmp_path: Path, script: str) -> subprocess.CompletedProcess[str]:
    """Run script after sourcing the set-up, its policy-rc.d paths moved into tmp_path."""
    return subprocess.run(
        ["bash", "-c", "set -euo pipefail; source \"$1\"; POLICY=$2/policy-rc.d; "
         "POLICY_SAVED=$2/policy-rc.d.rtlab-saved; PG_DROPIN=$2/cc.d/x.conf; " + script,
         "bash", str(SETUP), str(tmp_path)],
        capture_output=True, text=True, timeout=60)


def test_start_guard_refuses_starts_and_puts_an_existing_policy_back(tmp_path: Path) -> None:
    policy = tmp_path / "policy-rc.d"
    policy.write_text("#!/bin/sh\n# the machine's own\nexit 0\n")
    policy.chmod(0o750)
    r = guard(tmp_path, 'refuse_starts; "$POLICY" --quiet dropbear start || echo "refused $?"')
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "refused 101"
    assert "service start refused: dropbear start" in r.stderr
    # a set-up killed here left its policy: the next one's undo puts the original back
    assert "exit 101" in policy.read_text()
    r = guard(tmp_path, "undo_install_guard")
    assert r.returncode == 0, r.stderr
    assert policy.read_text() == "#!/bin/sh\n# the machine's own\nexit 0\n"
    assert stat.S_IMODE(policy.stat().st_mode) == 0o750
    assert sorted(p.name for p in tmp_path.iterdir()) == ["policy-rc.d"]


def test_start_guard_leaves_no_policy_where_there_was_none(tmp_path: Path) -> None:
    r = guard(tmp_path, 'refuse_starts; test -x "$POLICY"; undo_install_guard; '
                        'undo_install_guard')
    assert r.returncode == 0, r.stderr
    assert list(tmp_path.iterdir()) == []


def test_start_guard_keeps_a_policy_that_is_not_its_own(tmp_path: Path) -> None:
    """undo only removes a policy-rc.d carrying its marker: an admin's stays."""
    policy = tmp_path / "policy-rc.d"
    policy.write_text("#!/bin/sh\nexit 101\n")
    r = guard(tmp_path, "undo_install_guard")
    assert r.returncode == 0, r.stderr
    assert policy.read_text() == "#!/bin/sh\nexit 101\n"


def test_an_unknown_mode_is_one_line_and_changes_nothing(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    r = subprocess.run([str(SETUP), "runn"], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, VENV=str(venv)))
    assert r.returncode == 2
    assert r.stderr.splitlines() == [
        "setup: unknown mode 'runn' (use: scripts/setup.sh run, or scripts/setup.sh test)"]
    assert r.stdout == ""
    assert not venv.exists()


def test_help_names_both_modes() -> None:
    r = subprocess.run([str(SETUP), "--help"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "scripts/setup.sh run " in r.stdout and "scripts/setup.sh test " in r.stdout
