# SPDX-License-Identifier: MIT
"""The hostile values of each kind of input, and how a command is called around one.

Values may name a case's hostile paths in braces ({FIFO}, {DEVFULL}, ...:
conftest.make_fixtures) and the seeded runs ({RUN}, {RUN2}, {UDP})."""

from __future__ import annotations

from dataclasses import dataclass

from tests.hostile.options import Option, by_class

BIG = "7" * (10 << 20)  # a 10-MB value: refused, and quoted short
BIGX = "x" * (10 << 20)

# kind -> (label, value) pairs; every one must be refused with exit 2
VALUES: dict[str, list[tuple[str, str]]] = {
    "cpus": [("negative", "-1"), ("negative-item", "1,-2"), ("empty", ""),
             ("empty-item", "0,,1"), ("trailing-comma", "1,"), ("reversed", "3-1"),
             ("huge-range", "0-99999999999"), ("overflow", "99999999999999999999"),
             ("newline", "0\n1"), ("10MB", BIG), ("invalid-utf8", "0\udcff")],
    "pids": [("negative", "-1"), ("zero", "0"), ("empty", ""), ("empty-item", "1,,2"),
             ("trailing-comma", "1,"), ("overflow", "99999999999999999999"),
             ("word", "init"), ("10MB", BIG), ("control", "1\x00")],
    "duration": [("negative", "-1s"), ("zero", "0s"), ("empty", ""), ("no-unit", "1"),
                 ("bad-unit", "1x"), ("overflow", "99999999999999999999h"),
                 ("nan", "nans"), ("10MB", BIGX), ("control", "1s\x00")],
    "priority": [("zero-fifo", "0"), ("negative", "-1"), ("too-high", "100"),
                 ("overflow", "99999999999999999999"), ("word", "x"), ("empty", ""),
                 ("10MB", BIG)],
    "number": [("negative", "-2"), ("overflow", "99999999999999999999"),
               ("negative-overflow", "-99999999999999999999"), ("word", "x"),
               ("empty", ""), ("10MB", BIG)],
    "size": [("negative", "-1"), ("word", "fast"), ("bad-unit", "1x"),
             ("overflow", "99999999999999999999"), ("too-large", "2G"), ("empty", ""),
             ("10MB", BIG), ("control", "1k\x00")],
    "choice": [("empty", ""), ("unknown", "nope"), ("control", "\x01"), ("10MB", BIGX)],
    "target": [("space", "a b"), ("option", "-oProxyCommand=touch pwned"),
               ("port-0", "x:0"), ("port-overflow", "x:99999"), ("empty", ""),
               ("shell", "h;id"), ("10MB", BIGX), ("control", "h\x00")],
    "address": [("empty", ""), ("port-overflow", "x:99999"), ("space", "a b:1"),
                ("10MB", BIGX), ("colon", ":")],
    "slo": [("empty", ""), ("truncated", "max <"), ("negative", "p99 < -1us"),
            ("bad-unit", "max < 1xs"), ("10MB", BIGX),
            ("impossible", "max > 50us and max < 10us")],
    "run": [("empty", ""), ("unknown", "nope"), ("control", "\x00"), ("10MB", BIGX)],
    "date": [("empty", ""), ("word", "someday"), ("month-13", "2026-13-45"),
             ("10MB", BIGX)],
    "assignment": [("empty", ""), ("no-key", "="), ("no-value", "x"), ("10MB", BIGX)],
    "store": [("empty", ""), ("devnull", "{DEVNULL}"), ("devfull", "{DEVFULL}"),
              ("directory", "{DIR}"), ("fifo", "{FIFO}"), ("empty-file", "{EMPTY}"),
              ("foreign-db", "{FOREIGN}"), ("memory", "sqlite://"),
              ("no-dir", "{NODIR}"), ("proc", "{PROC}"), ("loop", "{LOOP}"),
              ("10MB", BIGX)],
    "output": [("devnull", "{DEVNULL}"), ("devfull", "{DEVFULL}"), ("directory", "{DIR}"),
               ("dir-slash", "{DIRSLASH}"), ("fifo", "{FIFO}"), ("loop", "{LOOP}"),
               ("no-dir", "{NODIR}"), ("proc", "{PROC}"), ("empty", ""),
               ("10MB", BIGX)],
    "input": [("devnull", "{DEVNULL}"), ("devzero", "{DEVZERO}"), ("directory", "{DIR}"),
              ("fifo", "{FIFO}"), ("loop", "{LOOP}"), ("missing", "{MISSING}"),
              ("no-dir", "{NODIR}"), ("proc", "{PROC}"), ("empty-file", "{EMPTY}"),
              ("binary", "{BINARY}"), ("nested-toml", "{NESTED}"), ("huge", "{HUGE}"),
              ("10MB", BIGX)],
    "directory": [("devnull", "{DEVNULL}"), ("file", "{EMPTY}"), ("fifo", "{FIFO}"),
                  ("loop", "{LOOP}"), ("empty", ""), ("10MB", BIGX)],
    # free text (names, hosts, kernels): no value is wrong as such, but none may give a
    # traceback, a long echo or a change; exit 0 (nothing matched) or 2
    "name": [("control", "\x00\x01"), ("10MB", BIGX), ("invalid-utf8", "a\udcffb")],
}
NAME_CODES = (0, 2)

