# SPDX-License-Identifier: MIT
"""Per-probe summaries computed on the host from the engine's JSON Lines records.

Each module takes the parsed records of one run (header, snapshots, result) and
returns plain dataclasses; nothing here measures or parses human text.
"""
