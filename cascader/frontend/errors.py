"""Errors the flow raises for models it cannot take; each message is one line a user can act on."""

from __future__ import annotations


class ModelError(ValueError):
    """The model file is missing, not TFLite, corrupt, or not fully int8-quantised.

    The library never exits; the `dse` command line turns this into exit code 2.
    """
