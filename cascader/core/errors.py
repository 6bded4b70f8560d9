"""Errors raised by the cascader core."""

from __future__ import annotations


class ContractError(NotImplementedError):
    """A device's part broke the device interface (`core.part.Part`'s contract): the core
    asked for something the part said it answers but does not. The message names the part's
    class and what it left out, so the device's author knows what to write."""


class GraphFormatError(ValueError):
    """A graph JSON document is malformed; the message names the offending field."""
