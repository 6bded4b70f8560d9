"""Configuration errors of the Ethos-U device model, raised by the library and turned into exit
codes by the command line (the library never imports `dse`)."""

from __future__ import annotations

from collections.abc import Iterable


class DeviceConfigError(ValueError):
    """An accelerator, system config or memory mode name that does not exist; the message lists
    the names that do, so the user can fix the flag."""

    def __init__(self, what: str, name: str, valid: Iterable[str]):
        self.what = what
        self.name = name
        self.valid = tuple(valid)
        super().__init__(f"unknown {what} {name!r}; valid names: {', '.join(self.valid)}")
