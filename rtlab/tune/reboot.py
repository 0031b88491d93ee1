# SPDX-License-Identifier: MIT
"""The one reboot interface: boot a board once with another kernel command line, and
always bring its original command line back (docs/reboot.md).

The user gives a command (`rtlab tune --reboot-cmd CMD`). rtlab runs it on this host
as `sh -c CMD` with these variables in its environment:

- RTLAB_TARGET: the target as given (`--target`);
- RTLAB_CMDLINE: the whole kernel command line to boot;
- RTLAB_BOOT: "once" (boot RTLAB_CMDLINE one time: the next reboot, by anyone, boots
  the original again) or "original" (boot the original command line and cancel a
  pending one-shot; also used when the board hangs, so the command must be able to
  power-cycle it).

and RTLAB_PYTHON, rtlab's own interpreter (`"$RTLAB_PYTHON" -m
rtlab.engine.labgrid_reboot` power-cycles a labgrid place).

One-shot is what makes a `kill -9` of the host safe: whatever happens to rtlab, the
board's next reboot brings its original command line back.

`Rebooter` drives the command and watches the board through rtlab's own transport
(`open_target` and the engine's file snapshot): it waits for another boot (the boot
id of /proc/sys/kernel/random/boot_id changes), reads /proc/cmdline back and checks
it is the one asked. `compose` builds a command line from the original and the boot
knobs' parameters.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from rtlab.errors import RtlabError, UsageError
from rtlab.textfmt import shown

ENV_CMDLINE = "RTLAB_CMDLINE"
ENV_TARGET = "RTLAB_TARGET"
ENV_BOOT = "RTLAB_BOOT"
ENV_PYTHON = "RTLAB_PYTHON"
BOOT_ONCE = "once"
BOOT_ORIGINAL = "original"

DEFAULT_TIMEOUT_S = 600.0
POLL_S = 2.0
CMDLINE_PATH = "/proc/cmdline"
BOOT_ID_PATH = "/proc/sys/kernel/random/boot_id"
# Words a bootloader adds by itself (GRUB: the kernel image it loaded): never compared.
_BOOTLOADER_WORDS = ("BOOT_IMAGE=",)
_STDERR_KEEP = 16 * 1024


# ---------------------------------------------------------------- command lines
def split_cmdline(text: str) -> list[str]:
    """The words of a kernel command line as the kernel splits them: blanks separate
    words except inside double quotes (`a="x y"` is one word); words kept verbatim."""
    words: list[str] = []
    cur: list[str] = []
    quoted = False
    for ch in text:
        if ch == '"':
            quoted = not quoted
        if ch.isspace() and not quoted:
            if cur:
                words.append("".join(cur))
                cur = []
            continue
        cur.append(ch)
    if cur:
        words.append("".join(cur))
    return words


def param_key(word: str) -> str:
    """A word's parameter name ('isolcpus' of 'isolcpus=1', '"a=x y"' -> 'a'), with '-'
    read as '_' as the kernel compares parameter names."""
    key = word.replace('"', "").partition("=")[0]
    return key.replace("-", "_")


def _word(key: str, value: str | None) -> str:
    if not key or any(c.isspace() or c in '="' for c in key):
        raise UsageError(f"kernel parameter name {shown(key)}: expected a name without "
                         "blanks, '=' or quotes, e.g. isolcpus")
    if value is None:
        return key
    if '"' in value or "\n" in value:
        raise UsageError(f"kernel parameter {key}={shown(value)}: a value cannot hold "
                         "a double quote or a newline")
    return f'{key}="{value}"' if any(c.isspace() for c in value) or not value else \
        f"{key}={value}"


def compose(original: str, set: Mapping[str, str | None] | None = None,
            remove: Iterable[str] = ()) -> str:
    """The command line `original` with the parameters of `set` (name -> value, None for
    a flag such as `nosmt`) and without those named in `remove`. A parameter already
    there keeps its place and gets the new value (its later duplicates are dropped, as
    the kernel would let the last one win); a new one goes at the end of the kernel's
    part (before a `--`, whose words belong to init). Other words keep their order and
    quoting; blanks between words become single spaces."""
    params = dict(set or {})
    words = split_cmdline(original)
    try:
        cut = words.index("--")
    except ValueError:
        cut = len(words)
    kernel, init = words[:cut], words[cut:]
    wanted = {param_key(k): (k, v) for k, v in params.items()}
    for k, v in wanted.values():
        _word(k, v)  # refuse a bad name or value before anything is built
    gone = {param_key(k) for k in remove}
    clash = gone & wanted.keys()
    if clash:
        raise UsageError(f"kernel parameter {sorted(clash)[0]} is both set and removed")
    out: list[str] = []
    placed: list[str] = []
    for w in kernel:
        key = param_key(w)
        if key in gone or key in placed:
            continue
        if key in wanted:
            out.append(_word(*wanted[key]))
            placed.append(key)
            continue
        out.append(w)
    out += [_word(k, v) for key, (k, v) in wanted.items() if key not in placed]
    return " ".join(out + init)


def normalise(cmdline: str) -> tuple[str, ...]:
    """A command line as compared: its words, without the ones a bootloader adds."""
    return tuple(w for w in split_cmdline(cmdline) if not w.startswith(_BOOTLOADER_WORDS))


def describe_change(original: str, cmdline: str) -> str:
    """What `cmdline` changes in `original`, short: 'isolcpus=1 nohz_full=1 -quiet'
    (the whole line when nothing differs word by word)."""
    a, b = normalise(original), normalise(cmdline)
    added = [w for w in b if w not in a]
    dropped = [f"-{w}" for w in a if w not in b]
    return " ".join(added + dropped) or " ".join(b) or "(empty)"


# ---------------------------------------------------------------- results and events
@dataclass(frozen=True)
class BootResult:
    """One boot the reboot interface brought about (or found in place)."""

    cmdline: str  # /proc/cmdline read back after the boot
    boot_id: str
    rebooted: bool  # False: the board already ran that command line (restore)
    seconds: float  # from the command's start to the board answering again
    command_output: str = ""  # the reboot command's stdout (last lines)

    def to_dict(self) -> dict[str, object]:
        return {"cmdline": self.cmdline, "boot_id": self.boot_id, "rebooted": self.rebooted,
                "seconds": round(self.seconds, 3)}


@dataclass(frozen=True)
class RebootEvent:
    """Progress of a reboot, for a caller's display: `kind` is one of "command" (the
    reboot command starts), "down" (the board stopped answering), "up" (it answers
    with another boot id), "restore" (the original is booted after a failure)."""

    kind: str
    text: str
    elapsed_s: float


@dataclass
class _Probe:
    """What one look at the board found."""

    boot_id: str | None = None  # None: not reachable
    cmdline: str | None = None
    error: str | None = None


@dataclass
class _Wait:
    seen_down: bool = False
    last: _Probe = field(default_factory=_Probe)


Reader = Callable[[str], tuple[str, str]]


def _transport_reader(engine_dir: str | None) -> Reader:
    """The board's (boot_id, /proc/cmdline), read through rtlab's transport and the
    engine's file snapshot (a new connection each time: the board reboots between)."""
    from rtlab.engine.board import open_target
    from rtlab.engine.snapshot import record_bytes, snapshot

    def read(target: str) -> tuple[str, str]:
        with open_target(target, engine_dir) as transport:
            recs = snapshot(transport, [BOOT_ID_PATH, CMDLINE_PATH], timeout_s=60.0)
        got = {str(r.get("path")): record_bytes(r).decode(errors="replace").strip()
               for r in recs if r.get("type") == "file"}
        missing = [p for p in (BOOT_ID_PATH, CMDLINE_PATH) if not got.get(p)]
        if missing:
            raise RtlabError(f"cannot read {missing[0]} on {target}")
        return got[BOOT_ID_PATH], got[CMDLINE_PATH]

    return read


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else ""


