# SPDX-License-Identifier: MIT
"""The Yocto layer and the Buildroot package of rtlab-probe (packaging/), checked
with each build system's own tools where a package registry has them (oelint-adv
from PyPI; Buildroot's utils/check-package when a Buildroot tree is given), and
against the project: the version, the meson options, the license checksum."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .recipes import (
    BR_EXTERNAL,
    BR_PACKAGE,
    LAYER,
    ROOT,
    buildroot_vars,
    project_version,
    recipe,
    recipe_path,
    recipe_version,
    split_d_options,
    valid_option,
    yocto_meson_options,
)

# The Yocto releases the layer declares (LAYERSERIES_COMPAT) and is linted against.
RELEASES = ("wrynose", "blacksail")


def _oelint(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    pytest.importorskip("oelint_adv", reason="oelint-adv is not installed: run scripts/setup.sh "
                        "(pyproject's dev extra)")
    # cwd: the layer, whose .oelint.cfg names the suppressed findings and why
    return subprocess.run([sys.executable, "-m", "oelint_adv", "--quiet", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.parametrize("release", RELEASES)
def test_oelint_adv_finds_nothing(release: str) -> None:
    r = _oelint(LAYER, "--release", release, str(recipe_path().relative_to(LAYER)),
                "conf/layer.conf")
    assert r.returncode == 0 and not r.stdout.strip() and not r.stderr.strip(), \
        r.stdout + r.stderr


def test_oelint_adv_reports_a_broken_copy(tmp_path: Path) -> None:
    """The linter run above really reads the recipe: a copy without LICENSE fails."""
    layer = tmp_path / "meta-rtlab"
    shutil.copytree(LAYER, layer)
    bb = layer / recipe_path().relative_to(LAYER)
    text = bb.read_text()
    assert '\nLICENSE = "MIT"\n' in text
    bb.write_text(text.replace('\nLICENSE = "MIT"\n', "\n"))
    r = _oelint(layer, str(bb.relative_to(layer)))
    assert r.returncode != 0
    assert "oelint.var.mandatoryvar.LICENSE" in r.stdout + r.stderr


def test_layer_conf_declares_the_collection() -> None:
    text = (LAYER / "conf" / "layer.conf").read_text()
    for line in ('BBFILE_COLLECTIONS += "rtlab"', 'LAYERDEPENDS_rtlab = "core"',
                 f'LAYERSERIES_COMPAT_rtlab = "{" ".join(RELEASES)}"'):
        assert line in text


def test_versions_match_the_project() -> None:
    version = project_version()
    assert recipe_version() == version, \
        f"rename {recipe_path().name} to rtlab-probe_{version}.bb"
    assert buildroot_vars()["VERSION"] == version, \
        f"set RTLAB_PROBE_VERSION = {version} in rtlab-probe.mk"


def test_license_checksum_matches_the_sources() -> None:
    """LIC_FILES_CHKSUM, computed the way Yocto's license QA does it: the MD5 of
    lines beginline..endline of the file, each with its line end."""
    variables, _ = recipe()
    assert variables["LICENSE"] == "MIT"
    url = variables["LIC_FILES_CHKSUM"]
    assert url.startswith("file://")
    name, *params = url[len("file://"):].split(";")
    p = dict(x.split("=", 1) for x in params)
    lines = (ROOT / name).read_bytes().splitlines(keepends=True)
    chosen = lines[int(p["beginline"]) - 1:int(p["endline"])]
    assert chosen and b"SPDX-License-Identifier: MIT" in b"".join(chosen)
    assert hashlib.md5(b"".join(chosen)).hexdigest() == p["md5"]


def test_yocto_builds_the_engine_only_with_real_options() -> None:
    opts = yocto_meson_options()
    for name, value in opts.items():
        assert valid_option(name, value) is None, valid_option(name, value)
    assert opts == {"python": "false", "tests": "false", "board_engines": "disabled",
                    "static": "disabled", "af_xdp": "enabled"}
    assert yocto_meson_options(set())["af_xdp"] == "disabled"


def test_yocto_source_is_the_release_tarball() -> None:
    variables, flags = recipe()
    assert variables["SRC_URI"] == "${RTLAB_RELEASE_URL}/rtlab-${PV}.tar.xz"
    assert flags[("SRC_URI", "sha256sum")] == "${RTLAB_SHA256}"
    # meson dist's tarball unpacks to rtlab-VERSION/
    assert variables["S"] == "${UNPACKDIR}/rtlab-${PV}"


@pytest.mark.parametrize(("static_libs", "headers_5_9", "static", "af_xdp"), [
    (False, True, "disabled", "enabled"),
    (True, True, "enabled", "enabled"),
    (False, False, "disabled", "disabled"),
])
def test_buildroot_options_follow_the_configuration(static_libs: bool, headers_5_9: bool,
                                                    static: str, af_xdp: str) -> None:
    config = {"BR2_PACKAGE_RTLAB_PROBE": "y"}
    if static_libs:
        config["BR2_STATIC_LIBS"] = "y"
    if headers_5_9:
        config["BR2_TOOLCHAIN_HEADERS_AT_LEAST_5_9"] = "y"
    opts = split_d_options(buildroot_vars(config)["CONF_OPTS"])
    for name, value in opts.items():
        assert valid_option(name, value) is None, valid_option(name, value)
    assert opts == {"python": "false", "tests": "false", "board_engines": "disabled",
                    "static": static, "af_xdp": af_xdp}


def test_buildroot_default_source_is_the_tree_around_it() -> None:
    v = buildroot_vars()
    assert v["SITE_METHOD"] == "local"
    assert Path(v["SITE"]).resolve() == ROOT
    # the rsync filter copies what the engine is built from, and nothing else
    assert v["OVERRIDE_SRCDIR_RSYNC_EXCLUSIONS"].split() == [
        "--include=/meson.build", "--include=/meson_options.txt", "--include=/engine/***",
        "--exclude=*"]
    assert v["LICENSE"] == "MIT"


def test_buildroot_tarball_source() -> None:
    v = buildroot_vars({"BR2_PACKAGE_RTLAB_PROBE_TARBALL":
                        '"https://downloads.example.org/rtlab/rtlab-0.2.0.tar.xz"'})
    assert v["SITE"] == "https://downloads.example.org/rtlab"
    assert v["SOURCE"] == "rtlab-0.2.0.tar.xz"
    assert v["VERSION"] == "0.2.0"
    assert v["SITE_METHOD"] == ""


def test_buildroot_hash_file_pins_nothing_it_cannot_know() -> None:
    """No made-up hash: the default source is local (never downloaded) and the tarball
    of a release is the user's to pin (Buildroot refuses a tarball no hash file lists)."""
    lines = (BR_PACKAGE / "rtlab-probe.hash").read_text().splitlines()
    assert all(not line.strip() or line.startswith("#") for line in lines)


