# SPDX-License-Identifier: MIT
"""The files a user deploys from a tune's ledger (docs/tune.md, "Deploying the result"):
the recommended configuration as

- `cmdline.txt`: the kernel command line to boot (the original with the boot knobs'
  parameters; one already there takes the new value) and `cmdline-added.txt`: only the
  added parameters, one line without comments (written only when a boot knob is
  recommended);
- `tuned/rtlab-<tune>/tuned.conf`: a standalone tuned profile (sysctl, cpu, vm,
  scheduler, bootloader), with a comment for what tuned cannot express;
- `scenario.toml`: the tune's scenario with its `[shield]` replaced by the recommended
  one: `rtlab run scenario.toml` measures it, `rtlab shield --scenario scenario.toml`
  applies it;
- `sysctl.conf`: a sysctl.d snippet (e.g. /etc/sysctl.d/99-rtlab-tune.conf) of the
  sysctl-type settings, each with what it bought;
- `ledger.json` (the ledger, rtlab.tune.ledger.build) and `ledger.txt` (its terminal
  form).

Every text file starts with a comment naming the tune, its target and the dates
(`cmdline-added.txt` is one bare line by design; `ledger.json` names them as data).
Nothing is written outside the directory; a file there that is not this tune's own
export is never replaced; all files are written or none (rtlab.fileio).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import stat
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rtlab.cpulist import format_cpulist
from rtlab.errors import RtlabError, UsageError
from rtlab.fileio import check_directory, write_outputs
from rtlab.scenario.model import ShieldSpec
from rtlab.scenario.shield_toml import shield_toml
from rtlab.textfmt import shown
from rtlab.tune import knobs as catalogue
from rtlab.tune import ledger as ledger_mod
from rtlab.tune.design import StatResult
from rtlab.tune.reboot import compose, param_key, split_cmdline

CMDLINE = "cmdline.txt"
CMDLINE_ADDED = "cmdline-added.txt"
SCENARIO = "scenario.toml"
SYSCTL = "sysctl.conf"
LEDGER_JSON = "ledger.json"
LEDGER_TXT = "ledger.txt"
MAX_LEDGER_BYTES = 64 * 1024 * 1024  # a larger ledger.json is not one rtlab wrote
_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
_BOOTLOADER_WORDS = ("BOOT_IMAGE",)  # a bootloader adds these itself

# [shield] field -> sysctl (the settings a sysctl.d snippet can carry)
SYSCTL_FIELDS: dict[str, str] = {
    "sched_rt_runtime_us": "kernel.sched_rt_runtime_us",
    "timer_migration": "kernel.timer_migration",
    "watchdogs": "kernel.watchdog",
    "vm_stat_interval": "vm.stat_interval",
    "numa_balancing": "kernel.numa_balancing",
}


def tuned_dir(tune_id: str) -> str:
    """The tuned profile's directory inside the export directory."""
    return f"tuned/rtlab-{tune_id}"


# ---- words for comments ---------------------------------------------------------------------
def _flat(text: object) -> str:
    """One line of printable text (a name from outside cannot start a new line or a new
    section of the file it is put into)."""
    return "".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in str(text))


def _date(t: float | None) -> str:
    if t is None:
        return "unknown"
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M UTC")


def _head_prefix(tune_id: str) -> str:
    return f"# rtlab tune {tune_id},"


def bought(row: Mapping[str, Any] | None) -> str:
    """What a knob bought, as the ledger says it: its verdict against the baseline with
    each statistic's change, and the verdict on top of other knobs where it was tested
    there."""
    if row is None:
        return "not in the ledger"
    out = str(row.get("verdict"))
    stats = row.get("stats") or {}
    if stats:
        out += ": " + "; ".join(StatResult.from_dict(v).text() for v in stats.values())
    top = row.get("on_top")
    if top:
        out += f"; on top of {'+'.join(top['of'])}: {top['verdict']}"
    return _flat(out)


