# SPDX-License-Identifier: MIT
"""Spike attribution from synthetic events: every part of the latency is accounted."""

from __future__ import annotations

import random
import struct
from pathlib import Path

from rtlab.trace.attribution import attribute_run, attribute_spike, summarize
from rtlab.trace.causes import Spike
from rtlab.trace.ringbuf import Event
from rtlab.trace.spike_sources import parse_spike_marker, read_samples

D = 10_000_000_000  # deadline
TID = 500
TIMER = 0xFFFF0001


def E(t: int, event: str, on_cpu: int = 0, /, **f: object) -> Event:
    return Event(D + t, 1, event, on_cpu, dict(f))


def sw(
    t: int, prev: int, nxt: int, pid: int | None = None, nprio: int = 120, ncomm: str = "x"
) -> Event:
    comm = {0: "swapper/1", TID: "probe"}
    return E(
        t,
        "sched_switch",
        prev if pid is None else pid,
        prev_pid=prev,
        prev_comm=comm.get(prev, "x"),
        prev_prio=120,
        prev_state=1,
        next_pid=nxt,
        next_comm=comm.get(nxt, ncomm),
        next_prio=nprio,
    )


def wake_path(t: int, pid_on_cpu: int) -> list[Event]:
    """Local timer -> probe's hrtimer -> waking/wakeup of the probe."""
    return [
        E(t, "local_timer_entry", pid_on_cpu, vector=236),
        E(t + 1_000, "hrtimer_expire_entry", pid_on_cpu, hrtimer=TIMER, function=1, now=D + t),
        E(t + 1_500, "sched_waking", pid_on_cpu, pid=TID, comm="probe", prio=1, target_cpu=1),
        E(t + 2_000, "sched_wakeup", pid_on_cpu, pid=TID, comm="probe", prio=1, target_cpu=1),
        E(t + 2_500, "hrtimer_expire_exit", pid_on_cpu, hrtimer=TIMER),
        E(t + 3_000, "local_timer_exit", pid_on_cpu, vector=236),
    ]


def test_higher_priority_task_held_the_cpu() -> None:
    hog = 777
    evs = [
        sw(-5_000_000, TID, 0),
        sw(-1_000_000, 0, hog, nprio=0, ncomm="hog"),
        *wake_path(0, hog),
        sw(2_000_000, hog, TID),
        E(2_004_000, "hrtimer_start", TID),
    ]
    c = attribute_spike(evs, Spike(1, D, D + 2_005_000, TID))
    tasks = c.by_kind("task")
    assert tasks[0].ident == hog and tasks[0].name == "hog" and tasks[0].prio == 0
    assert tasks[0].duration_ns == 2_000_000 - 3_000  # minus the timer interrupt
    assert c.top() == "task hog[777] rt99"
    assert c.unexplained_ns == 0 and c.accounted_ns == c.latency_ns
    assert c.timer_expire_ns == 1_000 and c.waking_ns == 1_500 and c.switch_in_ns == 2_000_000
    assert sum(x.duration_ns for x in c.components) == c.latency_ns
    assert c.summary().startswith("2.00 ms: task hog[777] rt99 2.00 ms")


def test_host_stall_while_idle_is_unexplained() -> None:
    evs = [sw(-500_000, TID, 0), *wake_path(1_800_000, 0), sw(1_804_000, 0, TID)]
    c = attribute_spike(evs, Spike(1, D, D + 1_810_000, TID), virtualized=True)
    assert c.unexplained_ns == 1_800_000
    assert c.top() == "unexplained"
    assert "1.80 ms unexplained (host/hypervisor)" in c.summary()


