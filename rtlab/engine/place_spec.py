# SPDX-License-Identifier: MIT
"""The text of a farm target: `labgrid:PLACE` (docs/lab.md#labgrid).

Only the spelling lives here, so that `rtlab.engine.ssh` can check a `--target` without
depending on the farm code; holding a place is `rtlab.engine.labgrid`.
"""

from __future__ import annotations

import re

from rtlab.errors import UsageError
from rtlab.textfmt import shown

PREFIX = "labgrid:"
_PLACE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]{0,127}\Z")


def is_labgrid(text: str | None) -> bool:
    return bool(text) and str(text).startswith(PREFIX)


def parse_place(text: str, option: str = "--target") -> str:
    """The place name of `labgrid:PLACE` (UsageError, one line, when malformed)."""
    name = text[len(PREFIX):]
    if not _PLACE.match(name):
        raise UsageError(f"{option} {shown(text)}: expected labgrid:PLACE, a labgrid place "
                         "name (letters, digits, '_', '.', '+', '-'), e.g. labgrid:rpi4-7")
    return name
