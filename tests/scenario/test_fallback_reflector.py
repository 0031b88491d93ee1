# SPDX-License-Identifier: MIT
"""A scenario's `fallback` key of a load and its `[reflector]` table: accepted as
documented (docs/scenarios.md), refused with file:line and what is allowed; every
shipped stress load may fall back, so every shipped scenario runs on a board."""

from __future__ import annotations

import pytest

from rtlab.errors import UsageError
from rtlab.scenario import builtins, load_file, parse_text

BASE = """\
[scenario]
name = "t"

[[load]]
name = "hog"
kind = "{kind}"
{extra}

[[probe]]
probe = "{probe}"
cpus = "last"

[[phase]]
name = "p"
duration = "1s"
loads = ["hog"]
"""


def _text(kind: str = "stress", extra: str = "cpu = 1", probe: str = "timer",
          tail: str = "") -> str:
    return BASE.format(kind=kind, extra=extra, probe=probe) + tail


def test_fallback_is_kept_on_the_load() -> None:
    (sc,) = parse_text(_text(extra='cpu = 1\nfallback = "builtin"'), online=[0, 1]).variants
    (ld,) = sc.loads
    assert ld.fallback == "builtin" and "fallback" not in ld.params
    assert ld.to_dict()["fallback"] == "builtin"


def test_without_fallback_the_load_must_have_its_tool() -> None:
    (sc,) = parse_text(_text(), online=[0, 1]).variants
    assert sc.loads[0].fallback is None and "fallback" not in sc.loads[0].to_dict()


@pytest.mark.parametrize(("kind", "extra", "message"), [
    ("stress", 'cpu = 1\nfallback = "none"', "load[0].fallback: 'none' is not a fallback; "
     "allowed: 'builtin'"),
    ("rt-competitor", 'fallback = "builtin"', "load[0].fallback: a load of kind "
     "'rt-competitor' has no fallback"),
])
def test_bad_fallback(kind: str, extra: str, message: str) -> None:
    with pytest.raises(UsageError) as e:
        parse_text(_text(kind, extra), "s.toml", online=[0, 1])
    assert e.value.message.startswith("s.toml:") and message in e.value.message


def test_every_shipped_stress_load_falls_back() -> None:
    for name, path in builtins().items():
        for sc in load_file(path, online=[0, 1]).variants:
            for ld in sc.loads:
                if ld.kind == "stress":
                    assert ld.fallback == "builtin", (name, ld.name)


REFLECTOR = """
[reflector]
target = "root@boardB"
address = "10.77.0.2:7400"
cpu = 1
thread_priorities = [{match = "irq/[0-9]+-eth1", policy = "fifo", priority = 99}]
irqs = [{match = "eth1", cpus = "0"}]
"""


def test_reflector_table() -> None:
    f = parse_text(_text(probe="udp", tail=REFLECTOR), online=[0, 1])
    r = f.reflector
    assert r is not None
    assert (r.target, r.address, r.cpu) == ("root@boardB", "10.77.0.2:7400", 1)
    assert r.thread_priorities == (("irq/[0-9]+-eth1", "fifo", 99),)
    assert r.irqs == (("eth1", "0"),)
    assert parse_text(_text(probe="udp"), online=[0, 1]).reflector is None


@pytest.mark.parametrize(("table", "message"), [
    ('[reflector]\naddress = "10.0.0.2:7400"\n', "reflector.target: missing"),
    ('[reflector]\ntarget = "b;rm -rf /"\n', "reflector.target:"),
    ('[reflector]\ntarget = "b"\naddress = "10.0.0.2"\n', "reflector.address:"),
    ('[reflector]\ntarget = "b"\ncpu = -1\n', "reflector.cpu: -1 is not allowed"),
    ('[reflector]\ntarget = "b"\nport = 1\n', "reflector.port: unknown key"),
    ('[reflector]\ntarget = "b"\nirqs = [{match = "eth1"}]\n', "reflector.irqs[0]: expected"),
    ('[reflector]\ntarget = "b"\nirqs = [{match = "eth1", cpus = "\u0663"}]\n',
     "reflector.irqs[0]: expected"),
    ('[reflector]\ntarget = "b"\nirqs = [{match = "(", cpus = "0"}]\n',
     "reflector.irqs[0].match: bad pattern"),
])
def test_bad_reflector_table(table: str, message: str) -> None:
    with pytest.raises(UsageError) as e:
        parse_text(_text(probe="udp", tail="\n" + table), "s.toml", online=[0, 1])
    assert e.value.message.startswith("s.toml:") and message in e.value.message, e.value.message
