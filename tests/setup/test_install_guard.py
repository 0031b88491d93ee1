# SPDX-License-Identifier: MIT
"""The set-up's package install really installs a package that ships a daemon and
leaves no service enabled or running and no new listening socket; then the package is
purged again and the machine is as before. Also Prometheus's private unpack.

The package is Debian's `dropbear` (41 kB): its scripts generate host keys, enable
dropbear.service and its init script, and start an SSH server on port 22 on every
interface. Root only, under the machine lock, bounded in time (needs the Debian
archive, as the set-up does)."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.paths import REPO

from .debian import files_of, have_dpkg, installed_packages, package_table
from .services import (
    Snapshot,
    enabled_services,
    listeners,
    processes_running,
    run_subreaped,
    socket_owners,
)

PKG = "dropbear"
SETUP = REPO / "scripts" / "setup.sh"
POLICY = Path("/usr/sbin/policy-rc.d")
APT_TIMEOUT_S = 300

pytestmark = pytest.mark.skipif(not have_dpkg() or shutil.which("apt-get") is None,
                                reason="not a Debian system (no dpkg/apt)")


def digest(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest() + oct(path.stat().st_mode)
    except FileNotFoundError:
        return None


def apt(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    return subprocess.run(["apt-get", "-o", "DPkg::Lock::Timeout=300", "-y", "-qq", *args],
                          capture_output=True, text=True, timeout=APT_TIMEOUT_S + 60, env=env)


def test_guarded_install_of_a_daemon_package_leaves_no_service(require_root) -> None:
    if PKG in package_table():
        pytest.skip(f"{PKG} is installed here already: the test installs and purges it")
    package_table.cache_clear()
    before = Snapshot.take()
    packages_before = installed_packages()
    policy_before = digest(POLICY)
    etc_dropbear = Path("/etc/dropbear").exists()
    try:
        got = run_subreaped(
            ["bash", "-c", 'set -euo pipefail; source "$1"; guarded_apt_install "$2"',
             "bash", str(SETUP), PKG], timeout=APT_TIMEOUT_S, cwd=REPO)
        after = Snapshot.take()
        new_packages = installed_packages() - packages_before
        assert got.returncode == 0, got.output
        # it really installed a package with a daemon
        assert PKG in new_packages
        shipped = files_of(PKG)
        assert "/etc/init.d/dropbear" in shipped
        assert "/lib/systemd/system/dropbear.service" in shipped
        # its scripts asked to start it and the set-up's policy refused; what they
        # enabled, the set-up disabled
        assert "setup: service start refused: dropbear (start)" in got.output, got.output
        assert "disabled dropbear" in got.output
        # nothing of it left running, enabled or listening
        assert got.leftovers == []
        assert after.enabled == before.enabled
        assert after.systemd_enabled == before.systemd_enabled
        assert after.systemd_running == before.systemd_running
        programs = {f for p in new_packages | {"dropbear-bin"} for f in files_of(p)
                    if os.path.isfile(f) and os.access(f, os.X_OK)}
        assert processes_running(programs) == {}
        new_sockets = after.listening - before.listening
        owners = socket_owners({s.inode for s in new_sockets})
        theirs = [(s, pid, os.readlink(f"/proc/{pid}/exe")) for s in new_sockets
                  for pid in owners.get(s.inode, ()) if os.path.exists(f"/proc/{pid}/exe")
                  and os.readlink(f"/proc/{pid}/exe") in programs]
        assert theirs == []
        assert not any(s.port == 22 and s.proto.startswith("tcp") for s in new_sockets)
        # the guard's own changes are gone
        assert digest(POLICY) == policy_before
        assert not Path(str(POLICY) + ".rtlab-saved").exists()
    finally:
        added = sorted(installed_packages() - packages_before)
        if added:
            r = apt("purge", *added)
            assert r.returncode == 0, r.stderr
        package_table.cache_clear()
    # the machine as before
    assert installed_packages() == packages_before
    assert enabled_services() == before.enabled
    assert Path("/etc/dropbear").exists() == etc_dropbear
    assert not any(s.port == 22 and s.proto.startswith("tcp")
                   for s in listeners() - before.listening)


def test_private_unpack_installs_nothing(tmp_path: Path) -> None:
    """A package unpacked into the venv is not installed: its service files are only
    files there, no script of it ran. (dropbear again: small, and has them.)"""
    if PKG in package_table():
        pytest.skip(f"{PKG} is installed here already")
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    before = Snapshot.take()
    got = run_subreaped(["bash", "-c", 'set -euo pipefail; source "$1"; VENV=$2; '
                         'private_unpack "$3"', "bash", str(SETUP), str(venv), PKG],
                        timeout=APT_TIMEOUT_S, cwd=REPO)
    if got.returncode != 0 and os.geteuid() != 0 and "cannot download" in got.output:
        pytest.skip(f"no package lists to download from as non-root: {got.output.strip()}")
    assert got.returncode == 0, got.output
    assert (venv / "opt" / PKG / "etc" / "init.d" / "dropbear").is_file()
    assert (venv / "opt" / PKG / ".rtlab-unpacked").read_text().startswith(f"Package: {PKG}")
    assert got.leftovers == []
    package_table.cache_clear()
    assert PKG not in package_table()
    assert enabled_services() == before.enabled
    assert not Path("/etc/dropbear/dropbear_ed25519_host_key").exists()


def test_prometheus_of_the_tests_is_the_private_copy() -> None:
    """After `make test`'s set-up the tests' prometheus and promtool are the unpacked
    ones in the venv (the Debian package, if installed, is not what they run)."""
    venv_bin = REPO / ".venv" / "bin"
    if not (venv_bin / "rtlab").exists():
        pytest.skip("no .venv here: run `make test`'s set-up")
    for prog in ("prometheus", "promtool"):
        target = (venv_bin / prog).resolve()
        assert target == (REPO / ".venv" / "opt" / "prometheus" / "usr" / "bin" / prog).resolve()
        r = subprocess.run([str(venv_bin / prog), "--version"], capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 0 and "version" in (r.stdout + r.stderr)