@dataclass(frozen=True)
class _Ctx:
    ledger: Mapping[str, Any]
    tune_id: str
    target: str
    header: str  # the first line of every text file
    knobs: list[str]  # the recommended knobs
    rows: dict[str, Mapping[str, Any]]
    user: list[int]
    system: list[int]
    shield: ShieldSpec | None  # the recommended shield (the scenario's + the knobs')
    params: dict[str, str | None]  # the boot knobs' kernel parameters

    def knob_of_field(self, field: str) -> str | None:
        """The recommended runtime knob that sets this [shield] field (None: the
        scenario's own shield does)."""
        for name in self.knobs:
            k = catalogue.BY_NAME[name]
            if k.kind == "runtime" and field in k.shield:
                return name
        return None

    def why_field(self, field: str) -> str:
        name = self.knob_of_field(field)
        if name is None:
            return "the scenario's own [shield] (part of the baseline)"
        return f"{name}: {bought(self.rows.get(name))}"

    def knob_of_param(self, param: str) -> str | None:
        for name in self.knobs:
            k = catalogue.BY_NAME[name]
            if k.kind == "boot" and param in k.boot:
                return name
        return None


# ---- cmdline.txt ----------------------------------------------------------------------------
def _param_word(k: str, v: str | None) -> str:
    return compose("", {k: v})


def added_params(params: Mapping[str, str | None]) -> str:
    """The added parameters as one command-line fragment ('' without any)."""
    return compose("", params) if params else ""


def _cmdline(c: _Ctx, original: str | None) -> tuple[str, str | None]:
    """cmdline.txt's text, and cmdline-added.txt's (None: no boot knob recommended)."""
    lines = [c.header]
    if original is not None and ("\n" in original.strip() or "\0" in original):
        raise UsageError("the original kernel command line holds a line break or a NUL: "
                         "not a command line", hint="give /proc/cmdline's one line")
    original = original.strip() if original is not None else None
    dropped = [w for w in split_cmdline(original or "") if param_key(w) in _BOOTLOADER_WORDS]
    if not c.params:
        lines.append("# No boot knob was recommended: the kernel command line stays as it is.")
        if original is not None:
            lines.append("# The line below is the original, unchanged.")
            lines.append(compose(original, remove=_BOOTLOADER_WORDS) if dropped else original)
        return "\n".join(lines) + "\n", None
    added = added_params(c.params)
    lines.append("# The kernel command line to boot: the original with the parameters of the")
    lines.append("# recommended boot knobs (a parameter already there takes the new value).")
    for k, v in c.params.items():
        name = c.knob_of_param(k)
        why = f"{name}: {bought(c.rows.get(name))}" if name else "recommended"
        lines.append(f"#   {_flat(_param_word(k, v))}  <- {why}")
    if original is None:
        lines.append("# The original command line is not known (the tune read none): add the")
        lines.append(f"# parameters of {CMDLINE_ADDED} to the board's own command line.")
    else:
        if dropped:
            lines.append(f"# {' '.join(_flat(w) for w in dropped)} left out: the bootloader "
                         "adds it itself.")
        lines.append(compose(original, c.params, remove=_BOOTLOADER_WORDS if dropped else ()))
    return "\n".join(lines) + "\n", added + "\n"


# ---- sysctl.conf ----------------------------------------------------------------------------
def _sysctl_value(v: Any) -> str:
    if isinstance(v, bool):
        return "1" if v else "0"
    return str(int(v))


def sysctl_settings(shield: ShieldSpec | None) -> dict[str, str]:
    """sysctl name -> value of the recommended shield's sysctl-type settings."""
    if shield is None:
        return {}
    out: dict[str, str] = {}
    for field, name in SYSCTL_FIELDS.items():
        v = getattr(shield, field)
        if v is not None:
            out[name] = _sysctl_value(v)
    return out


def _sysctl(c: _Ctx) -> str:
    lines = [c.header,
             "# A sysctl.d snippet: install as /etc/sysctl.d/99-rtlab-tune.conf (applied at",
             "# every boot; now: `sysctl --system`). Each setting says what it bought."]
    settings = sysctl_settings(c.shield)
    if not settings:
        lines.append("# No sysctl-type setting is in the recommended configuration.")
    by_name = {v: k for k, v in SYSCTL_FIELDS.items()}
    for name, value in settings.items():
        lines.append("")
        lines.append(f"# {c.why_field(by_name[name])}")
        lines.append(f"{name} = {value}")
    return "\n".join(lines) + "\n"


