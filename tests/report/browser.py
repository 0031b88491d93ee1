# SPDX-License-Identifier: MIT
"""Render an HTML file in headless Chromium: screenshot and console errors."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path


def chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def screenshot(html: Path, png: Path, height: int = 3000) -> str:
    """Take a screenshot of `html`; returns chromium's stderr (console messages included)."""
    exe = chromium()
    assert exe is not None
    with tempfile.TemporaryDirectory() as profile:
        proc = subprocess.run(
            [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
             "--no-first-run", "--disable-background-networking", "--disable-component-update",
             "--disable-sync", f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0",
             f"--screenshot={png}", f"--window-size=1200,{height}", html.resolve().as_uri()],
            capture_output=True, text=True, timeout=120)
    return proc.stderr
