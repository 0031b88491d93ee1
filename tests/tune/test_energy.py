# SPDX-License-Identifier: MIT
"""Energy from the kernel's powercap counters (RAPL), as the tune reads them: top-level
zones only, one wrap undone with the zone's range, nothing where nothing is exposed;
and the ledger's power per side of the confirmation. No machine here has RAPL: the
records are what `rtlab-probe sys snapshot` gives for these files."""

from __future__ import annotations

from rtlab.tune import energy
from rtlab.tune.ledger import power


def _rec(path: str, text: str) -> dict[str, object]:
    return {"type": "file", "path": path, "size": len(text), "text": text}


def test_top_level_zones_only_and_wrap() -> None:
    recs = [_rec("/sys/class/powercap/intel-rapl:0/energy_uj", "1000000\n"),
            _rec("/sys/class/powercap/intel-rapl:0/max_energy_range_uj", "262143328850\n"),
            _rec("/sys/class/powercap/intel-rapl:0:0/energy_uj", "500000\n"),  # sub-zone
            _rec("/sys/class/powercap/intel-rapl:1/energy_uj", "262143000000\n"),
            _rec("/sys/class/powercap/intel-rapl:1/max_energy_range_uj", "262143328850\n"),
            {"type": "error", "path": "/sys/class/powercap/x:2/energy_uj", "errno": 13,
             "error": "EACCES"}]
    before = energy.parse(recs)
    assert sorted(before) == ["intel-rapl:0", "intel-rapl:1"]
    after = {"intel-rapl:0": (3_500_000, 262143328850), "intel-rapl:1": (1_000_000, 262143328850)}
    # zone 0: 2.5 J; zone 1 wrapped: 262143328850 - 262143000000 + 1000000 µJ
    assert energy.joules(before, after) == (2_500_000 + 328_850 + 1_000_000) / 1e6


def test_nothing_exposed_is_none() -> None:
    assert energy.parse([]) == {}
    assert energy.joules({}, {}) is None
    assert energy.joules({"z:0": (10, 0)}, {"z:0": (5, 0)}) is None  # wrapped, no range


def test_ledger_power_per_side() -> None:
    conf = {"blocks": [{"side": "A", "seconds": 10.0, "energy_j": 200.0},
                       {"side": "B", "seconds": 10.0, "energy_j": 260.0},
                       {"side": "B", "seconds": 10.0, "energy_j": 240.0},
                       {"side": "A", "seconds": 10.0, "energy_j": 220.0}]}
    assert power(conf) == {"source": "powercap (RAPL)", "baseline_w": 21.0, "final_w": 25.0,
                           "change_w": 4.0}
    assert power({"blocks": [{"side": "A", "seconds": 10.0}]}) is None