# ---- tuned.conf -----------------------------------------------------------------------------
def _tuned(c: _Ctx) -> str:
    s = c.shield
    lines = [c.header,
             "# A standalone tuned profile of the recommended configuration: copy its",
             f"# directory to /etc/tuned/, then `tuned-adm profile rtlab-{c.tune_id}`.",
             "# What tuned cannot express is named in comments: scenario.toml applies it",
             "# (`rtlab shield --scenario scenario.toml`)."]
    cannot: list[str] = []
    sections: list[tuple[str, list[str]]] = []
    summary = f"rtlab tune {c.tune_id}: {catalogue.label(c.knobs)} (target {c.target})"
    sections.append(("main", [f"summary={_flat(summary)}"]))
    sysctl: list[str] = []
    by_name = {v: k for k, v in SYSCTL_FIELDS.items()}
    for name, value in sysctl_settings(s).items():
        sysctl += [f"# {c.why_field(by_name[name])}", f"{name}={value}"]
    if sysctl:
        sections.append(("sysctl", sysctl))
    cpu: list[str] = []
    vm: list[str] = []
    sched: list[str] = []
    if s is not None:
        if s.governor is not None:
            cpu += [f"# {c.why_field('governor')}", f"governor={_flat(s.governor)}"]
        if s.dma_latency is not None:
            cpu += [f"# {c.why_field('dma_latency')}", f"force_latency={int(s.dma_latency)}"]
        if s.thp is not None:
            vm += [f"# {c.why_field('thp')}", f"transparent_hugepages={_flat(s.thp)}"]
        user = format_cpulist(s.user)
        if s.tasks or s.kthreads:
            field = "tasks" if c.knob_of_field("tasks") or not s.kthreads else "kthreads"
            sched += [f"# {c.why_field(field)}",
                      "# isolated_cores moves processes, threads and IRQs off these CPUs",
                      f"isolated_cores={user}",
                      "default_irq_smp_affinity="
                      + ("calc" if s.default_smp_affinity else "ignore")]
            if not s.irqs:
                cannot.append("tasks moved without the IRQs: tuned's isolated_cores moves "
                              "the IRQs too")
        elif s.irqs or s.default_smp_affinity:
            cannot.append(f"IRQ affinity away from CPUs {user} without moving tasks "
                          f"({c.why_field('irqs')})")
        if s.cpuset:
            cannot.append(f"the exclusive cpuset of CPUs {user} ({c.why_field('cpuset')})")
        if s.idle_max_latency_us is not None:
            cannot.append(f"idle states above {s.idle_max_latency_us} us disabled on CPUs "
                          f"{user} ({c.why_field('idle_max_latency_us')})")
        if s.min_freq is not None:
            cannot.append(f"minimum frequency {_flat(s.min_freq)} on CPUs {user} "
                          f"({c.why_field('min_freq')})")
        if s.smt is not None:
            cannot.append(f"SMT siblings of CPUs {user} {'online' if s.smt else 'offline'} "
                          f"({c.why_field('smt')})")
        for m, pol, pr in s.thread_priorities:
            cannot.append(f"threads matching {_flat(m)} at {pol} {pr} "
                          f"({c.why_field('thread_priorities')})")
    if cpu:
        sections.append(("cpu", cpu))
    if vm:
        sections.append(("vm", vm))
    if sched:
        sections.append(("scheduler", sched))
    if c.params:
        boot = [f"# {c.knob_of_param(k) or 'recommended'}: "
                f"{bought(c.rows.get(c.knob_of_param(k) or ''))}" for k in c.params]
        sections.append(("bootloader", [*dict.fromkeys(boot),
                                        f"cmdline={added_params(c.params)}"]))
    if cannot:
        lines.append("# Not expressed here (tuned has no equivalent):")
        lines += [f"#   - {_flat(x)}" for x in cannot]
    for name, body in sections:
        lines += ["", f"[{name}]", *body]
    return "\n".join(lines) + "\n"


# ---- scenario.toml --------------------------------------------------------------------------
_HEADER_RX = re.compile(r"^\s*\[\[?\s*([A-Za-z0-9_.\-\"' ]+?)\s*\]\]?\s*(#.*)?$")


def _table_name(name: str) -> str:
    return name.replace('"', "").replace("'", "").replace(" ", "")


def _drops(name: str, tables: Sequence[str]) -> bool:
    n = _table_name(name)
    return n in tables or n.startswith(tuple(f"{t}." for t in tables))


