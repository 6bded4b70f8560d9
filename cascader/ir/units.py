"""Sizes the Ethos-U hardware fixes for every variant."""

from __future__ import annotations

ALIGN = 16  # NPU feature-map and DMA addresses, and constant pieces, are 16-byte aligned
SCALE_BIAS_BYTES = 10  # per output channel: 40-bit bias, 32-bit multiplier, 6-bit shift (packed)


def align(n: int) -> int:
    """`n` rounded up to the next multiple of ALIGN."""
    return -(-n // ALIGN) * ALIGN