def test_buildroot_check_package() -> None:
    """Buildroot's own linter of packages; it comes only inside a Buildroot source
    tree (no package registry has it): RTLAB_BUILDROOT=DIR names one, and
    RTLAB_BUILDROOT_PYTHON a Python with its modules (python-magic, flake8) if this
    one lacks them."""
    tree = os.environ.get("RTLAB_BUILDROOT")
    if not tree:
        pytest.skip("Buildroot's utils/check-package comes only with a Buildroot source tree, "
                    "from no package registry: set RTLAB_BUILDROOT=DIR to run it")
    tool = Path(tree) / "utils" / "check-package"
    assert tool.is_file(), f"RTLAB_BUILDROOT={tree}: no utils/check-package there"
    files = sorted(str(p.relative_to(BR_EXTERNAL)) for p in BR_EXTERNAL.rglob("*") if p.is_file())
    python = os.environ.get("RTLAB_BUILDROOT_PYTHON", sys.executable)
    r = subprocess.run([python, str(tool), "-b", *files], cwd=BR_EXTERNAL,
                       capture_output=True, text=True, timeout=120, check=False)
    if r.returncode != 0 and "ModuleNotFoundError" in r.stderr:
        pytest.skip("check-package needs Python modules that are missing: "
                    f"{r.stderr.splitlines()[-1]} (pip install python-magic flake8, or set "
                    "RTLAB_BUILDROOT_PYTHON)")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "0 warnings generated" in r.stdout + r.stderr
