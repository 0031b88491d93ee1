# SPDX-License-Identifier: MIT
"""rtlab's reboot interface (docs/reboot.md) through a labgrid place's power control:

    rtlab tune --target labgrid:PLACE --reboot-cmd '"$RTLAB_PYTHON" -m rtlab.engine.labgrid_reboot'

RTLAB_TARGET names the place (labgrid:PLACE). The place is held for the power cycle
(acquired, or used as it is when this user holds it already, as rtlab's own commands
do) and power-cycled with labgrid's own client (`labgrid-client power cycle`, through
whatever power resource the place has: a NetworkPowerPort, PDUDaemonPort, USB or
Tasmota power port, a YKUSH port).

- RTLAB_BOOT=original: the power cycle boots the board's own (default) command line.
- RTLAB_BOOT=once: labgrid has no interface that sets a kernel command line for one
  boot (its bootloader drivers drive U-Boot or barebox over the serial console, each
  board in its own way). So this is refused, in one line, unless `--after-one-shot`
  says that the caller's own command has already arranged the one-shot line (e.g. with
  `grub-reboot` or `fw_setenv` on the board over SSH): then the place is power-cycled.
  rtlab checks /proc/cmdline after the boot in every case.

Exit codes: 0 power-cycled, 1 error (one line on stderr), 2 usage.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

from rtlab.engine.labgrid import PlaceLease, coordinator_address
from rtlab.engine.place_spec import is_labgrid, parse_place
from rtlab.errors import RtlabError, UsageError
from rtlab.exitcodes import ExitCode

POWER_CLASSES = ("NetworkPowerPort", "PDUDaemonPort", "NetworkUSBPowerPort",
                 "NetworkSiSPMPowerPort", "TasmotaPowerPort", "NetworkYKUSHPowerPort",
                 "NetworkSysfsGPIO")
POWER_TIMEOUT_S = 120.0


def labgrid_client() -> str:
    """labgrid's client, beside this interpreter (a virtual environment) or on PATH."""
    here = Path(sys.executable).parent / "labgrid-client"
    found = str(here) if here.exists() else shutil.which("labgrid-client")
    if not found:
        raise RtlabError("labgrid-client is not installed",
                         hint="pip install 'rtlab[labgrid]', see docs/lab.md#labgrid")
    return found


def power_cycle(spec: str) -> None:
    """Power-cycle the place `spec` (labgrid:PLACE) through its power resource."""
    place = parse_place(spec, "$RTLAB_TARGET")
    lease = PlaceLease(spec, on_lost=lambda _p, _m: None).open()
    try:
        if not any(c in POWER_CLASSES for c in lease.classes):
            raise RtlabError(f"labgrid place {place} has no power resource (it has "
                             f"{', '.join(lease.classes) or 'none'})",
                             hint="add one of " + ", ".join(POWER_CLASSES[:3]) + " to it")
        env = {**os.environ, "LG_COORDINATOR": coordinator_address()}
        try:
            proc = subprocess.run([labgrid_client(), "-p", place, "power", "cycle"],
                                  env=env, capture_output=True, text=True,
                                  timeout=POWER_TIMEOUT_S, stdin=subprocess.DEVNULL,
                                  check=False)
        except subprocess.TimeoutExpired:
            raise RtlabError(f"labgrid place {place}: the power cycle did not end within "
                             f"{POWER_TIMEOUT_S:g} s") from None
        if proc.returncode != 0:
            lines = [ln.strip() for ln in proc.stderr.splitlines() if ln.strip()]
            raise RtlabError(f"labgrid place {place}: the power cycle failed"
                             + (f": {lines[-1]}" if lines else f" (exit {proc.returncode})"))
    finally:
        lease.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m rtlab.engine.labgrid_reboot",
        description="rtlab's reboot interface through a labgrid place's power control "
                    "(RTLAB_TARGET=labgrid:PLACE, RTLAB_BOOT=original|once).")
    parser.add_argument("--after-one-shot", action="store_true",
                        help="RTLAB_BOOT=once: the one-shot command line is arranged "
                             "already; power-cycle to boot it")
    args = parser.parse_args(argv)
    target = os.environ.get("RTLAB_TARGET", "")
    boot = os.environ.get("RTLAB_BOOT", "")
    try:
        if not is_labgrid(target):
            raise UsageError(f"$RTLAB_TARGET {target!r}: expected labgrid:PLACE")
        if boot not in ("once", "original"):
            raise UsageError(f"$RTLAB_BOOT {boot!r}: expected once or original")
        if boot == "once" and not args.after_one_shot:
            raise RtlabError(
                f"{target}: labgrid has power control but no interface that boots a kernel "
                "command line once",
                hint="arrange the one-shot line on the board first (grub-reboot, fw_setenv) "
                     "and then run this with --after-one-shot (docs/reboot.md)")
        power_cycle(target)
    except RtlabError as exc:
        print(f"rtlab labgrid reboot: {exc.one_line()}", file=sys.stderr)
        return int(exc.code)
    return int(ExitCode.OK)


if __name__ == "__main__":
    sys.exit(main())
