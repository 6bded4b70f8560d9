"""The error of the schedule IR, shared by everything that builds or reads a schedule."""

from __future__ import annotations


class ScheduleError(ValueError):
    """A schedule asks for something the NPU or this lowering cannot express."""
