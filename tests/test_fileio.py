# SPDX-License-Identifier: MIT
"""rtlab.fileio: the one way to write an output file and to read an input file."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from rtlab.errors import RtlabError, UsageError
from rtlab.fileio import (
    check_input,
    check_output,
    decode_text,
    open_output,
    read_input,
    read_text_input,
    write_output,
    write_outputs,
)
from tests.support.devices import MINORS, device_nodes

ROOT = Path(__file__).resolve().parents[1]


def listing(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir())


@pytest.mark.parametrize("name", sorted(MINORS))
def test_a_device_is_refused_and_stays_a_device(name: str, tmp_path: Path) -> None:
    device = device_nodes(tmp_path)[name]  # the test's own node (as root)
    before = os.stat(device)
    with pytest.raises(UsageError, match="character device"):
        write_output(device, "x", "-o")
    after = os.stat(device)
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == before.st_rdev


def test_directory_fifo_proc_and_missing_directory_are_refused(tmp_path: Path) -> None:
    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    cases = {str(tmp_path): "directory", str(fifo): "FIFO",
             "/proc/self/comm": "proc filesystem",
             str(tmp_path / "no" / "r.html"): "does not exist", "": "not a file name"}
    for path, words in cases.items():
        with pytest.raises(UsageError, match=words):
            check_output(path, "--report")
    assert listing(tmp_path) == ["f"]


def test_symlink_loop_and_dangling_link(tmp_path: Path) -> None:
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    (tmp_path / "d").symlink_to(tmp_path / "missing")
    with pytest.raises(UsageError, match="symlink loop"):
        check_output(tmp_path / "a", "-o")
    with pytest.raises(UsageError, match="symbolic link to a missing file"):
        check_output(tmp_path / "d", "-o")
    with pytest.raises(UsageError, match="symlink loop"):
        read_input(tmp_path / "a", "import file")


def test_write_replaces_a_regular_file_keeps_its_mode_and_leaves_no_temp(tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    out.write_text("old")
    out.chmod(0o640)
    assert write_output(out, "new", "-o") == out
    assert out.read_text() == "new" and stat.S_IMODE(out.stat().st_mode) == 0o640
    assert listing(tmp_path) == ["r.html"]


def test_a_symlink_to_a_file_writes_the_file_and_keeps_the_link(tmp_path: Path) -> None:
    real = tmp_path / "real.html"
    real.write_text("old")
    (tmp_path / "link.html").symlink_to(real)
    write_output(tmp_path / "link.html", "new", "-o")
    assert (tmp_path / "link.html").is_symlink() and real.read_text() == "new"


def test_a_failure_while_writing_leaves_the_target_and_no_temp(tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    out.write_text("old")
    with pytest.raises(RuntimeError), open_output(out, "-o") as f:
        f.write(b"half")
        raise RuntimeError("boom")
    assert out.read_text() == "old" and listing(tmp_path) == ["r.html"]


def test_several_outputs_all_or_none(tmp_path: Path) -> None:
    report, junit = tmp_path / "r.html", tmp_path / "missing" / "j.xml"
    with pytest.raises(UsageError, match="does not exist"):
        write_outputs([(report, "<html>", "--report"), (junit, "<xml/>", "--junit")])
    assert listing(tmp_path) == []
    with pytest.raises(UsageError, match="same file"):
        write_outputs([(report, "a", "--report"), (report, "b", "--junit")])
    write_outputs([(report, "a", "--report"), (tmp_path / "j.xml", "b", "--junit")])
    assert listing(tmp_path) == ["j.xml", "r.html"]


def test_a_full_disk_is_an_error_and_leaves_nothing(tmp_path: Path) -> None:
    """A real filesystem that runs out of space (a 64-KiB tmpfs): the write error is
    seen, the temporary file removed, the old file kept."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    mnt = tmp_path / "small"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)],
                      capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        (mnt / "r.html").write_text("old")
        with pytest.raises(RtlabError, match="No space left"):
            write_output(mnt / "r.html", b"x" * (1 << 20), "-o")
        assert listing(mnt) == ["r.html"] and (mnt / "r.html").read_text() == "old"
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


def test_inputs_must_be_regular_bounded_text(tmp_path: Path) -> None:
    fifo = tmp_path / "f"
    os.mkfifo(fifo)
    for path, words in ((fifo, "FIFO"), ("/dev/zero", "character device"),
                        (tmp_path, "directory"), (tmp_path / "none", "does not exist"),
                        ("/proc/self/status", "proc filesystem")):
        with pytest.raises(UsageError, match=words):
            read_input(path, "scenario file")
    big = tmp_path / "big"
    big.write_bytes(b"a" * 2000)
    with pytest.raises(UsageError, match="more than the 1000 bytes"):
        read_input(big, "scenario file", limit=1000)
    assert read_input(big, "scenario file", limit=2000) == b"a" * 2000
    binary = tmp_path / "bin"
    binary.write_bytes(b"ab\0cd")
    with pytest.raises(UsageError, match=r"binary \(a NUL byte at offset 2"):
        read_text_input(binary, "scenario file")
    latin = tmp_path / "latin"
    latin.write_bytes(b"host caf\xe9\n")
    with pytest.raises(UsageError, match=r"not UTF-8 text \(byte 0xe9 at offset 8"):
        read_text_input(latin, "scenario file")
    assert decode_text(latin.read_bytes(), "import file", latin, lenient=True) == (
        "host caf\ufffd\n")
    assert check_input(big, "x", limit=2000) == big


def test_a_long_path_is_cut_in_the_message(tmp_path: Path) -> None:
    with pytest.raises(UsageError) as err:
        read_input("/nope/" + "x" * 5000, "import file")
    assert len(err.value.one_line()) < 400 and "characters" in err.value.one_line()


def test_ctrl_c_interrupts_a_long_read(tmp_path: Path) -> None:
    """A read of a large file is done in pieces: SIGINT ends it with KeyboardInterrupt
    (exit 130 at the CLI), not after the whole file."""
    big = tmp_path / "big"
    with open(big, "wb") as f:
        f.truncate(900 << 20)  # sparse: costs no disk
    code = textwrap.dedent(f"""
        import signal, sys, time
        from rtlab.fileio import read_input
        # Ctrl-C as a terminal gives it, even if this test's process ignored SIGINT
        signal.signal(signal.SIGINT, signal.default_int_handler)
        print("ready", flush=True)
        try:
            for _ in range(1000):
                read_input({str(big)!r}, "import file", limit=1 << 30)
        except KeyboardInterrupt:
            sys.exit(130)
        sys.exit(0)
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=30) == 130