class Rebooter:
    """Boots `target` with another kernel command line through the user's reboot
    `command`, and back (module docstring). `timeout_s`: how long a boot may take,
    from the command's start until the board answers again; `restore_timeout_s` the
    same for the original (default: `timeout_s`). `on_event(RebootEvent)`: progress.
    `original`: the original command line when the caller stored it before (a resumed
    tune); else it is read from the board before the first reboot."""

    def __init__(self, target: str, command: str, *, timeout_s: float = DEFAULT_TIMEOUT_S,
                 engine_dir: str | None = None,
                 on_event: Callable[[RebootEvent], None] | None = None,
                 restore_timeout_s: float | None = None, original: str | None = None,
                 poll_s: float = POLL_S, reader: Reader | None = None) -> None:
        if target in ("", "local"):
            raise UsageError("boot knobs need a board (--target): rebooting this machine "
                             "would end rtlab itself")
        if not command.strip():
            raise UsageError("--reboot-cmd is empty: give the command that boots the board "
                             "(docs/reboot.md)")
        if not timeout_s > 0 or (restore_timeout_s is not None and not restore_timeout_s > 0):
            raise UsageError("the reboot timeout must be more than 0 s")
        self.target = target
        self.command = command
        self.timeout_s = float(timeout_s)
        self.restore_timeout_s = float(restore_timeout_s or timeout_s)
        self.engine_dir = engine_dir
        self.on_event = on_event
        self.poll_s = poll_s
        self._read = reader or _transport_reader(engine_dir)
        self._original = original
        self._t0 = time.monotonic()

    # ------------------------------------------------------------ public
    def original(self) -> str:
        """The board's command line before any reboot (read once, then cached)."""
        if self._original is None:
            _, self._original = self._read(self.target)
        return self._original

    def current(self) -> tuple[str, str]:
        """The board's (boot id, /proc/cmdline) now."""
        return self._read(self.target)

    def boot(self, cmdline: str) -> BootResult:
        """Boot `cmdline` once (RTLAB_BOOT=once) and wait until the board runs it. When
        the board does not go down or come back in time, the original is booted
        through the command (RTLAB_BOOT=original) and waited for, and RtlabError says
        both; when another command line came back, RtlabError says which."""
        original = self.original()
        if not normalise(cmdline):
            raise UsageError("the kernel command line to boot is empty")
        change = describe_change(original, cmdline)
        before, _ = self.current()
        started = time.monotonic()
        output = self._run_command(BOOT_ONCE, cmdline, self.timeout_s, change)
        probe, seen_down = self._wait_new_boot(before, started, self.timeout_s)
        elapsed = time.monotonic() - started
        if probe is None:
            what = ("did not go down" if not seen_down else "did not come back")
            first = (f"the board {self.target} {what} within {self.timeout_s:g} s after "
                     f"booting {shown(change)}")
            raise self._recover(first, before)
        assert probe.boot_id is not None and probe.cmdline is not None
        if normalise(probe.cmdline) != normalise(cmdline):
            came = ("its original command line" if normalise(probe.cmdline)
                    == normalise(original) else
                    f"another command line ({shown(describe_change(cmdline, probe.cmdline))}"
                    " against the one asked)")
            err = RtlabError(
                f"the board {self.target} came back with {came} instead of booting "
                f"{shown(change)}",
                hint="the reboot command or the bootloader did not boot the command line "
                     "given in RTLAB_CMDLINE (or that boot failed and the one-shot fell back)"
                     "; see docs/reboot.md")
            if normalise(probe.cmdline) != normalise(original):
                raise self._recover(err.message, probe.boot_id)
            raise err
        return BootResult(probe.cmdline, probe.boot_id, True, elapsed, output)

    def restore(self) -> BootResult:
        """Boot the original command line (RTLAB_BOOT=original), unless the board runs
        it already. RtlabError when the board does not come back with it in time."""
        original = self.original()
        started = time.monotonic()
        with contextlib.suppress(RtlabError):
            boot_id, now = self.current()
            if normalise(now) == normalise(original):
                return BootResult(now, boot_id, False, 0.0)
        return self._boot_original(None, started)

    # ------------------------------------------------------------ internals
    def _event(self, kind: str, text: str) -> None:
        if self.on_event is not None:
            self.on_event(RebootEvent(kind, text, time.monotonic() - self._t0))

    def _run_command(self, boot: str, cmdline: str, timeout_s: float, change: str) -> str:
        env = {**os.environ, ENV_TARGET: self.target, ENV_CMDLINE: cmdline, ENV_BOOT: boot,
               ENV_PYTHON: sys.executable}  # rtlab's interpreter (labgrid_reboot)
        self._event("command", f"{self.target}: reboot command, {ENV_BOOT}={boot}"
                    + (f" ({change})" if boot == BOOT_ONCE else ""))
        try:
            # its own process group: a terminal's Ctrl-C reaches rtlab, which decides
            proc = subprocess.Popen(["sh", "-c", self.command], env=env,
                                    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, process_group=0)
        except OSError as exc:
            raise RtlabError(f"cannot run the reboot command: {exc.strerror or exc}") from exc
        try:
            out, err = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise RtlabError(
                f"the reboot command ({ENV_BOOT}={boot}) did not end within {timeout_s:g} s",
                hint="the command must return once the board reboots (docs/reboot.md)"
            ) from None
        text_out = out.decode(errors="replace")[-_STDERR_KEEP:]
        if proc.returncode != 0:
            why = _last_line(err.decode(errors="replace")[-_STDERR_KEEP:])
            code = (f"killed by signal {-proc.returncode}" if proc.returncode < 0
                    else f"exit {proc.returncode}")
            raise RtlabError(
                f"the reboot command failed ({ENV_BOOT}={boot}, {code})"
                + (f": {why}" if why else ""),
                hint=f"run it by hand with {ENV_BOOT}, {ENV_CMDLINE} and {ENV_TARGET} set "
                     "(docs/reboot.md)")
        return text_out

    def _probe(self) -> _Probe:
        try:
            boot_id, cmdline = self._read(self.target)
        except RtlabError as exc:
            return _Probe(error=exc.one_line())
        return _Probe(boot_id=boot_id, cmdline=cmdline)

    def _wait_new_boot(self, before: str | None, started: float, timeout_s: float,
                       want: str | None = None) -> tuple[_Probe | None, bool]:
        """Poll the board until it answers with a boot id other than `before` (and, with
        `want`, that command line); (probe, seen_down), probe None on timeout."""
        seen_down = False
        deadline = started + timeout_s
        while True:
            probe = self._probe()
            if probe.boot_id is None:
                if not seen_down:
                    self._event("down", f"{self.target}: not answering ({probe.error})")
                seen_down = True
            elif probe.boot_id != before and (
                    want is None or normalise(probe.cmdline or "") == normalise(want)):
                self._event("up", f"{self.target}: back after "
                            f"{time.monotonic() - started:.1f} s")
                return probe, seen_down
            if time.monotonic() >= deadline:
                return None, seen_down
            time.sleep(min(self.poll_s, max(0.0, deadline - time.monotonic())))

    def _boot_original(self, before: str | None, started: float) -> BootResult:
        original = self.original()
        if before is None:
            with contextlib.suppress(RtlabError):
                before, _ = self.current()
        output = self._run_command(BOOT_ORIGINAL, original, self.restore_timeout_s, "")
        probe, _ = self._wait_new_boot(before, started, self.restore_timeout_s, want=original)
        if probe is None:
            raise RtlabError(
                f"the board {self.target} did not come back with its original command line "
                f"within {self.restore_timeout_s:g} s",
                hint="power-cycle the board by hand: its next boot runs the original command "
                     "line when the reboot command's boot was one-shot (docs/reboot.md)")
        assert probe.boot_id is not None and probe.cmdline is not None
        return BootResult(probe.cmdline, probe.boot_id, True,
                          time.monotonic() - started, output)

    def _recover(self, first: str, before: str | None) -> RtlabError:
        """After a failed boot: boot the original, and one error that says both."""
        self._event("restore", f"{self.target}: {first}; booting the original command line")
        try:
            back = self._boot_original(before, time.monotonic())
        except RtlabError as exc:
            return RtlabError(f"{first}; booting the original command line through the "
                              f"reboot command failed too: {exc.message}",
                              hint=exc.hint)
        return RtlabError(f"{first}; booted the original command line through the reboot "
                          f"command (back after {back.seconds:.0f} s)",
                          hint="check the boot parameters on the board's console "
                               "(docs/reboot.md)")
