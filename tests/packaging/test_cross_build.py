# SPDX-License-Identifier: MIT
"""The cross build each recipe performs, performed the way it performs it, for an
aarch64 image with Debian's cross compiler: a meson cross file of the shape Yocto's
meson class and Buildroot's meson infrastructure write (the compiler with a sysroot,
the image's compiler flags, needs_exe_wrapper), the recipe's own meson options (read
from the recipe and the .mk), the build directory outside the sources, the install
into a DESTDIR; then the one installed file is the engine, of the right machine and
linking, and it runs under qemu-user. Behaviour only, no timing."""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from .recipes import ROOT, buildroot_vars, project_version, split_d_options, yocto_meson_options

pytestmark = pytest.mark.slow

TRIPLET = "aarch64-linux-gnu"
QEMU = "qemu-aarch64-static"
EM_AARCH64 = 183
PT_INTERP = 3
WAIT = 600  # a build on a loaded 2-vCPU machine


def _tool(name: str, hint: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} is not installed ({hint})")
    return path


def _meson() -> str:
    beside = Path(sys.executable).parent / "meson"
    return str(beside) if beside.exists() else _tool("meson", "pip install meson")


@pytest.fixture(scope="module")
def sysroot(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A sysroot of the image's C library in the layout both build systems stage
    (usr/include, usr/lib, lib), made of Debian's cross libc (libc6-dev-arm64-cross);
    its own absolute path is kept too, which its linker scripts name."""
    _tool(f"{TRIPLET}-gcc", "apt-get install gcc-aarch64-linux-gnu libc6-dev-arm64-cross")
    libc = Path("/usr") / TRIPLET
    if not (libc / "lib" / "libc.a").is_file():
        pytest.skip(f"no {libc}/lib/libc.a (apt-get install libc6-dev-arm64-cross)")
    root = tmp_path_factory.mktemp("sysroot")
    (root / "usr").mkdir()
    (root / "usr" / "include").symlink_to(libc / "include")
    (root / "usr" / "lib").symlink_to(libc / "lib")
    (root / "lib").symlink_to(libc / "lib")
    (root / "usr" / TRIPLET).symlink_to(libc)
    return root


def _quoted(items: list[str]) -> str:
    return "[" + ", ".join(repr(x) for x in items) + "]"


def _host_machine() -> str:
    return ("[host_machine]\nsystem = 'linux'\ncpu_family = 'aarch64'\ncpu = 'aarch64'\n"
            "endian = 'little'\n")


def _run(argv: list[str], cwd: Path, env: dict[str, str] | None = None,
         timeout: int = WAIT) -> subprocess.CompletedProcess[str]:
    r = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True,
                       timeout=timeout, check=False)
    assert r.returncode == 0, f"{' '.join(argv)}:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r


def _installed(destdir: Path) -> list[str]:
    return sorted(str(p.relative_to(destdir)) for p in destdir.rglob("*")
                  if p.is_file() or p.is_symlink())


def _elf(path: Path) -> tuple[int, str | None]:
    """(e_machine, program interpreter or None) of a 64-bit little-endian ELF."""
    data = path.read_bytes()
    assert data[:4] == b"\x7fELF" and data[4] == 2 and data[5] == 1, f"{path}: not ELF64 LE"
    machine = struct.unpack_from("<H", data, 18)[0]
    phoff, = struct.unpack_from("<Q", data, 32)
    phentsize, phnum = struct.unpack_from("<HH", data, 54)
    for i in range(phnum):
        off = phoff + i * phentsize
        p_type, = struct.unpack_from("<I", data, off)
        if p_type == PT_INTERP:
            p_offset, = struct.unpack_from("<Q", data, off + 8)
            p_filesz, = struct.unpack_from("<Q", data, off + 32)
            return machine, data[p_offset:p_offset + p_filesz].rstrip(b"\0").decode()
    return machine, None


def _runs_under_qemu(binary: Path, sysroot: Path, static: bool) -> None:
    qemu = _tool(QEMU, "apt-get install qemu-user-static")
    env = dict(os.environ)
    env.pop("QEMU_CPU", None)
    if not static:
        env["QEMU_LD_PREFIX"] = str(sysroot)  # the image's /lib/ld-linux-aarch64.so.1
    r = _run([qemu, str(binary), "--version", "--json"], cwd=binary.parent, env=env, timeout=120)
    info = json.loads(r.stdout)
    assert (info["arch"], info["static"], info["engine_version"]) == \
        ("aarch64", static, project_version())
    r = _run([qemu, str(binary), "timer", "--cpus", "0", "--duration", "300ms", "--policy",
              "other", "--no-mlock", "--allow-non-rt"], cwd=binary.parent, env=env, timeout=300)
    types = [json.loads(line)["type"] for line in r.stdout.splitlines() if line.strip()]
    assert types[0] == "header" and types[-1] == "result", types


def test_yocto_cross_build(tmp_path: Path, sysroot: Path) -> None:
    """As meson.bbclass does it: a cross file with the compiler and --sysroot in its
    [binaries] line and the image's CFLAGS/LDFLAGS in [built-in options]; meson setup
    with the class's directory options and the recipe's EXTRA_OEMESON + PACKAGECONFIG;
    meson compile (all default targets); meson install --destdir."""
    cross = tmp_path / "meson.cross"
    # the flags of oe-core's defaults for MACHINE = "qemuarm64" (cortex-a57), as its
    # do_write_config put them in this recipe's meson.cross (docs/embedded.md)
    cc = [f"{TRIPLET}-gcc", "-mcpu=cortex-a57+crc", "-mbranch-protection=standard",
          "-fstack-protector-strong", "-O2", "-D_FORTIFY_SOURCE=2", "-Wformat",
          "-Wformat-security", "-Werror=format-security", f"--sysroot={sysroot}"]
    # (less -fcanon-prefix-map, which Debian 12's gcc 12 does not know)
    c_args = ["-O2", "-g", f"-ffile-prefix-map={ROOT}=/usr/src/debug",
              f"-ffile-prefix-map={tmp_path / 'build'}=/usr/src/debug", "-pipe"]
    ldflags = ["-Wl,-O1", "-Wl,--hash-style=gnu", "-Wl,--as-needed", "-Wl,-z,relro,-z,now"]
    cross.write_text(
        "[binaries]\n"
        f"c = {_quoted(cc)}\n"
        f"ar = '{TRIPLET}-gcc-ar'\n"
        f"strip = '{TRIPLET}-strip'\n"
        "[built-in options]\n"
        f"c_args = {_quoted(c_args)}\n"
        f"c_link_args = {_quoted(ldflags)}\n"
        "[properties]\n"
        "needs_exe_wrapper = true\n"
        f"sys_root = '{sysroot}'\n" + _host_machine())
    build, image = tmp_path / "build", tmp_path / "image"
    dirs = {"prefix": "/usr", "bindir": "/usr/bin", "libdir": "/usr/lib",
            "datadir": "/usr/share", "sysconfdir": "/etc", "localstatedir": "/var"}
    opts = [f"-D{k}={v}" for k, v in yocto_meson_options().items()]
    _run([_meson(), "setup", str(build), str(ROOT), "--buildtype", "plain",
          *[f"--{k}={v}" for k, v in dirs.items()], "--wrap-mode", "nodownload",
          "--cross-file", str(cross), *opts], cwd=tmp_path)
    _run([_meson(), "compile", "-C", str(build)], cwd=tmp_path)
    assert not list(build.rglob("test_hist*")), "the C unit tests were built"
    _run([_meson(), "install", "-C", str(build), "--destdir", str(image), "--no-rebuild"],
         cwd=tmp_path)
    assert _installed(image) == ["usr/bin/rtlab-probe"]
    binary = image / "usr" / "bin" / "rtlab-probe"
    assert _elf(binary) == (EM_AARCH64, "/lib/ld-linux-aarch64.so.1")
    _runs_under_qemu(binary, sysroot, static=False)


def test_buildroot_cross_build_static_image(tmp_path: Path, sysroot: Path) -> None:
    """As Buildroot's meson-package does it, for an image with BR2_STATIC_LIBS: the
    sources the package's rsync filter keeps; a cross file with the compiler, the
    image's TARGET_CFLAGS and the sysroot (Buildroot's toolchain wrapper adds it);
    meson setup with the infrastructure's options and the package's CONF_OPTS; ninja;
    ninja install with DESTDIR=target."""
    v = buildroot_vars({"BR2_PACKAGE_RTLAB_PROBE": "y", "BR2_STATIC_LIBS": "y",
                        "BR2_TOOLCHAIN_HEADERS_AT_LEAST_5_9": "y"})
    ninja = _tool("ninja", "apt-get install ninja-build")
    src = tmp_path / "rtlab-probe-src"
    src.mkdir()
    kept = [w.split("=/", 1)[1].removesuffix("/***") for w in
            v["OVERRIDE_SRCDIR_RSYNC_EXCLUSIONS"].split() if w.startswith("--include=/")]
    for name in kept:
        (shutil.copytree if (ROOT / name).is_dir() else shutil.copy2)(ROOT / name, src / name)
    build = src / "buildroot-build"
    build.mkdir()
    cross = build / "cross-compilation.conf"
    cflags = ["-D_LARGEFILE_SOURCE", "-D_LARGEFILE64_SOURCE", "-D_FILE_OFFSET_BITS=64", "-O2",
              "-g0", "-D_FORTIFY_SOURCE=1", f"--sysroot={sysroot}"]
    cross.write_text(
        "[binaries]\n"
        f"c = '{TRIPLET}-gcc'\nar = '{TRIPLET}-ar'\nstrip = '{TRIPLET}-strip'\n"
        "[built-in options]\n"
        f"c_args = {_quoted(cflags)}\n"
        f"c_link_args = {_quoted([f'--sysroot={sysroot}'])}\n"
        "wrap_mode = 'nodownload'\n"
        "[properties]\n"
        "needs_exe_wrapper = true\n"
        f"sys_root = '{sysroot}'\n"
        "pkg_config_static = 'true'\n" + _host_machine())
    opts = [f"-D{k}={val}" for k, val in split_d_options(v["CONF_OPTS"]).items()]
    _run([_meson(), "setup", "--prefix=/usr", "--libdir=lib", "--default-library=static",
          "--buildtype=release", f"--cross-file={cross}", "-Db_pie=false", "-Db_staticpic=true",
          "-Dstrip=false", *opts, str(src), str(build)], cwd=src)
    _run([ninja, "-C", str(build)], cwd=src)
    target = tmp_path / "target"
    _run([ninja, "-C", str(build), "install"], cwd=src, env={**os.environ, "DESTDIR": str(target)})
    assert _installed(target) == ["usr/bin/rtlab-probe"]
    binary = target / "usr" / "bin" / "rtlab-probe"
    assert _elf(binary) == (EM_AARCH64, None)
    _runs_under_qemu(binary, sysroot, static=True)