def _strip_tables(text: str, tables: Sequence[str], table: str | None = None) -> list[str]:
    """The lines of `text` without the tables named (and their sub-tables); `table`
    (TOML text) put where the first [shield] was."""
    out: list[str] = []
    placed = False
    dropping = False
    inside: str | None = None  # the delimiter of a multi-line string the line is in
    for line in text.splitlines():
        m = _HEADER_RX.match(line) if inside is None else None
        inside = _string_state(line, inside)
        if m:
            dropping = _drops(m.group(1), tables)
            if dropping and _table_name(m.group(1)) == "shield" and table and not placed:
                out += [table.rstrip("\n"), ""]
                placed = True
        if not dropping:
            out.append(line)
    if table and not placed:
        out += ["", table.rstrip("\n")]
    return out


def _string_state(line: str, inside: str | None) -> str | None:
    """Whether a multi-line string is open after `line` (its delimiter), given whether
    one was before it."""
    i, n = 0, len(line)
    while i < n:
        if inside is not None:
            j = line.find(inside, i)
            while inside == '"""' and j > 0 and _escaped(line, j):
                j = line.find(inside, j + 1)
            if j < 0:
                return inside
            i, inside = j + 3, None
            continue
        ch = line[i]
        if ch == "#":
            return None
        if line.startswith(('"""', "'''"), i):
            inside, i = line[i:i + 3], i + 3
            continue
        if ch in "\"'":
            j = i + 1
            while j < n and (line[j] != ch or (ch == '"' and _escaped(line, j))):
                j += 1
            i = j + 1
            continue
        i += 1
    return inside


def _escaped(line: str, j: int) -> bool:
    k = j
    while k > 0 and line[k - 1] == "\\":
        k -= 1
    return (j - k) % 2 == 1


