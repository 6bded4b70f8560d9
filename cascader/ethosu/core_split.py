"""How Vela shares a convolution's output channels between the cores of a multi-core Ethos-U
(ethos-u65-512): each core reads its own weight and scale-bias streams, laid out one after
the other, so the scheduler sizes the buffers they are copied into the same way codegen
lays them out."""

from __future__ import annotations

from cascader.ethosu.vela_arch import default_arch
from cascader.flow.te import SCALE_BIAS_BYTES

__all__ = ["core_shares", "scale_bias_bytes"]

_ALIGN = 16


def _aligned(n: int) -> int:
    return -(-n // _ALIGN) * _ALIGN


def core_shares(accelerator: str, lo: int, hi: int, depth: int) -> list[tuple[slice, int]]:
    """Each active core's output channels of [lo, hi) and its OFM block depth. Vela deals the
    channels round-robin, so each core computes its share of every `depth`-deep OFM block."""
    ncores = default_arch(accelerator).ncores
    shares = []
    for core in range(min(ncores, hi - lo)):
        core_depth = (depth + ncores - 1 - core) // ncores
        if core_depth:
            shares.append((slice(lo + core, hi, ncores), core_depth))
    return shares


def scale_bias_bytes(accelerator: str, lo: int, hi: int, depth: int) -> int:
    """Bytes of the scale-bias of output channels [lo, hi): the cores' streams end to end,
    each but the last padded to 16 bytes so the next core's starts aligned."""
    sizes = [
        SCALE_BIAS_BYTES * len(range(*channels.indices(hi)))
        for channels, _ in core_shares(accelerator, lo, hi, depth)
    ]
    return sum(_aligned(n) for n in sizes[:-1]) + sizes[-1]
