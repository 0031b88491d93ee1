# SPDX-License-Identifier: MIT
"""A past day, OSADL-style (`rtlab history --host H --day DATE`): slot maxima over 24 hours
per CPU from stored runs' window maxima, gaps shown as gaps, a run across midnight split,
the day's plot."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime
from pathlib import Path

import numpy as np
import pytest

from rtlab.analysis.calibrate import run_from_samples
from rtlab.analysis.day import board_day
from rtlab.cli import main
from rtlab.probes.registry import shape as probe_shape
from rtlab.results.store import Store

DAY = date(2026, 11, 20)
T0 = datetime(2026, 11, 20, tzinfo=UTC).timestamp()


def run_at(run_id: str, start_s: float, seconds: int, spikes: dict[int, int]):  # type: ignore[no-untyped-def]
    """A 1-kHz run starting at unix time start_s, 10 µs everywhere but `spikes` (second
    of the run -> ns)."""
    x = np.full(seconds * 1000, 10_000, dtype=np.int64)
    for sec, v in spikes.items():
        x[sec * 1000 + 500] = v
    r = run_from_samples(run_id, x, "6.1.0-rt", probe="timer")  # `history`'s default probe
    r.provenance["engine"]["start_realtime_ns"] = int(start_s * 1e9)
    r.provenance["engine"]["system"]["hostname"] = "board7"
    r.provenance["host"]["start_wall"] = datetime.fromtimestamp(start_s, UTC).isoformat()
    return r


@pytest.fixture
def runs():  # type: ignore[no-untyped-def]
    return [
        # 00:30-01:00, a 500 µs spike at 00:37:10 (slot 7)
        run_at("aaaa0001", T0 + 1800, 1800, {430: 500_000}),
        # 10:00-10:10, a 90 µs spike at 10:04:59 (slot 120)
        run_at("aaaa0002", T0 + 36000, 600, {299: 90_000}),
        # the day before 23:55 to 00:05: a spike before midnight (not this day) and one after
        run_at("aaaa0003", T0 - 300, 600, {100: 900_000, 400: 70_000}),
    ]


def test_slot_maxima_and_gaps(runs) -> None:  # type: ignore[no-untyped-def]
    bd = board_day("board7", DAY, runs, 300, shape_of=probe_shape)
    (cd,) = bd.cpus
    assert bd.slots == 288 and len(bd.runs) == 3
    assert cd.slot_max[7] == 500_000
    assert cd.slot_max[120] == 90_000
    assert cd.slot_max[0] == 70_000  # 00:01:40 after midnight; 900 µs was the day before
    assert cd.max_ns == 500_000
    covered = {int(k) for k in np.nonzero(cd.slot_max >= 0)[0]}
    assert covered == {0, *range(6, 12), *range(120, 122)}
    assert cd.slot_max[50] == -1  # not measured is not zero latency
    assert int(cd.slot_samples[7]) == 300 * 1000


def test_history_day_cli(runs, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    db = tmp_path / "s.db"
    s = Store.open(str(db))
    for r in runs:
        s.add(r, probe_shape)
    s.close()
    plot = tmp_path / "day.png"
    code = main(["history", "--host", "board7", "--day", DAY.isoformat(), "--store", str(db),
                 "--json", "--plot", str(plot)])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    (cpu,) = out["cpus"]
    assert cpu["slot_max_ns"][7] == 500_000 and cpu["slot_max_ns"][50] is None
    assert plot.stat().st_size > 10_000
    code = main(["history", "--host", "board7", "--day", DAY.isoformat(), "--store", str(db)])
    text = capsys.readouterr().out
    assert code == 0 and "00:00" in text and "500*" in text and "   - │" in text
    assert "day max 500 µs in the slot from 00:35" in text


@pytest.mark.parametrize(("argv", "words"), [
    (["--day", "2026-13-01"], "is not a date"),
    (["--day", "today", "--slot", "7m"], "neither divides an hour"),
    (["--plot", "x.png"], "--plot needs --day"),
    (["--day", "today", "--plot", "x.pdf"], ".png or .svg"),
    (["--days", "7"], "--days needs --day"),
    (["--day", "today", "--days", "0"], "from 1 to 366"),
    (["--day", "today", "--days", "367"], "from 1 to 366"),
])
def test_day_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str],
                       words: str) -> None:
    db = tmp_path / "s.db"
    Store.open(str(db)).close()
    code = main(["history", "--host", "board7", "--store", str(db), *argv])
    assert code == 2
    assert words in capsys.readouterr().err


def _stored(runs, tmp_path: Path) -> Path:  # type: ignore[no-untyped-def]
    db = tmp_path / "s.db"
    s = Store.open(str(db))
    for r in runs:
        s.add(r, probe_shape)
    s.close()
    return db


def _rows(text: str) -> dict[str, list[str]]:
    """The day table's rows: first cell (the row's start) -> the other cells."""
    out = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip("│┃ ").split("│")]
        if len(cells) > 1 and len(cells[0]) == 5 and cells[0][2] == ":":
            out[cells[0]] = cells[1:]
    return out


def test_day_table_rows_are_hours_whatever_the_slot(runs, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """Each row holds the slots of its own hour (30-s slots), or with slots of whole hours
    is one slot, labelled with its start: the 90 µs spike at 10:04:59 is in the row from
    10:00 with 2-h slots, not in row 5 (slot 5 as if it were hour 5)."""
    db = _stored(runs, tmp_path)
    code = main(["history", "--host", "board7", "--day", DAY.isoformat(), "--store", str(db),
                 "--slot", "2h"])
    text = capsys.readouterr().out
    assert code == 0
    rows = _rows(text)
    assert list(rows) == [f"{h:02d}:00" for h in range(0, 24, 2)]
    assert rows["10:00"] == ["90.0"] and rows["00:00"] == ["500"]
    assert rows["04:00"] == ["-"] and rows["22:00"] == ["-"]
    assert "maximum latency per 2h slot" in text and "slot from" in text
    code = main(["history", "--host", "board7", "--day", DAY.isoformat(), "--store", str(db),
                 "--slot", "30s"])
    text = capsys.readouterr().out
    assert code == 0
    rows = _rows(text)
    assert list(rows) == [f"{h:02d}:00" for h in range(24)]
    assert rows["00:00"] == ["500*"] and rows["10:00"] == ["90.0*"] and rows["11:00"] == ["-"]
    assert "day max 500 µs in the slot from 00:37:00" in text


def test_day_plot_labels_the_slot(runs) -> None:  # type: ignore[no-untyped-def]
    from rtlab.report.plots import day_figure

    for slot_s, word in ((30, "30s"), (300, "5m"), (7200, "2h")):
        top = day_figure(board_day("board7", DAY, runs, slot_s, shape_of=probe_shape)).axes[0]
        assert top.get_ylabel() == f"max per {word} slot, µs"
        assert f"maximum latency per {word} slot" in top.get_title()


@pytest.mark.parametrize("slot", ["45m", "90m", "7m", "1500ms", "5h", "0.5s", "-1m", "1"])
def test_day_slot_must_fit_the_hourly_table(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                             slot: str) -> None:
    """A slot that straddles hours (45m, 90m) or does not divide a day is a one-line
    usage error, exit 2."""
    db = tmp_path / "s.db"
    Store.open(str(db)).close()
    code = main(["history", "--host", "board7", "--store", str(db), "--day", "today",
                 f"--slot={slot}"])
    err = capsys.readouterr().err
    assert code == 2
    assert "--slot" in err and len(err.strip().splitlines()) <= 2, err


def two_phase_run(run_id: str, start_s: float, spikes: tuple[int, int],
                  seconds: tuple[int, int]):  # type: ignore[no-untyped-def]
    """A run of two phases as merge_phases stores it: the first phase's engine header
    (its start on the wall clock), the phases' window indices each from its own engine
    start. spikes[i]: ns at second 100 of phase i."""
    first = run_at(run_id, start_s, seconds[0], {100: spikes[0]})
    later = run_at(run_id, start_s + seconds[0] + 30, seconds[1], {100: spikes[1]})
    first.phases[0].name, later.phases[0].name = "idle", "load"
    first.phases.append(later.phases[0])
    return first


def test_multi_phase_run_shows_its_first_phase_only(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """Only the first phase's start is stored (provenance.engine of a merged run is the
    first phase's header): the later phases are left out, and said to be, never put at
    the first phase's start (the 800 µs of phase `load` landed at 10:01:40)."""
    run = two_phase_run("bbbb0001", T0 + 36000, (90_000, 800_000), (600, 600))
    bd = board_day("board7", DAY, [run], 300, shape_of=probe_shape)
    (cd,) = bd.cpus
    assert cd.max_ns == 90_000 and cd.slot_max[120] == 90_000
    assert {int(k) for k in np.nonzero(cd.slot_max >= 0)[0]} == {120, 121}
    assert cd.hist.total == 600 * 1000  # the first phase's samples only
    assert bd.phases_not_shown == {"bbbb0001": ["load"]}
    # a run whose first phase ended before the day is not in it, however long the later
    # phases were (the span was start + the longest phase's elapsed time)
    early = two_phase_run("bbbb0002", T0 - 700, (90_000, 800_000), (600, 3600))
    assert board_day("board7", DAY, [early], 300, shape_of=probe_shape).runs == []

    db = _stored([run], tmp_path)
    code = main(["history", "--host", "board7", "--day", DAY.isoformat(), "--store", str(db),
                 "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    assert out["phases_not_shown"] == {"bbbb0001": ["load"]}
    assert out["cpus"][0]["max_ns"] == 90_000
    code = main(["history", "--host", "board7", "--day", DAY.isoformat(), "--store", str(db)])
    text = capsys.readouterr().out
    assert code == 0 and "day max 90.0 µs" in text
    assert "not shown: run bbbb0001's phase load" in text


def long_run(run_id: str, start_s: float, hours: int, spikes: dict[int, int]):  # type: ignore[no-untyped-def]
    """A run of `hours` 1-hour windows (a long monitor segment), 1000 samples each: hour
    of the run -> ns in `spikes`."""
    r = run_at(run_id, start_s, hours, spikes)
    ph = r.phases[0]
    ph.elapsed_ns = hours * 3_600_000_000_000
    ph.channels[0].window_ns = 3_600_000_000_000
    return r


def test_day_selects_runs_by_span_from_the_store(runs, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                 capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The runs are chosen in the store (host and probe), by their span overlapping the
    day: a 72-h segment started two days before counts; a run that ended the day before,
    another host's runs and a later day's are never read (before, every run of the store
    was listed and every run started from a day before read in full)."""
    other = run_at("cccc0001", T0 + 7200, 60, {})
    other.provenance["engine"]["system"]["hostname"] = "board8"
    db = _stored([*runs,
                  long_run("cccc0002", T0 - 2 * 86_400 - 1800, 72, {49: 700_000}),
                  run_at("cccc0003", T0 - 20 * 3600, 600, {}),  # ended the day before
                  run_at("cccc0004", T0 + 3 * 86_400, 600, {}),  # a later day
                  other], tmp_path)
    read: list[str] = []
    real_get = Store.get

    def get(self: Store, ref: str):  # type: ignore[no-untyped-def]
        read.append(ref)
        return real_get(self, ref)

    def no_list(self: Store, limit: int | None = 20):  # type: ignore[no-untyped-def]
        raise AssertionError("the whole store was listed")

    monkeypatch.setattr(Store, "get", get)
    monkeypatch.setattr(Store, "list", no_list)
    code = main(["history", "--host", "board7", "--day", DAY.isoformat(), "--store", str(db),
                 "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    assert sorted(read) == ["aaaa0001", "aaaa0002", "aaaa0003", "cccc0002"]
    assert sorted(out["runs"]) == sorted(read)
    (cpu,) = out["cpus"]
    # the segment's hour 49 is 00:30-01:30 of the day: its window goes to the slot of its
    # start (slot 6)
    assert cpu["slot_max_ns"][6] == 700_000 and cpu["max_ns"] == 700_000
    code = main(["history", "--host", "board7", "--day", DAY.isoformat(), "--store", str(db),
                 "--scenario", "other"])
    assert code == 2 and "no stored timer runs" in capsys.readouterr().err


def test_a_board_week(runs, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    """--days 7 from the day before: the run across midnight is whole (its 900 µs spike the
    day before counts now), the week's slots follow the days, one table row per day."""
    week = [*runs, run_at("aaaa0004", T0 + 3 * 86_400 + 7200, 600, {10: 300_000})]
    first = date(2026, 11, 19)
    bd = board_day("board7", first, week, 3600, shape_of=probe_shape, days=7)
    (cd,) = bd.cpus
    assert bd.slots == 7 * 24 and len(bd.runs) == 4 and bd.period() == \
        "2026-11-19 to 2026-11-25"
    assert cd.slot_max[23] == 900_000  # 23:55 the day before
    assert cd.slot_max[24] == 500_000  # 00:xx of the 20th: the 500 µs spike at 00:37
    assert cd.slot_max[24 + 10] == 90_000
    assert cd.slot_max[4 * 24 + 2] == 300_000  # the 23rd, 02:00
    assert cd.max_ns == 900_000
    # 23:00 the 19th, 00:00 and 10:00 the 20th, 02:00 the 23rd
    assert int((cd.slot_max >= 0).sum()) == 4
    db = _stored(week, tmp_path)
    plot = tmp_path / "week.svg"
    code = main(["history", "--host", "board7", "--day", first.isoformat(), "--days", "7",
                 "--slot", "1h", "--store", str(db), "--json", "--plot", str(plot)])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    assert out["days"] == 7 and out["last_day"] == "2026-11-25"
    assert len(out["cpus"][0]["slot_max_ns"]) == 168
    assert "2026-11-19 to 2026-11-25" in plot.read_text()
    code = main(["history", "--host", "board7", "--day", first.isoformat(), "--days", "7",
                 "--store", str(db)])
    text = capsys.readouterr().out
    assert code == 0
    rows = {line.split("│")[1].strip(): line.split("│")[2].strip()
            for line in text.splitlines() if line.count("│") >= 3 and "2026-11-" in line}
    assert rows["2026-11-19"] == "900*" and rows["2026-11-20"] == "500*"
    assert rows["2026-11-21"] == "-" and rows["2026-11-23"] == "300*"
    assert "7-day max 900 µs in the slot from 2026-11-19 23:55" in text