def replace_shield(text: str, table: str | None, source: str) -> str:
    """`text` (a scenario) with its [shield] (and [matrix]) tables replaced by `table`
    (None: no shield). The result is checked: every other table reads back exactly as
    in the original, the shield as `table`."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"the tune's scenario {shown(source)} is not valid TOML: {exc}") \
            from None
    out = _strip_tables(text, ("shield", "matrix"), table)
    if "matrix" in doc:
        out.insert(0, "# The original's [matrix] is left out: this is one configuration.")
    new = "\n".join(out) + "\n"
    try:
        back = tomllib.loads(new)
    except tomllib.TOMLDecodeError:
        back = None
    want = {k: v for k, v in doc.items() if k not in ("shield", "matrix")}
    if table:
        want["shield"] = tomllib.loads(table)["shield"]
    if back != want:
        raise RtlabError(f"cannot replace the [shield] of the tune's scenario {shown(source)}"
                         " in its text (a shield given as dotted keys or inside a multi-line "
                         "string?)", hint="write the scenario's [shield] as a table of its own")
    return new


def _scenario_base(state: Mapping[str, Any], scenario_text: str | None
                   ) -> tuple[str | None, str, str | None]:
    """The tune's scenario text, its name, and why there is no text (None: there is):
    the text given, else the state's, else the file or built-in scenario the tune was
    given (`scenario_ref`), else the built-in one its name names."""
    name = str(state.get("scenario") or "scenario")
    if scenario_text is None and isinstance(state.get("scenario_text"), str):
        scenario_text = state["scenario_text"]
    if scenario_text is not None:
        return scenario_text, name, None
    from rtlab.scenario.builtin import builtins, find
    from rtlab.scenario.loader import read_scenario_text

    ref = state.get("scenario_ref")
    if isinstance(ref, str) and ref:
        try:
            return read_scenario_text(find(ref)), name, None
        except RtlabError as exc:
            return None, name, f"the tune's scenario cannot be read now: {exc.one_line()}"
    path = builtins().get(name)
    if path is not None:
        return read_scenario_text(path), name, None
    return None, name, "the tune's scenario text is not known"


def _online(state: Mapping[str, Any], online: Sequence[int] | None) -> list[int]:
    if online is not None:
        return sorted(online)
    if state.get("online_cpus"):
        return sorted(int(x) for x in state["online_cpus"])
    cpus = [int(x) for x in (state.get("user_cpus") or []) + (state.get("system_cpus") or [])]
    return list(range(max(cpus) + 1)) if cpus else [0]


def recommended_shield(state: Mapping[str, Any], knobs: Sequence[str],
                       scenario_text: str | None, online: Sequence[int]) -> ShieldSpec | None:
    """The scenario's shield with the recommended runtime knobs' fields set."""
    from rtlab.scenario.loader import parse_text

    base = None
    has_matrix = False
    if scenario_text is not None:
        source = f"the scenario of tune {state.get('id')}"
        with contextlib.suppress(tomllib.TOMLDecodeError):  # (parse_text says what is wrong)
            has_matrix = "matrix" in tomllib.loads(scenario_text)
        if has_matrix:  # its own [shield], not a variant's
            scenario_text = "\n".join(_strip_tables(scenario_text, ("matrix",))) + "\n"
        base = parse_text(scenario_text, source, online).variants[0].shield
    user = [int(x) for x in state.get("user_cpus") or []]
    system = [int(x) for x in state.get("system_cpus") or []]
    return catalogue.runtime_shield(base, knobs, user, system)


def _scenario(c: _Ctx, text: str | None, name: str, why: str | None) -> str:
    table = shield_toml(c.shield) if c.shield is not None else None
    head = [c.header,
            f"# The scenario the tune measured ({_flat(name)}) with the recommended [shield]:",
            f"#   rtlab run {SCENARIO}              measures it",
            f"#   rtlab shield --scenario {SCENARIO}  applies the shield until --reset"]
    if c.shield is None:
        head.append("# The recommended configuration has no shield: nothing to apply.")
    else:
        for k in c.knobs:
            if catalogue.BY_NAME[k].kind == "runtime":
                head.append(f"#   {k}: {bought(c.rows.get(k))}")
    if c.params:
        head.append(f"# The boot knobs are not part of a scenario: boot {CMDLINE}.")
    if text is None:
        body = f"[scenario]\nname = {json.dumps(_scenario_name(c.tune_id))}\n"
        head.append(f"# {_flat(why or 'no scenario text')}: this file holds the shield "
                    "alone (`rtlab run` measures the default probe with it).")
        if table:
            body += "\n" + table
        return "\n".join(head) + "\n" + body
    return "\n".join(head) + "\n" + replace_shield(text, table, name)


def _scenario_name(tune_id: str) -> str:
    return f"rtlab-{tune_id}"[:64]


# ---- writing --------------------------------------------------------------------------------
def _owned(path: Path, tune_id: str, cmdline_owned: bool, data: str) -> bool:
    """Whether an existing file is this tune's own export (or already what would be
    written)."""
    try:
        with open(path, "rb") as f:
            head = f.read(64 * 1024)
    except OSError:
        return False
    if head == data.encode("utf-8"):
        return True
    if path.name == LEDGER_JSON:
        try:
            if path.stat().st_size > MAX_LEDGER_BYTES:
                return False
            return json.loads(path.read_bytes()).get("tune") == tune_id
        except (OSError, ValueError, AttributeError):
            return False
    if path.name == CMDLINE_ADDED:
        return cmdline_owned
    first = head.split(b"\n", 1)[0].decode("utf-8", "replace")
    return first.startswith(_head_prefix(tune_id))


def _refuse_links(directory: Path, rels: Sequence[str]) -> None:
    for rel in rels:
        p = directory
        for part in Path(rel).parts:
            p = p / part
            try:
                st = os.lstat(p)
            except FileNotFoundError:
                break
            except OSError as exc:
                raise UsageError(f"export directory: {shown(str(p))}: "
                                 f"{exc.strerror or exc}") from None
            if stat.S_ISLNK(st.st_mode):
                raise UsageError(f"export directory: {shown(str(p))} is a symbolic link: "
                                 "rtlab writes only inside the directory",
                                 hint="give another directory, or remove the link")


def _make_dirs(paths: Sequence[Path]) -> list[Path]:
    made: list[Path] = []
    try:
        for p in paths:
            missing = []
            q = p
            while not q.exists():
                missing.append(q)
                q = q.parent
            for d in reversed(missing):
                d.mkdir()
                made.append(d)
    except OSError as exc:
        _remove_dirs(made)
        raise UsageError(f"cannot create the export directory {shown(str(exc.filename))}: "
                         f"{exc.strerror or exc}", hint="give a directory you may write into"
                         ) from None
    return made


def _remove_dirs(made: Sequence[Path]) -> None:
    for d in reversed(made):
        with contextlib.suppress(OSError):
            d.rmdir()


def write_exports(ledger: dict[str, Any], state: dict[str, Any], scenario_text: str | None,
                  original_cmdline: str | None, directory: Path, *,
                  online: Sequence[int] | None = None) -> list[Path]:
    """Write the recommended configuration's files into `directory` (made if missing);
    returns the files written. `scenario_text`: the tune's scenario file (None: the
    state's `scenario_text`, else the file or built-in scenario it names, else a
    scenario of the shield alone);
    `original_cmdline`: the target's /proc/cmdline (None: unknown); `online`: the
    target's online CPUs (to read the scenario's CPU words as the tune did; default:
    the state's, else CPUs 0 to the highest CPU of the tune).

    UsageError (one line, nothing written) for a directory that cannot be written, a
    file there that is not this tune's own export, or a tune id that cannot name a
    file."""
    tune_id = str(ledger.get("tune") or "")
    if not _ID_RE.fullmatch(tune_id) or ".." in tune_id:
        raise UsageError(f"tune id {shown(tune_id)} cannot name a tuned profile",
                         hint="letters, digits, '.', '_' and '-'")
    if state.get("id") not in (None, tune_id):
        raise UsageError(f"the ledger is of tune {shown(tune_id)}, the state of "
                         f"{shown(state.get('id'))}")
    directory = check_directory(directory, "export directory")
    knobs = [str(k) for k in (ledger.get("recommended") or {}).get("knobs") or []]
    unknown = [k for k in knobs if k not in catalogue.BY_NAME]
    if unknown:
        raise UsageError(f"the ledger recommends knob {shown(unknown[0])}, which this rtlab "
                         "does not know", hint="export it with the rtlab that tuned")
    text, scen_name, no_text = _scenario_base(state, scenario_text)
    cpus = _online(state, online)
    target = _flat(ledger.get("target") or "this machine")
    header = (f"{_head_prefix(tune_id)} target {target}, tuned "
              f"{_date(state.get('created'))}, exported {_date(datetime.now(UTC).timestamp())}")
    user = [int(x) for x in state.get("user_cpus") or []]
    system = [int(x) for x in state.get("system_cpus") or []]
    params = dict((ledger.get("recommended") or {}).get("kernel_parameters") or
                  catalogue.boot_params(knobs, user, system))
    c = _Ctx(ledger, tune_id, target, header, knobs,
             {r["knob"]: r for r in ledger.get("knobs") or []}, user, system,
             recommended_shield(state, knobs, text, cpus), params)
    cmd, added = _cmdline(c, original_cmdline)
    files: list[tuple[str, str]] = [
        (CMDLINE, cmd),
        *([(CMDLINE_ADDED, added)] if added is not None else []),
        (f"{tuned_dir(tune_id)}/tuned.conf", _tuned(c)),
        (SCENARIO, _scenario(c, text, scen_name, no_text)),
        (SYSCTL, _sysctl(c)),
        (LEDGER_JSON, json.dumps(ledger, indent=1, ensure_ascii=False, default=str) + "\n"),
        (LEDGER_TXT, "\n".join([header, *ledger_mod.text(ledger)]) + "\n"),
    ]
    rels = [rel for rel, _ in files] + ([CMDLINE_ADDED] if added is None else [])
    _refuse_links(directory, rels)
    cmd_path = directory / CMDLINE
    cmdline_owned = cmd_path.is_file() and _owned(cmd_path, tune_id, False, cmd)
    for rel, data in files:
        p = directory / rel
        if os.path.lexists(p) and not _owned(p, tune_id, cmdline_owned, data):
            raise UsageError(f"export directory {shown(str(directory))}: {rel} exists and is "
                             f"not an export of tune {tune_id}",
                             hint="give another directory, or move the file away")
    stale = directory / CMDLINE_ADDED
    remove_stale = added is None and os.path.lexists(stale)
    if remove_stale and not _owned(stale, tune_id, cmdline_owned, ""):
        remove_stale = False  # someone else's file: left alone
    made = _make_dirs([directory, directory / tuned_dir(tune_id)])
    try:
        written = write_outputs([(directory / rel, data, "export file") for rel, data in files])
    except BaseException:
        _remove_dirs(made)
        raise
    if remove_stale:
        with contextlib.suppress(OSError):
            stale.unlink()
    return [p for p in written if p is not None]
