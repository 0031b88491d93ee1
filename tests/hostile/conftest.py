# SPDX-License-Identifier: MIT
"""The hostile-input harness: a private environment per case, a snapshot of everything a
case could touch, and the checks every case must pass (exit code, one line on stderr, no
traceback, nothing created or changed, no system state or process left)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import signal
import sqlite3
import stat
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.support.devices import device_nodes
from tests.support.env import REPO, subprocess_env
from tests.support.procs import children_of

DATA = REPO / "tests" / "support" / "data"
CASE_TIMEOUT_S = 30  # a case that blocks (a FIFO, an endless device) fails, never hangs
DEVICES = ("/dev/null", "/dev/full", "/dev/zero")
CGROUP_GLOBS = (("/sys/fs/cgroup/cpuset", "rtlab*"), ("/sys/fs/cgroup", "rtlab*"))


class CaseTimeout(BaseException):
    """Raised by the alarm in a case run in this process (not an Exception: no `except
    Exception` of the code under test can swallow it)."""


@dataclass(frozen=True)
class Seed:
    """A result store made once per session: two timer runs and a udp run."""

    store: Path
    timer: str
    timer2: str
    udp: str


def _import(store: Path, fmt: str, name: str, env: dict[str, str]) -> None:
    r = subprocess.run([sys.executable, "-m", "rtlab", "results", "import", "--format", fmt,
                        "--store", str(store), str(DATA / name)], env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr


@pytest.fixture(scope="session")
def seed(tmp_path_factory: pytest.TempPathFactory) -> Seed:
    d = tmp_path_factory.mktemp("hostile-seed")
    store = d / "seed.db"
    env = subprocess_env({"HOME": str(d), "XDG_DATA_HOME": str(d / "xdg")})
    _import(store, "cyclictest-json", "cyclictest.json", env)
    _import(store, "cyclictest-hist", "cyclictest_hist.txt", env)
    _import(store, "sockperf", "sockperf_full_log.csv", env)
    r = subprocess.run([sys.executable, "-m", "rtlab", "results", "list", "--json",
                        "--store", str(store)], env=env, capture_output=True, text=True,
                       timeout=60)
    runs = json.loads(r.stdout)["runs"]
    timers = [x["id"] for x in runs if x["probe"] == "timer"]
    (udp,) = [x["id"] for x in runs if x["probe"] != "timer"]
    return Seed(store, timers[0], timers[1], udp)


def make_fixtures(d: Path) -> dict[str, str]:
    """The hostile paths of one case, in its own directory: name -> path."""
    d.mkdir(parents=True, exist_ok=True)
    fifo = d / "fifo"
    os.mkfifo(fifo)
    (d / "loop").symlink_to(d / "loop")
    (d / "a-dir").mkdir()
    (d / "empty").write_bytes(b"")
    (d / "binary").write_bytes(bytes(range(256)) * 64)
    (d / "nested.toml").write_text("x = " + "[" * 100_000 + "]" * 100_000 + "\n")
    with open(d / "huge", "wb") as f:  # sparse: beyond any input bound, costs no disk
        f.truncate((1 << 30) + (1 << 20))
    foreign = d / "foreign.db"
    con = sqlite3.connect(foreign)
    con.execute("create table mine (x integer)")
    con.execute("insert into mine values (42)")
    con.commit()
    con.close()
    devices = {f"DEV{k.upper()}": v for k, v in device_nodes(d).items()}
    return {"FIFO": str(fifo), "LOOP": str(d / "loop"), "DIR": str(d / "a-dir"),
            "EMPTY": str(d / "empty"), "BINARY": str(d / "binary"),
            "NESTED": str(d / "nested.toml"), "HUGE": str(d / "huge"),
            "FOREIGN": str(foreign), "MISSING": str(d / "missing"),
            "NODIR": str(d / "no-such-dir" / "file"), "DIRSLASH": str(d / "a-dir") + "/",
            **devices, "PROC": "/proc/self/status"}


def resolve(value: str, paths: dict[str, str]) -> str:
    """'{FIFO}' -> the case's FIFO path (values name the hostile paths in braces)."""
    for name, path in paths.items():
        value = value.replace("{" + name + "}", path)
    return value


