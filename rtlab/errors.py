# SPDX-License-Identifier: MIT
"""The one exception type the CLI turns into a one-line message and an exit code."""

from __future__ import annotations

from rtlab.exitcodes import ExitCode


class RtlabError(Exception):
    """A user-facing error: `message` says what is wrong, `hint` how to fix it."""

    def __init__(self, message: str, code: ExitCode = ExitCode.ERROR, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.code = code
        self.hint = hint

    def one_line(self) -> str:
        return f"{self.message} ({self.hint})" if self.hint else self.message


class UsageError(RtlabError):
    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message, ExitCode.USAGE, hint)


class SkippedError(RtlabError):
    """A privilege or kernel feature is missing."""

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message, ExitCode.SKIPPED, hint)


class MissingToolError(SkippedError):
    """A program a load needs is not installed on the target (`tools`: which)."""

    def __init__(self, message: str, tools: tuple[str, ...], hint: str | None = None):
        super().__init__(message, hint)
        self.tools = tools
