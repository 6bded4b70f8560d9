"""Defaults of the command line: a new study's objectives and pool range; the device's come
from `cascader.ethosu.defaults`."""

from __future__ import annotations

DEFAULT_OBJECTIVES = "cycles,sram"
SRAM_MIN = 16 * 1024  # a new study's pool range, bytes: the smallest arena Vela users try
SRAM_MAX = 4 * 1024 * 1024