def _entry(path: Path) -> tuple[object, ...]:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return ("missing",)
    kind = stat.S_IFMT(st.st_mode)
    digest = ""
    if stat.S_ISREG(st.st_mode) and st.st_size <= 4 << 20:
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
    return (kind, st.st_size, st.st_mtime_ns, st.st_ino, st.st_mode, digest)


def snapshot(roots: list[Path], named: list[Path]) -> dict[str, tuple[object, ...]]:
    """Type, size, mtime, inode, mode and (small files) content of every file under
    `roots` and of every `named` path: a case must leave all of them as they were."""
    out: dict[str, tuple[object, ...]] = {}
    for root in roots:
        for dirpath, dirs, files in os.walk(root):
            for n in dirs + files:
                p = Path(dirpath) / n
                out[str(p)] = _entry(p)
            out[dirpath] = _entry(Path(dirpath))
    for p in [*named, *map(Path, DEVICES)]:
        out[str(p)] = _entry(p)
    return out


def children() -> set[int]:
    """Processes whose parent is this one (a case must leave none behind)."""
    return children_of(os.getpid())


def cgroups() -> set[str]:
    return {str(p) for base, pat in CGROUP_GLOBS if Path(base).is_dir()
            for p in Path(base).glob(pat)}


@dataclass
class Outcome:
    code: int | str
    out: str
    err: str
    changed: dict[str, tuple[object, ...]] = field(default_factory=dict)
    journals: list[str] = field(default_factory=list)
    left: set[int] = field(default_factory=set)
    cgroups: set[str] = field(default_factory=set)


