# SPDX-License-Identifier: MIT
"""Is a boot parameter in effect? Read from the board's own files, not from hope.

`read_boot_files(transport)` takes one snapshot of what the checks read (through the
board's engine: `rtlab-probe sys snapshot`); `verify_boot(params, files)` says for each
parameter whether the running kernel applies it, from the state it exposes
(/sys/devices/system/cpu/isolated for isolcpus, ...), or from /proc/cmdline alone
where the kernel exposes nothing (then `source` is "cmdline" and the evidence says
so). `tasks_on(cpus, files)` lists the ordinary tasks that ran on isolated CPUs.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rtlab.cpulist import CpuListError, format_cpulist, parse_cpulist
from rtlab.tune.reboot import param_key, split_cmdline

if TYPE_CHECKING:
    from rtlab.engine.transport import Transport

CMDLINE = "/proc/cmdline"
CPU = "/sys/devices/system/cpu"
ISOLATED = f"{CPU}/isolated"
NOHZ_FULL = f"{CPU}/nohz_full"
SMT_CONTROL = f"{CPU}/smt/control"
IDLE_DRIVER = f"{CPU}/cpuidle/current_driver"
IDLE_GOVERNOR = f"{CPU}/cpuidle/current_governor_ro"
IDLE_GOVERNOR_RW = f"{CPU}/cpuidle/current_governor"
VULNERABILITIES = f"{CPU}/vulnerabilities"
DEFAULT_AFFINITY = "/proc/irq/default_smp_affinity"
WATCHDOG = "/proc/sys/kernel/watchdog"
REALTIME = "/sys/kernel/realtime"
CLOCKSOURCE = "/sys/devices/system/clocksource/clocksource0/current_clocksource"
MAX_CSTATE = {"processor.max_cstate": "/sys/module/processor/parameters/max_cstate",
              "intel_idle.max_cstate": "/sys/module/intel_idle/parameters/max_cstate"}
TASK_STAT = "/proc/[0-9]*/task/[0-9]*/stat"
TASK_STATUS = "/proc/[0-9]*/task/[0-9]*/status"

# Everything the checks read, in one snapshot.
BOOT_PATTERNS: tuple[str, ...] = (
    CMDLINE, ISOLATED, NOHZ_FULL, SMT_CONTROL, IDLE_DRIVER, IDLE_GOVERNOR, IDLE_GOVERNOR_RW,
    f"{VULNERABILITIES}/*", DEFAULT_AFFINITY, WATCHDOG, REALTIME, CLOCKSOURCE,
    *MAX_CSTATE.values(), TASK_STAT, TASK_STATUS,
)

PF_KTHREAD = 0x00200000  # task flags (/proc/PID/stat field 9): a kernel thread


class BootFiles:
    """Files of a target by absolute path (text, stripped of its final newline);
    a path that could not be read is absent (`errors` says why)."""

    def __init__(self, files: Mapping[str, str], errors: Mapping[str, str] | None = None
                 ) -> None:
        self.files = dict(files)
        self.errors = dict(errors or {})

    def get(self, path: str) -> str | None:
        text = self.files.get(path)
        return None if text is None else text.strip()

    def why_missing(self, path: str) -> str:
        return self.errors.get(path, "not readable")

    def under(self, prefix: str) -> dict[str, str]:
        return {p: t for p, t in self.files.items() if p.startswith(prefix)}


def read_boot_files(transport: Transport, patterns: Iterable[str] = BOOT_PATTERNS
                    ) -> BootFiles:
    """One snapshot of what the checks read, taken on the target by its engine."""
    from rtlab.engine.snapshot import record_bytes, snapshot

    files: dict[str, str] = {}
    errors: dict[str, str] = {}
    for rec in snapshot(transport, patterns):
        path = str(rec.get("path", ""))
        if rec.get("type") == "file":
            files[path] = record_bytes(rec).decode(errors="replace")
        elif rec.get("type") == "error":
            errors[path] = str(rec.get("error", "unreadable"))
    return BootFiles(files, errors)


@dataclass(frozen=True)
class BootCheck:
    """One boot parameter: whether the running kernel applies it (`in_effect` None: the
    files cannot tell), and the evidence read. `source`: "state" (the kernel's own
    state says so) or "cmdline" (only /proc/cmdline can be read for it)."""

    param: str
    value: str | None
    in_effect: bool | None
    evidence: str
    source: str = "state"

    def to_dict(self) -> dict[str, object]:
        return {"param": self.param, "value": self.value, "in_effect": self.in_effect,
                "evidence": self.evidence, "source": self.source}


def _cmdline_params(files: BootFiles) -> dict[str, str | None] | None:
    text = files.get(CMDLINE)
    if text is None:
        return None
    out: dict[str, str | None] = {}
    for w in split_cmdline(text):
        if w == "--":
            break
        key, sep, value = w.replace('"', "").partition("=")
        out[key.replace("-", "_")] = value if sep else None
    return out


def _cpus_of(value: str | None) -> list[int] | None:
    """The CPU list of a parameter value; flags ('nohz,domain,managed_irq,1-3') skipped;
    None when unreadable."""
    if value is None:
        return None
    items = [p for p in value.split(",") if p and not p[0].isalpha()]
    try:
        return parse_cpulist(",".join(items), strides=True)
    except CpuListError:
        return None


def _file_cpus(files: BootFiles, path: str) -> list[int] | None:
    text = files.get(path)
    if text is None:
        return None
    if text in ("", "(null)"):
        return []
    try:
        return parse_cpulist(text)
    except CpuListError:
        return None


def _mask_cpus(text: str) -> list[int] | None:
    """A kernel hex CPU mask ('00000003', 'ff,ffffffff') as a CPU list."""
    digits = text.replace(",", "").strip()
    try:
        mask = int(digits, 16)
    except ValueError:
        return None
    return [i for i in range(mask.bit_length()) if mask >> i & 1]


def _cpus_check(param: str, value: str | None, files: BootFiles, path: str,
                what: str) -> BootCheck:
    want = _cpus_of(value)
    if want is None:
        return BootCheck(param, value, None, f"cannot read a CPU list in {param}={value}")
    have = _file_cpus(files, path)
    if have is None:
        return BootCheck(param, value, False,
                         f"{path}: {files.why_missing(path)} (the kernel lacks {what}?)")
    shown = format_cpulist(have) or "none"
    missing = sorted(set(want) - set(have))
    if missing:
        return BootCheck(param, value, False,
                         f"{path} = {shown}: CPUs {format_cpulist(missing)} missing")
    return BootCheck(param, value, True, f"{path} = {shown}")


def _isolcpus(value: str | None, files: BootFiles) -> BootCheck:
    flags = [p for p in (value or "").split(",") if p and p[0].isalpha()]
    if flags and "domain" not in flags:
        return BootCheck("isolcpus", value, True,
                         f"on /proc/cmdline; {ISOLATED} shows domain isolation only, and "
                         f"these flags ({','.join(flags)}) ask none", "cmdline")
    return _cpus_check("isolcpus", value, files, ISOLATED, "CONFIG_CPU_ISOLATION")


def _nohz_full(value: str | None, files: BootFiles) -> BootCheck:
    return _cpus_check("nohz_full", value, files, NOHZ_FULL, "CONFIG_NO_HZ_FULL")


_RCUO = re.compile(r"rcuo[ps]/(\d+)")


def _comms(files: BootFiles) -> list[str]:
    out = []
    for path, text in files.under("/proc/").items():
        if path.endswith("/stat") and "(" in text:
            out.append(text[text.index("(") + 1:text.rindex(")")])
    return out


def _rcu_nocbs(value: str | None, files: BootFiles) -> BootCheck:
    want = _cpus_of(value) if value else None
    if not want:
        return BootCheck("rcu_nocbs", value, True,
                         "on /proc/cmdline; no CPU list to look for offload kthreads of",
                         "cmdline")
    seen = {int(m[1]) for c in _comms(files) if (m := _RCUO.fullmatch(c))}
    if not seen:
        return BootCheck("rcu_nocbs", value, None,
                         "on /proc/cmdline; no rcuop/rcuos kthread visible to confirm it",
                         "cmdline")
    missing = sorted(set(want) - seen)
    if missing:
        return BootCheck("rcu_nocbs", value, False,
                         f"no rcuop kthread for CPUs {format_cpulist(missing)} "
                         f"(offloaded: {format_cpulist(sorted(seen))})")
    return BootCheck("rcu_nocbs", value, True,
                     f"offload kthreads (rcuop/N) for CPUs {format_cpulist(sorted(seen))}")


def _irqaffinity(value: str | None, files: BootFiles) -> BootCheck:
    want = _cpus_of(value)
    text = files.get(DEFAULT_AFFINITY)
    have = None if text is None else _mask_cpus(text)
    if want is None:
        return BootCheck("irqaffinity", value, None,
                         f"cannot read a CPU list in irqaffinity={value}")
    if have is None:
        return BootCheck("irqaffinity", value, None,
                         f"{DEFAULT_AFFINITY}: {files.why_missing(DEFAULT_AFFINITY)}")
    ok = set(have) == set(want)
    return BootCheck("irqaffinity", value, ok,
                     f"{DEFAULT_AFFINITY} = {text} (CPUs {format_cpulist(have) or 'none'})")


def _idle(value: str | None, files: BootFiles) -> BootCheck:
    if value != "poll":
        return BootCheck("idle", value, True,
                         "on /proc/cmdline; the kernel exposes no state for it", "cmdline")
    driver = files.get(IDLE_DRIVER)
    governor = files.get(IDLE_GOVERNOR) or files.get(IDLE_GOVERNOR_RW)
    if driver is None:
        return BootCheck("idle", value, True,
                         f"on /proc/cmdline; {IDLE_DRIVER}: {files.why_missing(IDLE_DRIVER)} "
                         "(no cpuidle to check against)", "cmdline")
    if driver == "none":
        return BootCheck("idle", value, True,
                         f"cpuidle driver none (no idle state is entered; governor "
                         f"{governor or 'none'})")
    return BootCheck("idle", value, False, f"cpuidle driver {driver} is in use")


def _max_cstate(param: str) -> Callable[[str | None, BootFiles], BootCheck]:
    path = MAX_CSTATE[param]

    def check(value: str | None, files: BootFiles) -> BootCheck:
        have = files.get(path)
        if have is None:
            return BootCheck(param, value, None,
                             f"{path}: {files.why_missing(path)} (driver not in this kernel?)")
        return BootCheck(param, value, have == value, f"{path} = {have}")

    return check


def _nosmt(value: str | None, files: BootFiles) -> BootCheck:
    have = files.get(SMT_CONTROL)
    if have is None:
        return BootCheck("nosmt", value, None, f"{SMT_CONTROL}: {files.why_missing(SMT_CONTROL)}")
    if have in ("notsupported", "notimplemented"):
        return BootCheck("nosmt", value, None,
                         f"{SMT_CONTROL} = {have}: no SMT here, nothing to turn off")
    want = ("forceoff",) if value == "force" else ("off", "forceoff")
    return BootCheck("nosmt", value, have in want, f"{SMT_CONTROL} = {have}")


def _nowatchdog(value: str | None, files: BootFiles) -> BootCheck:
    have = files.get(WATCHDOG)
    if have is None:
        return BootCheck("nowatchdog", value, None, f"{WATCHDOG}: {files.why_missing(WATCHDOG)}")
    return BootCheck("nowatchdog", value, have == "0", f"{WATCHDOG} = {have}")


def _mitigations(value: str | None, files: BootFiles) -> BootCheck:
    states = {p.rsplit("/", 1)[1]: t.strip() for p, t in files.under(VULNERABILITIES).items()}
    if value != "off":
        return BootCheck("mitigations", value, True,
                         "on /proc/cmdline; the vulnerabilities files do not tell the mode",
                         "cmdline")
    if not states:
        return BootCheck("mitigations", value, None, f"{VULNERABILITIES}: nothing readable")
    on = sorted(k for k, t in states.items() if t.startswith("Mitigation"))
    if on:
        return BootCheck("mitigations", value, False, f"still mitigated: {', '.join(on)}")
    vulnerable = sorted(k for k, t in states.items() if t.startswith("Vulnerable"))
    if not vulnerable:
        return BootCheck("mitigations", value, None,
                         "every vulnerability file says 'Not affected': nothing to turn off")
    return BootCheck("mitigations", value, True,
                     f"no mitigation active; vulnerable: {', '.join(vulnerable)}")


def _threadirqs(value: str | None, files: BootFiles) -> BootCheck:
    rt = files.get(REALTIME) == "1"
    note = " (PREEMPT_RT threads every handler anyway)" if rt else ""
    return BootCheck("threadirqs", value, True, "on /proc/cmdline; no state to read" + note,
                     "cmdline")


def _tsc(value: str | None, files: BootFiles) -> BootCheck:
    src = files.get(CLOCKSOURCE)
    if value in ("reliable", "nowatchdog") and src is not None:
        return BootCheck("tsc", value, src == "tsc",
                         f"current clocksource {src} (the watchdog's state is not readable)")
    return BootCheck("tsc", value, True,
                     "on /proc/cmdline" + (f"; current clocksource {src}" if src else ""),
                     "cmdline")


_CHECKS: dict[str, Callable[[str | None, BootFiles], BootCheck]] = {
    "isolcpus": _isolcpus, "nohz_full": _nohz_full, "rcu_nocbs": _rcu_nocbs,
    "irqaffinity": _irqaffinity, "idle": _idle, "nosmt": _nosmt, "nowatchdog": _nowatchdog,
    "mitigations": _mitigations, "threadirqs": _threadirqs, "tsc": _tsc,
    "processor.max_cstate": _max_cstate("processor.max_cstate"),
    "intel_idle.max_cstate": _max_cstate("intel_idle.max_cstate"),
}


def verify_boot(params: Mapping[str, str | None], files: BootFiles) -> list[BootCheck]:
    """For each boot parameter (name -> value; None: a flag such as `nosmt`), whether
    the running kernel applies it. A parameter that is not on /proc/cmdline with that
    value is not in effect, whatever else the files say."""
    cmd = _cmdline_params(files)
    out: list[BootCheck] = []
    for name, value in params.items():
        key = param_key(name)
        if cmd is None:
            out.append(BootCheck(name, value, None,
                                 f"{CMDLINE}: {files.why_missing(CMDLINE)}", "cmdline"))
            continue
        if key not in cmd or cmd[key] != value:
            on = "absent" if key not in cmd else (
                f"{key}={cmd[key]}" if cmd[key] is not None else key)
            out.append(BootCheck(name, value, False, f"not on {CMDLINE} ({on})", "cmdline"))
            continue
        check = _CHECKS.get(key)
        if check is None:
            out.append(BootCheck(name, value, True,
                                 "on /proc/cmdline; rtlab reads no state for it", "cmdline"))
            continue
        out.append(check(value, files))
    return out


@dataclass(frozen=True)
class TaskOnCpu:
    """An ordinary task that ran on a CPU it was not pinned to alone."""

    pid: int  # the process
    tid: int
    comm: str
    cpu: int  # the CPU it last ran on (/proc/PID/stat field 39)
    allowed: str  # its Cpus_allowed_list

    def describe(self) -> str:
        return f"{self.comm} (pid {self.pid}, tid {self.tid}) on CPU {self.cpu}, " \
               f"allowed {self.allowed}"


def _allowed(status: str | None) -> list[int] | None:
    for line in (status or "").splitlines():
        if line.startswith("Cpus_allowed_list:"):
            try:
                return parse_cpulist(line.split(":", 1)[1])
            except CpuListError:
                return None
    return None


def tasks_on(cpus: Iterable[int], files: BootFiles) -> list[TaskOnCpu]:
    """Ordinary tasks (not kernel threads, not pinned to these CPUs alone) whose last
    CPU (/proc/PID/task/TID/stat field 39) is one of `cpus`: on isolated CPUs there
    should be none but the work placed there on purpose."""
    wanted = set(cpus)
    out: list[TaskOnCpu] = []
    for path, text in sorted(files.under("/proc/").items()):
        parts = path.split("/")
        if len(parts) != 6 or parts[3] != "task" or parts[5] != "stat":
            continue
        try:
            rpar = text.rindex(")")
            comm = text[text.index("(") + 1:rpar]
            f = text[rpar + 2:].split()  # f[0] is field 3; field N is f[N - 3]
            flags, cpu = int(f[6]), int(f[36])
        except (ValueError, IndexError):
            continue
        if flags & PF_KTHREAD or cpu not in wanted:
            continue
        allowed = _allowed(files.get(path[:-len("stat")] + "status"))
        if allowed is None or set(allowed) <= wanted:
            continue
        out.append(TaskOnCpu(int(parts[2]), int(parts[4]), comm, cpu,
                             format_cpulist(allowed)))
    return out
