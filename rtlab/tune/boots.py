# SPDX-License-Identifier: MIT
"""The tune's side of boot knobs: which kernel command line runs now, booting another
once through the reboot interface (rtlab.tune.reboot) when a block's configuration
needs it, and the original back at the end (also after an error or Ctrl-C; after
kill -9 of the host the one-shot boot makes the board's next reboot the original).

After every boot each boot parameter is verified in effect from the board's own files
(rtlab.tune.bootcheck) and the answer kept in the tune's state, under
`state["reboot"]`:

- `original`: the board's command line before the tune (read once, passed back to the
  reboot interface when a tune resumes);
- `booted`: the boot knobs' parameters in effect now ({} : the original);
- `boots`: every boot, with what it booted, how long it took and its boot id;
- `checks[KEY]`: the checks of the last boot of the parameters KEY ("isolcpus=... "):
  one BootCheck each (param, value, in_effect, evidence, source), and with isolated
  CPUs one more, `tasks`, the ordinary tasks seen on them;
- `tasks[KEY]`: each look at the isolated CPUs (after the boot, and after the blocks
  measured on it, before booting away): the ordinary tasks found there.

A parameter that is not in effect (in_effect False) makes the configuration's blocks
worthless: RtlabError names it, and the tune marks the knob failed. One the files
cannot tell about (in_effect None) is kept as such and the blocks are measured.

A reboot ends the applier that held the board for the tune (the owner lock lives in
the board's /run): after every reboot the tune takes the lock again, so that another
rtlab is refused between blocks as before the first reboot (`hold`).

When a tune resumes, the board may not run what the state says (its one-shot boot
ended with a reboot meanwhile, or someone booted another line): the command line
running is read first; the original is taken as it is, the expected line too, and
any other line is booted back to the original before anything is measured.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from rtlab.errors import RtlabError
from rtlab.tune.bootcheck import (
    ISOLATED,
    BootCheck,
    BootFiles,
    read_boot_files,
    tasks_on,
    verify_boot,
)
from rtlab.tune.reboot import (
    DEFAULT_TIMEOUT_S,
    BootResult,
    Rebooter,
    RebootEvent,
    compose,
    normalise,
)

FileReader = Callable[[], BootFiles]
Holder = Callable[[], contextlib.AbstractContextManager[object]]
MAX_TASKS_KEPT = 20  # tasks named per look (the count is always whole)


def params_key(params: dict[str, str | None]) -> str:
    """The state's key of a set of boot parameters: 'isolcpus=managed_irq,domain,1
    nohz_full=1' ('original' for none)."""
    return " ".join(k if v is None else f"{k}={v}" for k, v in params.items()) or "original"


def _isolated(files: BootFiles) -> list[int]:
    from rtlab.cpulist import CpuListError, parse_cpulist

    text = files.get(ISOLATED)
    if not text or text == "(null)":
        return []
    try:
        return parse_cpulist(text)
    except CpuListError:
        return []