# how each command is called around the option under test: options (replaced by the one
# under test when it is the same) and positionals; every base is valid and quick (a run
# measures 1 s on CPU 0 without a shield if a bad value ever got through)
BASES: dict[tuple[str, ...], list[tuple[str, str | None]]] = {
    ("run",): [("--no-shield", None), ("--no-progress", None), ("--duration", "1s"),
               ("--cpus", "{CPU}"), ("--interval", "10ms")],
    ("results", "list"): [],
    ("results", "show"): [("RUN", "{RUN}")],
    ("results", "import"): [("--format", "cyclictest-json"), ("FILE", "{CYCLICTEST}")],
    ("results", "fetch"): [("--target", "nohost.invalid")],
    ("results", "push"): [("--to", "{OTHER}"), ("--dry-run", None)],
    ("results", "pull"): [("--from", "{OTHER}"), ("--dry-run", None)],
    ("export",): [("RUN", "{RUN}")],
    ("doctor",): [],
    ("shield",): [("--cpus", "1"), ("--journal-dir", "{JOURNAL}")],
    ("restore",): [("--journal-dir", "{JOURNAL}")],
    ("scenarios", "list"): [],
    ("scenarios", "show"): [("NAME", "quick")],
    ("scenarios", "check"): [("NAME", "quick")],
    ("report",): [("RUN", "{RUN}")],
    ("plot",): [("RUN", "{RUN}"), ("--output", "{HOME}/plot.png")],
    ("compare",): [("RUN", "{RUN}"), ("RUN", "{RUN2}")],
    ("history",): [("--host", "vm")],
    ("spikes",): [("RUN", "{RUN}")],
    ("board",): [("action", "info"), ("--target", "nohost.invalid")],
    ("monitor",): [("--quiet", None), ("--duration", "1s"), ("--cpus", "{CPU}"),
                   ("--interval", "10ms"), ("--state-dir", "{HOME}/state")],
    # --plan: everything checked, the plan printed, nothing measured or changed
    ("tune",): [("--plan", None), ("--dir", "{HOME}/tunes"), ("--budget", "10m"),
                ("--knobs", "stat-interval")],
}
# options that only mean something beside another: the other is added to the base
NEEDS: dict[str, list[tuple[str, str | None]]] = {
    "run --probe-opt": [("--probe", "timer")],
    "run --reflector-cpu": [("--probe", "udp"), ("--reflector", "nohost.invalid"),
                            ("--peer", "192.0.2.1:5000")],
    "run --reflector-thread-priority": [("--probe", "udp"), ("--reflector", "nohost.invalid"),
                                        ("--peer", "192.0.2.1:5000")],
    "run --reflector-irq": [("--probe", "udp"), ("--reflector", "nohost.invalid"),
                            ("--peer", "192.0.2.1:5000")],
    "run --reflector": [("--probe", "udp"), ("--peer", "192.0.2.1:5000")],
    "run --peer": [("--probe", "udp")],
    "run --trace-buffer-kb": [("--trace", None)],
    "run --trace-threshold": [("--trace", None)],
    "history --plot": [("--host", "vm"), ("--day", "2026-11-22")],
    "history --slot": [("--host", "vm"), ("--day", "2026-11-22")],
    "history --day": [("--host", "vm")],
    "shield --rt-runtime": [],
    "board --engine-dir": [],
}
# base options an option's NEEDS make wrong (the udp probe has no --interval)
DROPS: dict[str, set[str]] = {key: {"--interval"} for key, needs in NEEDS.items()
                              if ("--probe", "udp") in needs}
