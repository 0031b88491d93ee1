# SPDX-License-Identifier: MIT
"""Building rtlab's sdist and wheel once, and installing the wheel where no compiler is.

`built()` runs `python -m build --no-isolation` on the committed tree (the sdist is
`meson dist` of git HEAD, and the wheel is built from that sdist, as a user's
`python -m build` does): every board engine is compiled by the Zig toolchain inside
the sdist's build. The pair is kept under build/wheel-test/<tree hash>/ so that a test
session builds it once (and the next session of the same commit not at all); a file
lock keeps two sessions from building at once.

`no_compiler_path()` is a directory of links to every program of the system's bin
directories except compilers, assemblers, linkers and cross toolchains: a PATH on
which rtlab must work with the engines it carries.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CACHE = REPO / "build" / "wheel-test"
BUILD_TIMEOUT = 1800  # a cold zig cache on a loaded 2-vCPU machine; warm it takes minutes
SYSTEM_BIN = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")
# compilers, assemblers, linkers, cross toolchains (aarch64-linux-gnu-gcc, ...)
_TOOLCHAIN = re.compile(r"^(cc|c\+\+|c89|c99|cpp|as|ld|gold|tcc|zig|musl-gcc)$|gcc|g\+\+|clang"
                        r"|^ld\.|-linux-gnu|-linux-musl|^x86_64-|^i686-")
COMPILERS = ("cc", "gcc", "c99", "clang", "zig", "musl-gcc", "aarch64-linux-gnu-gcc",
             "arm-linux-gnueabihf-gcc", "powerpc64-linux-gnu-gcc", "powerpc-linux-gnu-gcc",
             "x86_64-linux-gnu-gcc", "ld", "as")


@dataclass(frozen=True)
class Built:
    sdist: Path
    wheel: Path
    seconds: float  # 0.0: taken from the cache


def tree_key() -> str:
    """The git tree of HEAD: what `meson dist` puts into the sdist."""
    out = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD^{tree}"],
                         capture_output=True, text=True, check=True)
    return out.stdout.strip()[:16]


def _found(d: Path) -> Built | None:
    sdists = sorted(d.glob("rtlab-*.tar.gz"))
    wheels = sorted(d.glob("rtlab-*.whl"))
    if len(sdists) == 1 and len(wheels) == 1:
        return Built(sdists[0], wheels[0], 0.0)
    return None


def built() -> Built:
    """The sdist and wheel of HEAD, built now or earlier (see the module's text)."""
    d = CACHE / tree_key()
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        have = _found(d)
        if have is not None:
            return have
        tmp = CACHE / f".{d.name}.{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
        env.pop("RTLAB_ENGINES", None)
        t0 = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir",
                               str(tmp), str(REPO)], capture_output=True, text=True, env=env,
                              timeout=BUILD_TIMEOUT, check=False)
        took = time.monotonic() - t0
        if proc.returncode != 0:
            shutil.rmtree(tmp, ignore_errors=True)
            tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-40:])
            raise AssertionError(f"python -m build failed ({proc.returncode}):\n{tail}")
        (tmp / "build-seconds").write_text(f"{took:.0f}\n")
        tmp.rename(d)
        _prune(keep=3)
        found = _found(d)
        assert found is not None, f"python -m build left no sdist and wheel in {d}"
        return Built(found.sdist, found.wheel, took)


def _prune(keep: int) -> None:
    """Keep the newest `keep` builds of the cache (a session of another commit may still
    use one of them), and no leftovers of failed builds."""
    done = sorted((p for p in CACHE.iterdir() if p.is_dir() and not p.name.startswith(".")),
                  key=lambda p: p.stat().st_mtime, reverse=True)
    for old in done[keep:]:
        shutil.rmtree(old, ignore_errors=True)
    for left in CACHE.glob(".*.*"):
        if left.is_dir() and not (Path("/proc") / left.suffix.lstrip(".")).exists():
            shutil.rmtree(left, ignore_errors=True)


def no_compiler_path(root: Path) -> str:
    """A PATH (one directory under `root`) with the system's programs but no toolchain."""
    bindir = root / "bin-without-compilers"
    bindir.mkdir(parents=True, exist_ok=True)
    for d in SYSTEM_BIN:
        if not os.path.isdir(d):
            continue
        for name in os.listdir(d):
            target = os.path.join(d, name)
            link = bindir / name
            if _TOOLCHAIN.search(name) or link.exists() or link.is_symlink():
                continue
            if os.path.isfile(target) and os.access(target, os.X_OK):
                link.symlink_to(target)
    return str(bindir)


def fresh_venv(root: Path, wheel: Path, path: str) -> Path:
    """A new virtual environment with the wheel installed (its dependencies from the
    package index, or pip's cache), on a PATH without compilers; its bin/."""
    venv = root / "venv"
    env = {**os.environ, "PATH": path, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    for var in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "RTLAB_ENGINES", "RTLAB_PROBE"):
        env.pop(var, None)
    subprocess.run([system_python(), "-m", "venv", str(venv)], check=True, env=env,
                   capture_output=True, timeout=300)
    proc = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q",
                           str(wheel)], env=env, capture_output=True, text=True, timeout=900,
                          check=False)
    assert proc.returncode == 0, f"pip install of the wheel failed: {proc.stderr[-3000:]}"
    return venv / "bin"


def system_python() -> str:
    """The system's Python 3.11+ (what a user installs with; any user may run it), else
    the interpreter this test's venv was made from."""
    system = "/usr/bin/python3"
    if os.access(system, os.X_OK):
        check = "import sys, venv; sys.exit(sys.version_info < (3, 11))"
        ok = subprocess.run([system, "-c", check], capture_output=True, check=False)
        if ok.returncode == 0:
            return system
    base = Path(sys.base_prefix) / "bin" / f"python{sys.version_info[0]}.{sys.version_info[1]}"
    return str(base) if base.exists() else f"{sys.base_prefix}/bin/python3"


def clean_env(path: str, **extra: str) -> dict[str, str]:
    """The environment of a command run from the fresh install: no hint of the clone."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "RTLAB_ENGINES",
                        "RTLAB_PROBE")}
    env["PATH"] = path
    env.update(extra)
    return env