class Hostile:
    """Runs one case in a private environment (HOME, XDG_DATA_HOME, RTLAB_STORE,
    RTLAB_JOURNAL_DIR under the case's directory) and reports what it did."""

    def __init__(self, tmp: Path, seed: Seed, monkeypatch: pytest.MonkeyPatch,
                 capsys: pytest.CaptureFixture[str]) -> None:
        self.tmp = tmp
        self.home = tmp / "home"
        self.home.mkdir()
        self.journal = tmp / "journal"
        self.store = tmp / "store.db"
        self.other = tmp / "other.db"
        shutil.copyfile(seed.store, self.store)
        shutil.copyfile(seed.store, self.other)
        self.paths = make_fixtures(tmp / "paths")
        self.seed = seed
        self.capsys = capsys
        # matplotlib keeps its font cache in the home: one outside the case's directory
        self.env = {"MPLCONFIGDIR": str(seed.store.parent / "matplotlib"),
                    "HOME": str(self.home), "XDG_DATA_HOME": str(self.home / "xdg"),
                    "RTLAB_STORE": str(self.store), "RTLAB_JOURNAL_DIR": str(self.journal)}
        for k, v in self.env.items():
            monkeypatch.setenv(k, v)
        monkeypatch.chdir(self.home)

    def values(self) -> dict[str, str]:
        return {**self.paths, "STORE": str(self.store), "OTHER": str(self.other),
                "JOURNAL": str(self.journal), "HOME": str(self.home),
                "RUN": self.seed.timer, "RUN2": self.seed.timer2, "UDP": self.seed.udp,
                "CYCLICTEST": str(DATA / "cyclictest.json"),
                "CPU": str(max(os.sched_getaffinity(0)))}

    @contextlib.contextmanager
    def _watch(self, named: list[Path], out: Outcome) -> Iterator[None]:
        roots = [self.tmp]
        before = snapshot(roots, named)
        kids, groups = children(), cgroups()
        yield
        after = snapshot(roots, named)
        out.changed = {k: v for k, v in after.items() if before.get(k) != v}
        out.changed.update({k: ("gone",) for k in before if k not in after})
        out.journals = sorted(str(p) for p in self.journal.glob("*.journal")) \
            if self.journal.is_dir() else []
        out.left = children() - kids
        out.cgroups = cgroups() - groups

    def run(self, argv: list[str], named: list[Path] | None = None) -> Outcome:
        """`rtlab ARGV` in this process (fast), bounded by an alarm."""
        from rtlab.cli import main

        def on_alarm(_sig: int, _frame: object) -> None:
            raise CaseTimeout

        out = Outcome(-1, "", "")
        self.capsys.readouterr()
        old = signal.signal(signal.SIGALRM, on_alarm)
        with self._watch(named or [], out):
            signal.alarm(CASE_TIMEOUT_S)
            try:
                out.code = main(argv)
            except SystemExit as exc:
                out.code = exc.code if isinstance(exc.code, int) else 1
            except CaseTimeout:
                out.code = f"still running after {CASE_TIMEOUT_S} s"
            finally:
                signal.alarm(0)
                signal.signal(signal.SIGALRM, old)
            cap = self.capsys.readouterr()
            out.out, out.err = cap.out, cap.err
        return out

    def spawn(self, argv: list[str], named: list[Path] | None = None,
              memory_mb: int = 1024) -> Outcome:
        """`python -m rtlab ARGV` in a child bounded in time and address space (for cases
        that could block or grow without end)."""
        import resource

        def limits() -> None:
            resource.setrlimit(resource.RLIMIT_AS, (memory_mb << 20, memory_mb << 20))

        out = Outcome(-1, "", "")
        with self._watch(named or [], out):
            try:
                r = subprocess.run([sys.executable, "-m", "rtlab", *argv],
                                   env=subprocess_env(self.env), cwd=self.home,
                                   capture_output=True, timeout=CASE_TIMEOUT_S,
                                   preexec_fn=limits, stdin=subprocess.DEVNULL)
                out.code = r.returncode
                out.out = r.stdout.decode(errors="replace")
                out.err = r.stderr.decode(errors="replace")
            except subprocess.TimeoutExpired as exc:
                out.code = f"still running after {CASE_TIMEOUT_S} s"
                out.err = (exc.stderr or b"").decode(errors="replace")
        return out


@pytest.fixture
def hostile(tmp_path: Path, seed: Seed, monkeypatch: pytest.MonkeyPatch,
            capsys: pytest.CaptureFixture[str]) -> Hostile:
    return Hostile(tmp_path, seed, monkeypatch, capsys)


def check(out: Outcome, expect: int | tuple[int, ...], words: str | None = None,
          may_change: tuple[str, ...] = ()) -> None:
    """What every refused input must give: the exit code, exactly one short line on
    stderr naming what was wrong, no traceback, nothing created or changed, no journal,
    cgroup or process left."""
    codes = (expect,) if isinstance(expect, int) else expect
    lines = out.err.strip().splitlines()
    assert out.code in codes, f"exit {out.code}, expected {codes}; stderr: {out.err[-600:]!r}"
    assert "Traceback" not in out.err + out.out, out.err[-2000:]
    if out.code != 0:
        assert len(lines) == 1, f"{len(lines)} lines on stderr: {out.err[-600:]!r}"
        assert len(lines[0]) <= 600, f"a {len(lines[0])}-character line: {lines[0][:200]!r}"
        if words is not None:
            assert words in lines[0], lines[0]
    changed = {k: v for k, v in out.changed.items()
               if not (out.code == 0 and k.startswith(may_change or ("\0",)))}
    assert not changed, f"changed: {changed}"
    assert not out.journals, f"journals left: {out.journals}"
    assert not out.cgroups, f"cgroups left: {out.cgroups}"
    assert not out.left, f"processes left: {out.left}"