def test_irq_and_softirq_nested_exclusive_time() -> None:
    evs = [
        sw(-100_000, TID, 55),
        E(-50_000, "hrtimer_start", 55),
        E(10_000, "irq_handler_entry", 55, irq=11, name="virtio2"),
        E(22_000, "irq_handler_exit", 55, irq=11, ret=1),
        E(22_500, "softirq_entry", 55, vec=3),
        E(30_000, "irq_handler_entry", 55, irq=11, name="virtio2"),
        E(35_000, "irq_handler_exit", 55, irq=11, ret=1),
        E(90_000, "softirq_exit", 55, vec=3),
        *wake_path(90_000, 55),
        sw(95_000, 55, TID),
    ]
    c = attribute_spike(evs, Spike(1, D, D + 100_000, TID))
    irq = c.by_kind("irq")[0]
    net = c.by_kind("softirq")[0]
    assert (irq.ident, irq.name, irq.count, irq.duration_ns) == (11, "virtio2", 2, 17_000)
    assert (net.name, net.duration_ns) == ("NET_RX", 90_000 - 22_500 - 5_000)
    assert c.by_kind("task")[0].ident == 55
    assert sum(x.duration_ns for x in c.components) == c.latency_ns
    assert "softirq NET_RX" in c.summary()


def test_unseen_switch_out_of_idle_is_inferred_from_pids() -> None:
    # some kernels do not trace the switch out of idle: the next event's pid tells
    evs = [sw(-500_000, TID, 0), *wake_path(0, 0), E(4_000, "hrtimer_start", TID)]
    c = attribute_spike(evs, Spike(1, D, D + 3_900, TID))
    assert c.switch_in_ns == 3_000 and c.unexplained_ns == 0
    assert any("inferred" in n for n in c.notes)


def test_gap_inside_a_short_context_is_unexplained() -> None:
    evs = [
        sw(-500_000, TID, 0),
        E(1_000, "local_timer_entry", 0, vector=236),
        E(600_000, "local_timer_exit", 0, vector=236),
        sw(601_000, 0, TID),
    ]
    c = attribute_spike(evs, Spike(1, D, D + 602_000, TID), gap_ns=100_000)
    assert c.unexplained_ns == 1_000 + 599_000 + 1_000  # idle, gap, idle (nobody woken)
    assert c.by_kind("gap")[0].name == "in vector local_timer"


def test_no_trace() -> None:
    c = attribute_spike([], Spike(1, D, D + 1_000_000, TID))
    assert c.coverage == "none" and c.unexplained_ns == 1_000_000
    assert c.summary() == "1.00 ms: no trace for this window"
    assert c.to_dict()["coverage"] == "none"


def test_tid_inferred_from_last_switch() -> None:
    evs = [sw(-500_000, 42, 0), *wake_path(0, 0), sw(5_000, 0, 42)]
    c = attribute_spike(evs, Spike(1, D, D + 6_000))
    assert c.tid == 42 and c.switch_in_ns == 5_000


def test_marker_parsing() -> None:
    s = parse_spike_marker("rtlab spike cpu=1 lat=1840000 deadline=5000 tid=9", ts=0)
    assert s == Spike(1, 5000, 5000 + 1_840_000, 9, "marker")
    s = parse_spike_marker("rtlab spike cpu=2 lat=100 at=50", ts=0, start_monotonic_ns=1000)
    assert (s.cpu, s.deadline_ns, s.wake_ns) == (2, 1050, 1150)
    s = parse_spike_marker("rtlab spike cpu=0 lat=100", ts=9000)
    assert (s.deadline_ns, s.wake_ns) == (8900, 9000)
    assert parse_spike_marker("something else", ts=0) is None


def test_attribute_run_from_samples_file_and_markers(tmp_path: Path) -> None:
    hog = 777
    evs = [
        sw(-5_000_000, TID, 0),
        sw(-1_000_000, 0, hog, nprio=0, ncomm="hog"),
        *wake_path(0, hog),
        sw(2_000_000, hog, TID),
        E(2_010_000, "print", TID, ip=0, buf=f"rtlab spike cpu=1 lat=2005000 deadline={D}"),
    ]
    start = D - 1_000_000_000
    smp = tmp_path / "s.smp"
    recs = [(0, D - start, 2_005_000), (0, D - start + 1_000_000, 5_000)]
    smp.write_bytes(
        b"RTLABSMP"
        + struct.pack("<II", 1, 24)
        + b"".join(struct.pack("<IIQQ", c, 0, a, v) for c, a, v in recs)
    )
    assert read_samples(smp) == recs
    causes = attribute_run(
        {1: evs}, smp, start, threshold_ns=100_000, channel_cpus=[1], channel_tids=[TID]
    )
    assert len(causes) == 1 and causes[0].top().startswith("task hog[777]")
    from_markers = attribute_run({1: evs}, None, threshold_ns=100_000)
    assert len(from_markers) == 1 and from_markers[0].source == "marker"
    assert from_markers[0].tid == TID  # inferred
    assert summarize(causes)["top_causes"] == {"task hog[777] rt99": 1}


