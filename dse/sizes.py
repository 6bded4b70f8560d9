"""Byte sizes on the command line: `262144`, `256KiB`, `0.25MiB`, `4MB`."""

from __future__ import annotations

import re
from fractions import Fraction

from dse.errors import BadInput

# The largest size any option takes: the 40-bit address space of an Ethos-U65 (an Ethos-U55
# addresses 4 GiB; the device model says so for pools beyond it).
MAX_SIZE = 1 << 40

_UNITS = {
    "": 1,
    "b": 1,
    "k": 1024,
    "kb": 1024,
    "kib": 1024,
    "m": 1024**2,
    "mb": 1024**2,
    "mib": 1024**2,
    "g": 1024**3,
    "gb": 1024**3,
    "gib": 1024**3,
}
_SIZE = re.compile(r"^\s*([0-9]{0,20}\.?[0-9]{1,20})\s*([a-zA-Z]{0,3})\s*$", re.ASCII)


def parse_size(text: str) -> int:
    """Bytes for a size string, computed exactly (no float rounding). KB/MB mean KiB/MiB, as
    in Vela's and embedded usage."""
    match = _SIZE.match(str(text))
    unit = match.group(2).lower() if match else None
    if match is None or unit not in _UNITS:
        shown = str(text) if len(str(text)) <= 40 else str(text)[:37] + "..."
        raise BadInput(
            f"bad size {shown!r}: give bytes or a KiB/MiB size, e.g. 262144, 256KiB, 0.25MiB"
        )
    value = Fraction(match.group(1)) * _UNITS[unit]
    if value.denominator != 1:
        raise BadInput(f"bad size {text!r}: it is not a whole number of bytes ({float(value):g})")
    if value <= 0:
        raise BadInput(f"bad size {text!r}: a size must be positive")
    if value > MAX_SIZE:
        raise BadInput(
            f"bad size {text!r}: more than 1 TiB ({MAX_SIZE} bytes), the most an Ethos-U addresses"
        )
    return int(value)


def format_size(nbytes: int) -> str:
    """Short human form used in tables: 354.0 KiB, 1.50 MiB."""
    if nbytes >= 1024**2:
        return f"{nbytes / 1024**2:.2f} MiB"
    if nbytes >= 1024:
        return f"{nbytes / 1024:.1f} KiB"
    return f"{nbytes} B"
