# SPDX-License-Identifier: MIT
"""The set-up's package lists against Debian's package database: what `make run`
installs (with everything it pulls in) ships no service; every package of `make test`'s
lists that ships one is declared and goes the guarded way; Prometheus is never
installed. Runs after `make test`'s set-up, which installed every listed package."""

from __future__ import annotations

import platform
import re
from functools import cache
from pathlib import Path

import pytest

from .debian import (
    INIT_SCRIPT,
    closure,
    have_dpkg,
    installed,
    priority,
    service_files,
    setup_lists,
    unit_type,
)

pytestmark = pytest.mark.skipif(not have_dpkg(), reason="not a Debian system (no dpkg/apt)")


@cache
def lists() -> dict[str, list[str]]:
    return setup_lists()


def boot_one_shot(path: str) -> bool:
    """A file that starts no daemon: an init script run once at boot (rcS only, no
    start-stop-daemon), or a Type=oneshot service unit."""
    text = Path(path).read_text()
    if INIT_SCRIPT.match(path):
        m = re.search(r"^# Default-Start:\s*(.*)$", text, re.M)
        return (m is not None and m.group(1).split() == ["S"]
                and "start-stop-daemon" not in text)
    return path.endswith(".service") and unit_type(path) == "oneshot"


def daemon_packages(pkgs: list[str]) -> dict[str, list[str]]:
    """Packages among pkgs and what they pull in that ship a service (a unit or init
    script that is not a boot-time one-shot) -> those files. Packages of priority
    `required` are left out: every Debian system has them before any set-up."""
    missing = [p for p in pkgs if not installed(p)]
    assert not missing, f"not installed: {missing}; run `make test`'s set-up (as root) first"
    out: dict[str, list[str]] = {}
    for pkg in sorted(closure(pkgs)):
        files = service_files(pkg)
        daemons = [f for f in files if not boot_one_shot(f)]
        if daemons and priority(pkg) != "required":
            out[pkg] = daemons
    return out


def test_run_installs_a_subset_of_test() -> None:
    got = lists()
    assert got["run"] == got["RUN_PKGS"]
    assert set(got["run"]) < set(got["test"])
    assert set(got["test"]) == set(got["run"]) | set(got["CROSS_PKGS"]) | set(got["TEST_PKGS"])


def test_make_run_needs_no_cross_compiler() -> None:
    """The board engines come from the Zig toolchain in the venv (scripts/cross-build.sh):
    nothing `make run` installs is a cross compiler or a cross libc."""
    native = platform.machine().replace("_", "-") + "-linux-gnu"  # binutils-x86-64-linux-gnu
    crossy = re.compile(r"-[a-z0-9-]+-linux-gnu[a-z]*$|-cross$")
    def cross(pkgs: list[str]) -> list[str]:
        return [p for p in closure(pkgs) if crossy.search(p) and not p.endswith(native)]

    assert cross(lists()["run"]) == []
    assert "gcc-aarch64-linux-gnu" in cross(lists()["CROSS_PKGS"])  # what it would find


def test_make_run_installs_every_tool_the_run_path_calls() -> None:
    """The loads' tools (rtlab.loads.proc.TOOL_PACKAGES: what require_tool names when one
    is missing) and the SSH client of boards come with `make run`."""
    from rtlab.loads.proc import TOOL_PACKAGES

    needed = set(TOOL_PACKAGES.values()) | {"openssh-client"}
    assert needed <= set(lists()["run"])


def test_make_run_installs_nothing_that_ships_a_service() -> None:
    assert daemon_packages(lists()["run"]) == {}


def test_every_service_of_make_test_is_declared_and_guarded() -> None:
    """A package added to a list that ships a service (itself or through what it pulls
    in) fails here until it is declared in SERVICE_PKGS (installed with starts refused
    and its service disabled again) or moved to PRIVATE_PKGS (only unpacked)."""
    found = daemon_packages(lists()["test"])
    assert sorted(found) == sorted(lists()["SERVICE_PKGS"]), found


def test_private_packages_are_never_installed_by_a_list() -> None:
    got = lists()
    assert got["PRIVATE_PKGS"] == ["prometheus"]
    assert not set(got["PRIVATE_PKGS"]) & closure(got["test"])


def test_a_package_that_ships_a_daemon_is_found() -> None:
    """The check above can fail: a Debian package with a real daemon on this machine
    (postgresql-common after `make test`'s set-up) is one."""
    found = daemon_packages(["postgresql"])
    assert "postgresql-common" in found
    assert "/lib/systemd/system/postgresql@.service" in found["postgresql-common"]
