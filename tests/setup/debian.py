# SPDX-License-Identifier: MIT
"""The set-up's package lists, and what Debian's package database says about them:
dependency closures and which packages ship a service."""

from __future__ import annotations

import re
import shutil
import subprocess
from functools import cache
from pathlib import Path

from tests.support.paths import REPO

SETUP = REPO / "scripts" / "setup.sh"
LISTS = ("RUN_PKGS", "CROSS_PKGS", "TEST_PKGS", "PRIVATE_PKGS", "SERVICE_PKGS")
UNIT = re.compile(r"^(/usr)?/lib/systemd/system/[^/]+\.(service|socket)$")
INIT_SCRIPT = re.compile(r"^/etc/init\.d/[^/]+$")


def have_dpkg() -> bool:
    return all(shutil.which(t) for t in ("dpkg-query", "apt-cache"))


def setup_lists() -> dict[str, list[str]]:
    """The set-up's lists (and packages_of run|test) as the script itself has them."""
    script = ('source "$1"; for a in ' + " ".join(LISTS) +
              '; do declare -n r=$a; echo "$a ${r[*]}"; done; '
              'echo "run $(packages_of run | tr "\\n" " ")"; '
              'echo "test $(packages_of test | tr "\\n" " ")"')
    r = subprocess.run(["bash", "-c", script, "bash", str(SETUP)], capture_output=True,
                       text=True, timeout=60, check=True)
    out: dict[str, list[str]] = {}
    for line in r.stdout.splitlines():
        name, _, rest = line.partition(" ")
        out[name] = rest.split()
    return out


@cache
def package_table() -> dict[str, str]:
    """Installed package -> its priority."""
    r = subprocess.run(["dpkg-query", "-W", "-f=${Package}\t${Priority}\t${Status}\n"],
                       capture_output=True, text=True, timeout=60, check=True)
    out: dict[str, str] = {}
    for line in r.stdout.splitlines():
        name, prio, status = line.split("\t")
        if status == "install ok installed":
            out[name] = prio
    return out


def installed(pkg: str) -> bool:
    return pkg in package_table()


def installed_packages() -> set[str]:
    r = subprocess.run(["dpkg-query", "-W", "-f=${Package}\t${Status}\n"],
                       capture_output=True, text=True, timeout=60, check=True)
    return {line.split("\t")[0] for line in r.stdout.splitlines()
            if line.endswith("install ok installed")}


def closure(pkgs: list[str]) -> set[str]:
    """The installed packages that pkgs depend on, directly or not (pre-depends and
    depends, every alternative that is installed; not recommends: the set-up installs
    none), pkgs too."""
    r = subprocess.run(
        ["apt-cache", "depends", "--recurse", "--installed", "--no-recommends",
         "--no-suggests", "--no-conflicts", "--no-breaks", "--no-replaces", "--no-enhances",
         *pkgs], capture_output=True, text=True, timeout=300, check=True)
    named = {line.split(":")[0] for line in r.stdout.splitlines()
             if line and not line.startswith((" ", "<"))}
    return named & set(package_table())


@cache
def service_files_by_package() -> dict[str, tuple[str, ...]]:
    """Installed package -> the systemd service and socket units and SysV init scripts
    it ships (one search of dpkg's database)."""
    r = subprocess.run(
        ["dpkg-query", "-S", "/lib/systemd/system/*", "/usr/lib/systemd/system/*",
         "/etc/init.d/*"], capture_output=True, text=True, timeout=60)
    out: dict[str, list[str]] = {}
    for line in r.stdout.splitlines():
        owners, sep, path = line.rpartition(": ")
        if not sep or not (UNIT.match(path) or INIT_SCRIPT.match(path)):
            continue
        for owner in owners.split(", "):
            out.setdefault(owner.split(":")[0], []).append(path)
    return {k: tuple(sorted(v)) for k, v in out.items()}


def service_files(pkg: str) -> tuple[str, ...]:
    return service_files_by_package().get(pkg, ())


def priority(pkg: str) -> str:
    return package_table()[pkg]


def files_of(pkg: str) -> list[str]:
    r = subprocess.run(["dpkg-query", "-L", pkg], capture_output=True, text=True, timeout=60,
                       check=True)
    return r.stdout.splitlines()


def unit_type(path: str) -> str:
    """Type= of a systemd service unit ("simple" when not given, as systemd has it)."""
    m = re.search(r"^Type=(\S+)", Path(path).read_text(), re.M)
    return m.group(1) if m else "simple"
