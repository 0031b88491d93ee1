# SPDX-License-Identifier: MIT
"""tracefs access and a flight Recorder that uses its own trace instance.

The Recorder never touches the global trace buffer: it creates
`instances/rtlab-<pid>`, configures it (clock `mono`, CPU mask, per-CPU buffer
size, overwrite mode, events), and a reader thread drains each CPU's
`trace_pipe_raw` into bounded in-memory page deques. The instance is removed on
close, on exceptions, at interpreter exit and on SIGTERM; instances left by a
killed rtlab (dead pid) are removed by the next Recorder.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import os
import re
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType, TracebackType

from rtlab.cpulist import format_cpumask
from rtlab.errors import RtlabError, SkippedError
from rtlab.trace.capture import FormatSet, TraceCapture
from rtlab.trace.ringbuf import page_info
from rtlab.trace.symbols import LocalSymbols

# Events the attribution uses. Absent ones are skipped individually and reported.
DEFAULT_EVENTS: tuple[str, ...] = (
    "sched/sched_switch",
    "sched/sched_waking",
    "sched/sched_wakeup",
    "irq/irq_handler_entry",
    "irq/irq_handler_exit",
    "irq/softirq_entry",
    "irq/softirq_exit",
    "timer/hrtimer_start",
    "timer/hrtimer_expire_entry",
    "timer/hrtimer_expire_exit",
    "ipi/ipi_raise",
    "ipi/ipi_entry",
    "ipi/ipi_exit",
    "ipi/ipi_send_cpu",
    "ipi/ipi_send_cpumask",
    "irq_vectors/local_timer_entry",
    "irq_vectors/local_timer_exit",
    "irq_vectors/reschedule_entry",
    "irq_vectors/reschedule_exit",
    "irq_vectors/call_function_entry",
    "irq_vectors/call_function_exit",
    "irq_vectors/call_function_single_entry",
    "irq_vectors/call_function_single_exit",
    "irq_vectors/irq_work_entry",
    "irq_vectors/irq_work_exit",
    "irq_vectors/x86_platform_ipi_entry",
    "irq_vectors/x86_platform_ipi_exit",
    "irq_vectors/thermal_apic_entry",
    "irq_vectors/thermal_apic_exit",
    "power/cpu_idle",
)
MARKER_EVENT = "ftrace/print"  # trace_marker writes; always on while options/markers is 1
REQUIRED_EVENTS = ("sched/sched_switch",)
INSTANCE_PREFIX = "rtlab-"
MAX_BUFFER_KB = 256 * 1024


def _mounts() -> list[tuple[str, str]]:
    out = []
    with contextlib.suppress(OSError), open("/proc/self/mounts") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 3:
                out.append((parts[1].replace("\\040", " "), parts[2]))
    return out


@dataclass
class TraceFS:
    """Where tracefs is and whether this process mounted it (then it must unmount it)."""

    path: Path
    mounted_by_us: bool = False

    @classmethod
    def find(cls) -> TraceFS | None:
        for mnt, fstype in _mounts():
            if fstype == "tracefs":
                return cls(Path(mnt))
        for cand in ("/sys/kernel/tracing", "/sys/kernel/debug/tracing"):
            if Path(cand, "trace_clock").exists():
                return cls(Path(cand))
        return None

    @classmethod
    def find_or_mount(cls, mountpoint: str = "/sys/kernel/tracing") -> TraceFS:
        """Find tracefs or mount it; raises SkippedError with the reason if impossible."""
        found = cls.find()
        if found:
            return found
        if os.geteuid() != 0:
            raise SkippedError(
                "tracefs is not mounted and mounting it needs root",
                hint="run as root or mount -t tracefs nodev /sys/kernel/tracing",
            )
        if not Path(mountpoint).is_dir():
            raise SkippedError(
                f"no tracefs mount point {mountpoint} (kernel without tracing?)",
                hint="a kernel with CONFIG_FTRACE and CONFIG_TRACING",
            )
        res = subprocess.run(
            ["mount", "-t", "tracefs", "nodev", mountpoint],
            capture_output=True,
            text=True,
            check=False,
        )
        if res.returncode != 0 or not Path(mountpoint, "trace_clock").exists():
            msg = (res.stderr or "").strip() or "tracefs not available"
            raise SkippedError(
                f"cannot mount tracefs: {msg}",
                hint="a kernel with CONFIG_FTRACE and CONFIG_TRACING",
            )
        return cls(Path(mountpoint), mounted_by_us=True)

    def unmount_if_ours(self) -> bool:
        """Unmount if we mounted it and nobody else has an instance in it."""
        if not self.mounted_by_us:
            return False
        inst = self.path / "instances"
        if inst.is_dir() and any(inst.iterdir()):
            return False  # someone else is tracing; leave it mounted
        res = subprocess.run(["umount", str(self.path)], capture_output=True, check=False)
        if res.returncode == 0:
            self.mounted_by_us = False
            return True
        return False


def parse_stats(text: str) -> dict[str, int]:
    """per_cpu/cpuN/stats: 'entries: 12' lines -> {'entries': 12, 'dropped_events': ...}."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        m = re.match(r"^\s*([a-z][a-z ]*):\s*(\d+)\s*$", line)
        if m:
            out[m.group(1).strip().replace(" ", "_")] = int(m.group(2))
    return out


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale_instances(tfs: TraceFS) -> list[str]:
    """Remove rtlab-<pid> instances whose process is gone (left by kill -9)."""
    removed = []
    inst = tfs.path / "instances"
    if not inst.is_dir():
        return removed
    for d in inst.iterdir():
        m = re.fullmatch(INSTANCE_PREFIX + r"(\d+)(?:-\d+)?", d.name)
        if m and not _pid_alive(int(m.group(1))):
            with contextlib.suppress(OSError):
                d.rmdir()
                removed.append(d.name)
    return removed


