"""Errors raised by the cascader core."""

from __future__ import annotations


class GraphFormatError(ValueError):
    """A graph JSON document is malformed; the message names the offending field."""
