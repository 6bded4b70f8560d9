"""Single-precision rounding, so costs truncate exactly where the original's `float` maths did."""

from __future__ import annotations

import numpy as np

_EXACT_LIMIT = float(1 << 24)


def f32(value: float) -> float:
    """Round a real value to the nearest float32. Integers below 2**24 are already exact, which is
    the common case, so they skip the numpy round trip."""
    if -_EXACT_LIMIT < value < _EXACT_LIMIT and value == int(value):
        return float(value)
    return float(np.float32(value))
