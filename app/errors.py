"""The errors a command ends with; the command line maps each kind to its exit code, in one place
(:mod:`rlgen.cli.common`)."""

from __future__ import annotations

from typing import Any


class AppError(Exception):
    """A command that cannot do what it was asked; the message says why and what to do."""


class UsageError(AppError):
    """Bad arguments, or a file that cannot be read or written (exit 2)."""


class InvalidSpec(AppError):
    """The spec (or a search space) does not validate; ``diagnostics`` and ``sources`` say why,
    for a reporter to print (exit 1)."""

    def __init__(self, diagnostics: list[Any], sources: dict[str, str], message: str = "") -> None:
        super().__init__(message or f"{len(diagnostics)} problem(s)")
        self.diagnostics, self.sources = diagnostics, sources
        self.message = message  # a line after the diagnostics, if any (e.g. "x.rl.yaml not written")


class Failed(AppError):
    """The work was done and did not succeed: a build that cannot be made, a run that failed
    (the message names the rank and its error), no tune trial that completed (exit 1)."""


class Interrupted(AppError):
    """A second Ctrl-C or SIGTERM aborted the work before it stopped cleanly (exit 130)."""
