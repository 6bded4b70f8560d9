"""Errors a user can act on: each carries its exit code and a one-line message."""

from __future__ import annotations

EXIT_OK = 0
EXIT_BAD_INPUT = 2
EXIT_NOTHING_FITS = 3


class DseError(Exception):
    """A problem with the user's input or setup; printed as one line, never as a traceback."""

    exit_code = EXIT_BAD_INPUT


class BadInput(DseError):
    """Bad file, flag or name: exit 2. The message names the problem and the fix."""


class NothingFits(DseError):
    """No schedule fits the memory given: exit 3."""

    exit_code = EXIT_NOTHING_FITS