class BootControl:
    """Boot knobs of one tune (`state`, rtlab.tune.state), on its target."""

    def __init__(self, state: dict[str, Any], *,
                 on_event: Callable[[str], None] | None = None,
                 save: Callable[[dict[str, Any]], None] | None = None,
                 rebooter: Rebooter | None = None,
                 read_files: FileReader | None = None,
                 hold: Holder | None = None) -> None:
        spec = state["reboot"]
        self.state = state
        self.on_event = on_event
        self.saver = save
        self.rebooter = rebooter or Rebooter(
            state["target"] or "local", spec["command"],
            timeout_s=float(spec.get("timeout_s") or DEFAULT_TIMEOUT_S),
            # the original gets at least the default: giving up on it leaves the board
            # off its own command line, and a short --reboot-timeout is for tuning boots
            restore_timeout_s=max(float(spec.get("timeout_s") or DEFAULT_TIMEOUT_S),
                                  DEFAULT_TIMEOUT_S),
            engine_dir=state.get("engine_dir"), on_event=self._reboot_event,
            original=spec.get("original") or None)
        self._read_files = read_files or self._transport_files
        self._hold = hold or self._transport_hold
        self._held: contextlib.ExitStack | None = None
        if not spec.get("original"):
            spec["original"] = self.rebooter.original()
        self.original: str = spec["original"]
        self.current: dict[str, str | None] = dict(spec.get("booted") or {})
        self._synced = False

    # ------------------------------------------------------------ the tune's calls
    def boot_params(self, params: dict[str, str | None]) -> None:
        """Make `params` the boot knobs in effect (nothing when they are already), and
        verify them in effect: RtlabError names a parameter that is not."""
        self._sync()
        if params == self.current:
            if params:
                self._look_at_isolated("blocks")
            return
        spec = self.state["reboot"]
        if self.current:
            self._look_at_isolated("blocks")  # the blocks measured on what runs now
        if params:
            cmdline = compose(self.original, set=params)
            spec["booting"] = cmdline
            spec["booting_params"] = dict(params)
            self._save()
            try:
                result = self.rebooter.boot(cmdline)
            except RtlabError:
                # the reboot interface booted the original after a failed boot, or the
                # board never went down: read which line runs before going on
                with contextlib.suppress(RtlabError):
                    self._rehold()
                self.current = self._running_params()
                spec["booted"] = dict(self.current)
                spec.pop("booting", None)
                spec.pop("booting_params", None)
                self._save()
                raise
        else:
            result = self.rebooter.restore()
        if result.rebooted:
            self._rehold()
        self.current = dict(params)
        spec["booted"] = dict(params)
        spec.pop("booting", None)
        spec.pop("booting_params", None)
        if result.rebooted:
            spec["reboots"] = int(spec.get("reboots") or 0) + 1
        self._record_boot(params, result)
        how = f"rebooted in {result.seconds:.0f} s" if result.rebooted else "already running"
        self._event(f"booted {params_key(params) if params else 'the original command line'}"
                    f" ({how})")
        if params:
            self.verify(params)

    def verify(self, params: dict[str, str | None]) -> list[BootCheck]:
        """Each parameter of `params` in effect on the board now (its files read once),
        recorded in the state; RtlabError naming the first that is not."""
        files = self._read_files()
        checks = verify_boot(params, files)
        key = params_key(params)
        spec = self.state["reboot"]
        recorded = [c.to_dict() for c in checks]
        isolated = _isolated(files)
        if isolated:
            found = tasks_on(isolated, files)
            recorded.append(self._tasks_check(isolated, found))
            self._keep_tasks(key, "boot", isolated, found)
        spec.setdefault("checks", {})[key] = recorded
        self._save()
        for c in checks:
            word = {True: "in effect", False: "NOT in effect", None: "cannot tell"}[
                c.in_effect]
            self._event(f"  {params_key({c.param: c.value})}: {word} ({c.evidence})")
        bad = [c for c in checks if c.in_effect is False]
        if bad:
            c = bad[0]
            raise RtlabError(
                f"boot parameter {params_key({c.param: c.value})} is not in effect on "
                f"{self.state['target']} after its boot: {c.evidence}",
                hint="the kernel may lack what the parameter needs, or the bootloader "
                     "changed the line (docs/reboot.md)")
        return checks

    def back(self, state: dict[str, Any], save: Callable[[dict[str, Any]], None]) -> None:
        """The original command line again, if another one runs (or may: a boot that
        was under way when the tune stopped)."""
        spec = state["reboot"]
        if not self.current and not spec.get("booting"):
            self.release()
            return
        if self.current:
            self._look_at_isolated("blocks")
        try:
            result = self.rebooter.restore()
        finally:
            self.release()
        self.current = {}
        spec["booted"] = {}
        spec.pop("booting", None)
        spec.pop("booting_params", None)
        if result.rebooted:
            spec["reboots"] = int(spec.get("reboots") or 0) + 1
        self._record_boot({}, result)
        self._event("booted the original command line"
                    + (f" (rebooted in {result.seconds:.0f} s)" if result.rebooted else
                       " (already running)"))
        save(state)

    # ------------------------------------------------------------ internals
    def _sync(self) -> None:
        """Once, before the first boot of this process: what runs on the board now
        against what the state expects (module docstring)."""
        if self._synced:
            return
        self._synced = True
        spec = self.state["reboot"]
        _, now = self.rebooter.current()
        expected = compose(self.original, set=self.current) if self.current else self.original
        booting = spec.get("booting_params")
        if normalise(now) == normalise(expected):
            return
        if normalise(now) == normalise(self.original):
            if self.current:
                self._event(f"the board runs its original command line again (the one-shot "
                            f"boot of {params_key(self.current)} ended with a reboot)")
            self.current = {}
        elif booting and normalise(now) == normalise(compose(self.original, set=booting)):
            self.current = dict(booting)
        else:
            self._event("the board runs a command line this tune did not boot: booting "
                        "the original first")
            result = self.rebooter.restore()
            if result.rebooted:
                spec["reboots"] = int(spec.get("reboots") or 0) + 1
                self._rehold()
            self._record_boot({}, result)
            self.current = {}
        spec["booted"] = dict(self.current)
        spec.pop("booting", None)
        spec.pop("booting_params", None)
        self._save()

    def _running_params(self) -> dict[str, str | None]:
        """The boot parameters of what runs now: {} for the original, else those the
        tune was booting (anything else was restored by the reboot interface)."""
        try:
            _, now = self.rebooter.current()
        except RtlabError:
            return dict(self.current)
        booting = self.state["reboot"].get("booting_params")
        if booting and normalise(now) == normalise(compose(self.original, set=booting)):
            return dict(booting)
        if normalise(now) == normalise(self.original):
            return {}
        return dict(self.current)

    def _look_at_isolated(self, when: str) -> None:
        """Which ordinary tasks sit on the isolated CPUs now (after blocks measured on
        them): kept in the state as evidence; a failure to read is noted, not raised."""
        key = params_key(self.current)
        try:
            files = self._read_files()
        except RtlabError as exc:
            self.state["reboot"].setdefault("tasks", {}).setdefault(key, []).append(
                {"when": when, "error": exc.one_line()})
            return
        isolated = _isolated(files)
        if isolated:
            found = tasks_on(isolated, files)
            self._keep_tasks(key, when, isolated, found)
            if found:
                self._event(f"{len(found)} ordinary task(s) on isolated CPUs "
                            f"{','.join(map(str, isolated))}: "
                            + "; ".join(t.describe() for t in found[:3]))
            self._save()

    @staticmethod
    def _tasks_check(isolated: list[int], found: list[Any]) -> dict[str, object]:
        cpus = ",".join(map(str, isolated))
        return {"param": "tasks", "value": cpus, "in_effect": not found,
                "evidence": (f"no ordinary task on isolated CPUs {cpus}" if not found else
                             f"{len(found)} ordinary task(s) on isolated CPUs {cpus}: "
                             + "; ".join(t.describe() for t in found[:3])),
                "source": "tasks"}

    def _keep_tasks(self, key: str, when: str, isolated: list[int], found: list[Any]) -> None:
        self.state["reboot"].setdefault("tasks", {}).setdefault(key, []).append(
            {"when": when, "isolated": isolated, "count": len(found),
             "tasks": [t.describe() for t in found[:MAX_TASKS_KEPT]]})

    def _record_boot(self, params: dict[str, str | None], result: BootResult) -> None:
        self.state["reboot"].setdefault("boots", []).append(
            {"params": params_key(params), **result.to_dict()})
        self._save()

    def release(self) -> None:
        """Let go of the lock taken after a reboot (the tune's own hold ends with it)."""
        held, self._held = self._held, None
        if held is not None:
            with contextlib.suppress(RtlabError, OSError):
                held.close()

    def _rehold(self) -> None:
        """The board rebooted: its owner lock went with its /run; take it again."""
        self.release()
        stack = contextlib.ExitStack()
        try:
            stack.enter_context(self._hold())
        except BaseException:
            stack.close()
            raise
        self._held = stack

    def _transport_hold(self) -> contextlib.AbstractContextManager[object]:
        from rtlab.engine.board import open_target
        from rtlab.system.applier import hold_target
        from rtlab.system.journal_files import journal_dir

        stack = contextlib.ExitStack()
        try:
            transport = stack.enter_context(open_target(self.state["target"],
                                                        self.state.get("engine_dir")))
            stack.enter_context(hold_target(transport, journal_dir(transport), "tune"))
        except BaseException:
            stack.close()
            raise
        return stack

    def _transport_files(self) -> BootFiles:
        from rtlab.engine.board import open_target

        with open_target(self.state["target"], self.state.get("engine_dir")) as transport:
            return read_boot_files(transport)

    def _save(self) -> None:
        """Saved as soon as a boot changes it (a kill -9 mid-block then finds it)."""
        if self.saver is not None:
            self.saver(self.state)

    def _event(self, text: str) -> None:
        if self.on_event is not None:
            self.on_event(text)

    def _reboot_event(self, ev: RebootEvent) -> None:
        self._event(ev.text)
