# SPDX-License-Identifier: MIT
"""What the embedded build recipes of packaging/ say, read the way their build
systems read them: the Yocto recipe through oelint-parser (a bitbake-syntax parser),
the Buildroot package's .mk evaluated by GNU make with a Buildroot configuration's
symbols set. Used by the tests of this directory."""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LAYER = ROOT / "packaging" / "yocto" / "meta-rtlab"
RECIPE_DIR = LAYER / "recipes-rt" / "rtlab-probe"
BR_EXTERNAL = ROOT / "packaging" / "buildroot"
BR_PACKAGE = BR_EXTERNAL / "package" / "rtlab-probe"
BR_MK = BR_PACKAGE / "rtlab-probe.mk"


def project_version() -> str:
    """The version in meson.build's project() call."""
    m = re.search(r"^project\(.*?version:\s*'([^']+)'", (ROOT / "meson.build").read_text(),
                  re.S | re.M)
    assert m, "meson.build has no project version"
    return m.group(1)


def meson_options() -> dict[str, dict[str, str]]:
    """meson_options.txt: option name -> {'type': ..., 'choices': ...} (as written)."""
    text = (ROOT / "meson_options.txt").read_text()
    opts: dict[str, dict[str, str]] = {}
    for m in re.finditer(r"option\('([^']+)',\s*type:\s*'([^']+)'(.*?)\)\s*$", text, re.S | re.M):
        choices = re.search(r"choices:\s*\[([^\]]*)\]", m.group(3))
        opts[m.group(1)] = {"type": m.group(2), "choices": choices.group(1) if choices else ""}
    return opts


def valid_option(name: str, value: str) -> str | None:
    """Why `-Dname=value` is not a valid option of this project, or None."""
    opts = meson_options()
    if name not in opts:
        return f"-D{name}: no such option in meson_options.txt ({', '.join(opts)})"
    kind = opts[name]["type"]
    allowed = {"boolean": {"true", "false"}, "feature": {"enabled", "disabled", "auto"}}.get(kind)
    if allowed is not None and value not in allowed:
        return f"-D{name}={value}: a {kind} takes {'|'.join(sorted(allowed))}"
    return None


def split_d_options(text: str) -> dict[str, str]:
    """The -Dname=value words of a meson command line fragment."""
    out: dict[str, str] = {}
    for word in text.split():
        assert word.startswith("-D") and "=" in word, f"not a -Dname=value option: {word!r}"
        name, value = word[2:].split("=", 1)
        out[name] = value
    return out


def recipe_path() -> Path:
    recipes = sorted(RECIPE_DIR.glob("rtlab-probe_*.bb"))
    assert len(recipes) == 1, f"one rtlab-probe recipe expected in {RECIPE_DIR}: {recipes}"
    return recipes[0]


def recipe_version() -> str:
    return recipe_path().stem.split("_", 1)[1]


def recipe() -> tuple[dict[str, str], dict[tuple[str, str], str]]:
    """The recipe's variables (name -> value, as assigned) and flags
    ((name, flag) -> value), parsed by oelint-parser."""
    stash_mod = pytest.importorskip(
        "oelint_parser.cls_stash", reason="oelint-parser is not installed: run scripts/setup.sh "
        "(pyproject's dev extra installs oelint-adv, which brings it)")
    from oelint_parser.cls_item import FlagAssignment, Variable

    path = str(recipe_path())
    stash = stash_mod.Stash(quiet=True)
    stash.AddFile(path)
    stash.Finalize()
    variables = {v.VarName: v.VarValueStripped
                 for v in stash.GetItemsFor(filename=path, classifier=Variable.CLASSIFIER)}
    flags = {(f.VarName, f.Flag): f.ValueStripped
             for f in stash.GetItemsFor(filename=path, classifier=FlagAssignment.CLASSIFIER)}
    return variables, flags


def yocto_meson_options(packageconfig: set[str] | None = None) -> dict[str, str]:
    """The -D options meson.bbclass passes: EXTRA_OEMESON plus PACKAGECONFIG's
    enabled/disabled halves (the default PACKAGECONFIG when None)."""
    variables, flags = recipe()
    opts = split_d_options(variables["EXTRA_OEMESON"])
    chosen = set(variables.get("PACKAGECONFIG", "").split()) if packageconfig is None \
        else packageconfig
    for (name, flag), value in flags.items():
        if name != "PACKAGECONFIG":
            continue
        fields = value.split(",")
        opts.update(split_d_options(fields[0] if flag in chosen else fields[1]))
    return opts


MK_VARS = ("VERSION", "SITE", "SITE_METHOD", "SOURCE", "LICENSE", "CONF_OPTS",
           "OVERRIDE_SRCDIR_RSYNC_EXCLUSIONS")


def buildroot_vars(config: dict[str, str] | None = None) -> dict[str, str]:
    """RTLAB_PROBE_* of rtlab-probe.mk as GNU make evaluates them, with the given
    Buildroot configuration symbols (name -> value as in .config, strings quoted)
    and BR2_EXTERNAL_RTLAB_PATH set like Buildroot sets it. meson-package is left
    empty: the package infrastructure is Buildroot's, not evaluated here."""
    make = shutil.which("make")
    if make is None:
        pytest.skip("GNU make is not installed (apt-get install make)")
    lines = [f"BR2_EXTERNAL_RTLAB_PATH := {BR_EXTERNAL}",
             'qstrip = $(strip $(subst ",,$(1)))',
             "meson-package :="]
    lines += [f"{k} := {v}" for k, v in (config or {}).items()]
    lines.append(f"include {BR_MK}")
    lines += [f"$(info {v}=$(RTLAB_PROBE_{v}))" for v in MK_VARS]
    lines.append("all: ;")
    with tempfile.NamedTemporaryFile("w", suffix=".mk") as f:
        f.write("\n".join(lines) + "\n")
        f.flush()
        r = subprocess.run([make, "-s", "--no-print-directory", "-f", f.name],
                           capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 0, r.stderr
    out = dict(line.split("=", 1) for line in r.stdout.splitlines() if "=" in line)
    return {k: " ".join(v.split()) for k, v in out.items()}