class _CpuStore:
    """Bounded per-CPU deque of raw pages (a host-side flight recorder)."""

    def __init__(self, limit_bytes: int):
        self.pages: deque[bytes] = deque()
        self.bytes = 0
        self.limit = limit_bytes
        self.evicted = 0
        self.read_pages = 0

    def add(self, page: bytes) -> None:
        self.pages.append(page)
        self.bytes += len(page)
        self.read_pages += 1
        while self.bytes > self.limit and len(self.pages) > 1:
            self.bytes -= len(self.pages.popleft())
            self.evicted += 1


class Recorder:
    """Record scheduler/IRQ/timer events of `cpus` into an own trace instance.

    Use as a context manager, or start()/stop()/close(). close() always removes
    the instance (and unmounts tracefs if this Recorder mounted it).
    """

    _seq = 0

    def __init__(
        self,
        cpus: Sequence[int],
        *,
        events: Sequence[str] = DEFAULT_EVENTS,
        buffer_kb: int = 4096,
        memory_limit_mb: int = 256,
        poll_interval_s: float = 0.05,
        reader_cpus: Sequence[int] | None = None,
        tracefs: TraceFS | None = None,
        symbols: bool = True,
    ):
        if not cpus:
            raise RtlabError("Recorder needs at least one CPU")
        if not 16 <= buffer_kb <= MAX_BUFFER_KB:
            raise RtlabError(f"buffer_kb {buffer_kb} out of range 16..{MAX_BUFFER_KB}")
        self.cpus = sorted(set(cpus))
        self.wanted_events = tuple(events)
        self.buffer_kb = buffer_kb
        self.memory_limit = memory_limit_mb * 1024 * 1024
        self.poll_interval_s = poll_interval_s
        self.reader_cpus = list(reader_cpus) if reader_cpus else None
        self.want_symbols = symbols
        self.tfs = tracefs
        # Unmount on close only a tracefs this Recorder mounted itself; one handed in
        # belongs to the caller.
        self._owns_tfs = tracefs is None
        self.instance: Path | None = None
        self.enabled_events: list[str] = []
        self.missing_events: list[str] = []
        self.notes: list[str] = []
        self.formats: FormatSet | None = None
        self._stores = {c: _CpuStore(self.memory_limit) for c in self.cpus}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._fds: dict[int, int] = {}
        self._page_size = 4096
        self._reader_error: BaseException | None = None
        self._old_sigterm: object = None
        self._closed = False
        self.final_stats: dict[int, dict[str, int]] = {}
        self.started_ns: int | None = None
        self.stopped_ns: int | None = None

    # -- lifecycle -----------------------------------------------------------------

    def __enter__(self) -> Recorder:
        self.start()
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            self.stop()
        finally:
            self.close()

    @property
    def marker_path(self) -> Path | None:
        """This instance's trace_marker (write `rtlab spike ...` lines here)."""
        return self.instance / "trace_marker" if self.instance else None

    @property
    def copies_global_marker(self) -> bool:
        """True when writes to the top-level trace_marker also land in this instance."""
        return "copy_trace_marker" in " ".join(self.notes)

    def start(self) -> None:
        if self.tfs is None:
            self.tfs = TraceFS.find_or_mount()
        root = self.tfs.path
        if not (root / "instances").is_dir():
            raise SkippedError(f"{root} has no instances/ directory (kernel too old)")
        remove_stale_instances(self.tfs)
        Recorder._seq += 1
        name = f"{INSTANCE_PREFIX}{os.getpid()}"
        if Recorder._seq > 1:
            name += f"-{Recorder._seq}"
        inst = root / "instances" / name
        try:
            inst.mkdir()
        except OSError as exc:
            raise SkippedError(f"cannot create trace instance {inst}: {exc.strerror}") from None
        self.instance = inst
        self._install_cleanup()
        try:
            self._configure(root, inst)
            self._open_pipes(inst)
            self._thread = threading.Thread(
                target=self._reader, name="rtlab-trace-reader", daemon=True
            )
            self._thread.start()
            self.started_ns = time.monotonic_ns()
            self._write(inst / "tracing_on", "1")
        except BaseException:
            self.close()
            raise

    def _write(self, path: Path, value: str) -> None:
        try:
            with open(path, "w") as f:
                f.write(value)
        except OSError as exc:
            raise RtlabError(f"cannot write {value!r} to {path}: {exc.strerror}") from None

    def _configure(self, root: Path, inst: Path) -> None:
        self._write(inst / "tracing_on", "0")
        clocks = (inst / "trace_clock").read_text()
        if not re.search(r"(^|[\s\[])mono([\s\]]|$)", clocks):
            raise SkippedError("trace clock 'mono' is not available on this kernel")
        self._write(inst / "trace_clock", "mono")
        self._write(inst / "tracing_cpumask", format_cpumask(self.cpus, full_words=True))
        opt = inst / "options"
        self._write(opt / "overwrite", "1")
        if (opt / "markers").exists():
            self._write(opt / "markers", "1")
        if (opt / "copy_trace_marker").exists():
            try:
                self._write(opt / "copy_trace_marker", "1")
                self.notes.append("copy_trace_marker: top-level trace_marker writes are copied")
            except RtlabError as exc:
                self.notes.append(f"copy_trace_marker not set: {exc.message}")
        self._write(inst / "buffer_size_kb", str(self.buffer_kb))
        for ev in self.wanted_events:
            enable = inst / "events" / ev / "enable"
            if not enable.exists():
                self.missing_events.append(ev)
                continue
            self._write(enable, "1")
            self.enabled_events.append(ev)
        missing_required = [e for e in REQUIRED_EVENTS if e not in self.enabled_events]
        if missing_required:
            raise SkippedError(f"trace event {missing_required[0]} is not available")
        self.formats = FormatSet.from_tracefs(root, [*self.enabled_events, MARKER_EVENT])
        self._page_size = self.formats.page_header.page_size
        sub = inst / "buffer_subbuf_size_kb"
        if sub.exists():
            with contextlib.suppress(OSError, ValueError):
                self._page_size = max(self._page_size, int(sub.read_text()) * 1024)

    def _open_pipes(self, inst: Path) -> None:
        for c in self.cpus:
            p = inst / "per_cpu" / f"cpu{c}" / "trace_pipe_raw"
            try:
                self._fds[c] = os.open(p, os.O_RDONLY | os.O_NONBLOCK)
            except OSError as exc:
                raise SkippedError(f"cannot open {p}: {exc.strerror}") from None

    def _drain_once(self) -> int:
        n = 0
        data_off = self.formats.page_header.data_offset if self.formats else 16

        for c, fd in self._fds.items():
            store = self._stores[c]
            while True:
                try:
                    page = os.read(fd, self._page_size)
                except BlockingIOError:
                    break
                except OSError as exc:
                    if exc.errno in (errno.EAGAIN, errno.EINTR):
                        break
                    raise
                if not page:
                    break
                info = page_info(page, self.formats.page_header) if self.formats else None
                keep = data_off + info.commit + 8 if info else len(page)
                with self._lock:
                    store.add(bytes(page[:keep]))
                n += 1
        return n

    def _reader(self) -> None:
        if self.reader_cpus:
            with contextlib.suppress(OSError):
                os.sched_setaffinity(0, self.reader_cpus)  # this thread only
        try:
            while not self._stop.is_set():
                self._drain_once()
                self._stop.wait(self.poll_interval_s)
        except BaseException as exc:  # reported by stop()
            self._reader_error = exc

    def stop(self) -> None:
        """Stop tracing, drain what is left and collect the per-CPU counters."""
        if self.instance is None or self.stopped_ns is not None:
            return
        with contextlib.suppress(RtlabError, OSError):
            self._write(self.instance / "tracing_on", "0")
        self.stopped_ns = time.monotonic_ns()
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=5)
        with contextlib.suppress(OSError):
            self._drain_once()
        self.final_stats = self.stats()
        if self._reader_error:
            raise RtlabError(f"trace reader failed: {self._reader_error}")

    def close(self) -> None:
        """Remove the instance (always safe to call twice) and unmount if we mounted."""
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        if self._thread and self._thread.is_alive():
            self._thread.join(timeout=5)
        for fd in self._fds.values():
            with contextlib.suppress(OSError):
                os.close(fd)
        self._fds.clear()
        if self.instance is not None:
            with contextlib.suppress(OSError, RtlabError):
                self._write(self.instance / "tracing_on", "0")
            for _ in range(50):
                try:
                    self.instance.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)  # EBUSY while the kernel releases readers
        if self.tfs is not None and self._owns_tfs:
            self.tfs.unmount_if_ours()
        self._remove_cleanup()

    # -- cleanup on exit and SIGTERM -------------------------------------------------

    def _install_cleanup(self) -> None:
        atexit.register(self.close)
        if threading.current_thread() is threading.main_thread():
            old = signal.getsignal(signal.SIGTERM)
            if old in (signal.SIG_DFL, None):
                self._old_sigterm = old

                def _on_term(signum: int, frame: FrameType | None) -> None:
                    raise SystemExit(128 + signum)  # unwinds through __exit__/finally

                signal.signal(signal.SIGTERM, _on_term)

    def _remove_cleanup(self) -> None:
        atexit.unregister(self.close)
        if self._old_sigterm is not None and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, self._old_sigterm)  # type: ignore[arg-type]
            self._old_sigterm = None

    # -- results -----------------------------------------------------------------

    def stats(self) -> dict[int, dict[str, int]]:
        """Kernel counters per CPU ('overrun', 'dropped_events', ...) plus host evictions."""
        out: dict[int, dict[str, int]] = {}
        if self.instance is None or not self.instance.exists():
            return dict(self.final_stats)
        for c in self.cpus:
            p = self.instance / "per_cpu" / f"cpu{c}" / "stats"
            try:
                st = parse_stats(p.read_text())
            except OSError:
                st = {}
            with self._lock:
                st["host_evicted_pages"] = self._stores[c].evicted
                st["pages_read"] = self._stores[c].read_pages
            out[c] = st
        return out

    def lost_events(self) -> dict[int, int]:
        """Events lost in the kernel buffer per CPU (overrun + dropped), the number to report."""
        st = self.final_stats or self.stats()
        return {c: s.get("overrun", 0) + s.get("dropped_events", 0) for c, s in st.items()}

    def capture(self) -> TraceCapture:
        """A snapshot of the pages held so far (safe while recording continues)."""
        if self.formats is None:
            raise RtlabError("Recorder was not started")
        with self._lock:
            pages = {c: list(s.pages) for c, s in self._stores.items()}
            evicted = {c: s.evicted for c, s in self._stores.items()}
        st = self.final_stats or self.stats()
        return TraceCapture(
            self.formats,
            pages,
            clock="mono",
            lost={
                c: {k: v for k, v in s.items() if k in ("overrun", "dropped_events")}
                for c, s in st.items()
            },
            evicted=evicted,
            meta={
                "enabled_events": self.enabled_events,
                "missing_events": self.missing_events,
                "buffer_kb": self.buffer_kb,
                "started_ns": self.started_ns,
                "stopped_ns": self.stopped_ns,
                "notes": self.notes,
            },
            symbols=LocalSymbols() if self.want_symbols else None,
        )
