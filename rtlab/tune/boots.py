# SPDX-License-Identifier: MIT
"""The tune's side of boot knobs: which kernel command line runs now, booting another
once through the reboot interface (rtlab.tune.reboot) when a block's configuration
needs it, and the original back at the end (also after an error or Ctrl-C; after
kill -9 of the host the one-shot boot makes the board's next reboot the original)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rtlab.tune.reboot import Rebooter, compose


class BootControl:
    def __init__(self, state: dict[str, Any], *,
                 on_event: Callable[[str], None] | None = None) -> None:
        spec = state["reboot"]
        self.state = state
        self.on_event = on_event
        self.rebooter = Rebooter(state["target"] or "local", spec["command"],
                                 timeout_s=float(spec.get("timeout_s") or 600.0),
                                 engine_dir=state.get("engine_dir"), on_event=on_event)
        if not spec.get("original"):
            spec["original"] = self.rebooter.original()
        self.original: str = spec["original"]
        self.current: dict[str, str | None] = dict(spec.get("booted") or {})

    def boot_params(self, params: dict[str, str | None]) -> None:
        """Make `params` the boot knobs in effect (nothing when they are already)."""
        if params == self.current:
            return
        spec = self.state["reboot"]
        if params:
            cmdline = compose(self.original, set=params)
            spec["booting"] = cmdline
            self.rebooter.boot(cmdline)
        else:
            self.rebooter.restore()
        self.current = dict(params)
        spec["booted"] = dict(params)
        spec.pop("booting", None)
        spec["reboots"] = int(spec.get("reboots") or 0) + 1

    def back(self, state: dict[str, Any], save: Callable[[dict[str, Any]], None]) -> None:
        """The original command line again, if another one runs."""
        if self.current:
            self.rebooter.restore()
            self.current = {}
            state["reboot"]["booted"] = {}
            save(state)
