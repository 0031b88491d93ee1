# SPDX-License-Identifier: MIT
"""A load as it runs on its target: itself on this machine; on a board, started and owned
there by the board's engine (rtlab.loads.board), the OSADL mid load in its board form
(rtlab.loads.osadl_board)."""

from __future__ import annotations

from rtlab.engine.transport import Transport
from rtlab.errors import UsageError
from rtlab.loads.board import RemoteLoad, board_kind_error
from rtlab.loads.lifecycle import Load
from rtlab.loads.osadl_board import BoardOsadlLoad
from rtlab.loads.osadl_mid import OsadlMidLoad


def for_target(load: Load, transport: Transport | None) -> Load:
    """The load as it runs on the target: itself on this machine, a RemoteLoad on a board."""
    if transport is None or transport.is_local:
        return load
    why = board_kind_error(load.kind, transport.target)
    if why is not None:
        raise UsageError(why)
    if isinstance(load, OsadlMidLoad):
        return BoardOsadlLoad(load, transport)
    return RemoteLoad(load, transport)