def _random_cpu(rng: random.Random, implicit: bool) -> list[Event]:
    """30 ms of one CPU's events, well nested: switches between idle, the probe and two
    hogs, interrupt bursts with hrtimer storms and softirqs, wake-ups, some long frames.
    With `implicit`, switches out of idle are not traced (as on some kernels)."""
    pids = [0, TID, 300, 301]
    comms = {0: "swapper/1", TID: "probe", 300: "hogA", 301: "hogB"}
    evs: list[Event] = []
    cur = 0
    t = -25_000_000
    while t < 5_000_000:
        t += rng.randint(2_000, 400_000)
        r = rng.random()
        if r < 0.3:
            nxt = rng.choice([p for p in pids if p != cur])
            if rng.random() < 0.5:  # announced first, as a real wake-up would be
                evs.append(
                    E(t, "sched_waking", cur, pid=nxt, comm=comms[nxt], prio=rng.randint(1, 120))
                )
                t += 500
            if not (implicit and cur == 0):
                evs.append(sw(t, cur, nxt, nprio=rng.randint(0, 120), ncomm=comms[nxt]))
            cur = nxt
        else:
            long = rng.random() < 0.05
            evs.append(E(t, "local_timer_entry", cur, vector=236))
            for i in range(rng.randint(0, 40)):
                t += rng.randint(100, 3_000)
                h = 0xA000 + i
                fn = rng.choice([1, 2, 3])
                evs.append(E(t, "hrtimer_expire_entry", cur, hrtimer=h, function=fn, now=D + t))
                if fn == 1 and rng.random() < 0.5:
                    evs.append(E(t + 50, "sched_waking", cur, pid=TID, comm="probe", prio=1))
                t += rng.randint(100, 2_000)
                evs.append(E(t, "hrtimer_expire_exit", cur, hrtimer=h))
            t += rng.randint(100, 1_500_000 if long else 5_000)
            evs.append(E(t, "local_timer_exit", cur, vector=236))
            if rng.random() < 0.3:
                t += 100
                evs.append(E(t, "softirq_entry", cur, vec=rng.choice([1, 3, 8, 9])))
                t += rng.randint(1_000, 200_000)
                evs.append(E(t, "softirq_exit", cur, vec=evs[-1].fields["vec"]))
    return evs


def _essence(c: object) -> tuple[object, ...]:
    d = c.to_dict()  # type: ignore[attr-defined]
    d.pop("notes")
    d.pop("summary")
    return tuple(sorted((k, repr(v)) for k, v in d.items()))


def test_replay_from_a_lead_equals_the_full_replay() -> None:
    """The backward scan's state (task, open frames) gives what replaying all of the window
    gives, on randomized busy CPUs: the speed-up changes no attribution."""
    rng = random.Random(20261124)
    compared = trimmed = 0
    for case in range(60):
        evs = _random_cpu(rng, implicit=case % 3 == 0)
        for _ in range(8):
            d = D + rng.randint(-3_000_000, 3_000_000)
            s = Spike(1, d, d + rng.randint(20_000, 3_000_000), TID if rng.random() < 0.7 else None)
            full = attribute_spike(evs, s, lead_ns=None, resolve=lambda a: f"fn{a}")
            fast = attribute_spike(evs, s, resolve=lambda a: f"fn{a}")
            assert _essence(fast) == _essence(full), (case, s)
            compared += 1
            trimmed += evs[0].ts < d - 2_000_000
    assert compared == 480 and trimmed > 400