# (option key, kind) left out of the generated cases, with the reason
LEFT_OUT: dict[str, str] = {
    "run --engine-dir": "only used on a board (tests/lab)",
    "results fetch --engine-dir": "only used on a board (tests/lab)",
    "doctor --engine-dir": "only used on a board (tests/lab)",
    "shield --engine-dir": "only used on a board (tests/lab)",
    "restore --engine-dir": "only used on a board (tests/lab)",
    "board --engine-dir": "only used on a board (tests/lab)",
    "monitor --engine-dir": "only used on a board (tests/lab)",
    "tune --engine-dir": "only used on a board (tests/lab)",
}
# hostile-looking values that are valid input by design, with the reason (tested where
# their behaviour is: tests/results/test_store_hostile.py for stores)
_STORE_DIR = ("a directory means rtlab.db in it, and a store's missing directory is made "
              "when its first run is stored (docs/results.md)")
VALID: dict[str, str] = {
    **{f"{cmd} {opt}={label}": _STORE_DIR
       for cmd, opt in (("run", "--store"), ("monitor", "--store"), ("tune", "--store"),
                        ("results import", "--store"), ("results fetch", "--store"),
                        ("results pull", "--store"), ("results push", "--to"))
       for label in ("directory", "no-dir")},
    "results list --store=directory": "a store that does not exist lists no runs (exit 0)",
    "results list --store=no-dir": "a store that does not exist lists no runs (exit 0)",
}
# the commands that change the system: their cases hold the machine lock
SYSTEM = {("shield",), ("restore",)}
# values whose cases run in a child process bounded in memory and time (an endless or
# blocking read must not take this process with it)
SPAWNED = {"devzero", "fifo", "huge"}


@dataclass(frozen=True)
class Case:
    option: Option
    kind: str
    label: str
    value: str

    @property
    def id(self) -> str:
        return f"{self.option.key}={self.label}"

    def argv(self, values: dict[str, str]) -> list[str]:
        from tests.hostile.conftest import resolve

        o = self.option
        base = [(k, v) for k, v in BASES[o.command] if k not in DROPS.get(o.key, set())]
        base += NEEDS.get(o.key, [])
        names = set(o.action.option_strings) or {o.name}
        if o.positional:  # replace the first positional of that name
            idx = next((i for i, (k, _) in enumerate(base) if k == o.name), None)
            if idx is None:
                base.append((o.name, self.value))
            else:
                base[idx] = (o.name, self.value)
        else:
            base = [(k, v) for k, v in base if k not in names]
        argv = list(o.command)
        pos: list[str] = []
        for k, v in base:
            if k.startswith("-"):
                argv += [k] if v is None else [f"{k}={resolve(v, values)}"]
            else:
                pos.append(resolve(v or "", values))
        if not o.positional:
            argv.append(f"{o.name}={resolve(self.value, values)}" if o.action.nargs != 0
                        else f"{o.name}={self.value}")
        return argv + (["--", *pos] if pos else [])


def cases() -> list[Case]:
    from tests.hostile.options import classify, walk

    out = []
    for o in walk():
        kind = classify(o)
        if o.key in LEFT_OUT or kind is None:
            continue
        if kind == "flag":
            out.append(Case(o, kind, "value", "1"))
            continue
        for label, value in VALUES[kind]:
            case = Case(o, kind, label, value)
            if case.id not in VALID:
                out.append(case)
    return out


__all__ = ["BASES", "NAME_CODES", "SPAWNED", "SYSTEM", "VALID", "VALUES", "Case", "by_class",
           "cases"]
