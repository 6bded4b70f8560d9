"""Vela's burst efficiency of a feature map moved in blocks: how many more cycles per byte a
transfer shorter than the memory's burst costs (npu_performance's
`_estimate_memory_transfer_efficiency`, one NPU core)."""

from __future__ import annotations

import numpy as np

from cascader.core.memory_region import MemoryRegion
from cascader.core.tensor import Tensor

# Vela's IFM blocks are a whole number of IFM micro-blocks deep (8 on every Ethos-U55/U65).
IFM_DEPTH_GRANULE = 8


def burst_efficiency(
    tensor: Tensor, block_shape: tuple[int, ...], region: MemoryRegion, is_read: bool
) -> float:
    """The cycle multiplier for `tensor` moved in blocks of `block_shape`: NHWC reads burst
    one block depth (a whole block row only for depth-1 blocks), writes at most 16 elements;
    NHCWB16 (5-D tensors) moves 16-deep bricks one block row at a time."""
    element = tensor.dtype_bytes
    if len(tensor.shape) == 5:  # an inline part's one-axis block moves nothing: any width
        width = block_shape[3] if len(block_shape) == 5 else (*block_shape, 1, 1)[2]
        burst = 16 * element * width
    else:
        depth, width = block_shape[-1], block_shape[-2] if len(block_shape) > 1 else 1
        if is_read:  # the block configs clip the IFM block to the tensor; Vela does not
            depth = -(-depth // IFM_DEPTH_GRANULE) * IFM_DEPTH_GRANULE
        if depth == element and (is_read or depth <= 16):
            burst = element * depth * width
        elif is_read:
            burst = element * depth
        else:
            burst = min(64, 16 * element, depth * element)
    return region.burst_length / min(region.burst_length, max(burst, 1))


def burst_efficiencies(
    tensor: Tensor,
    blocks: tuple[tuple[int, ...], ...] | np.ndarray,
    region: MemoryRegion,
    is_read: bool,
) -> np.ndarray:
    """`burst_efficiency` of every block shape of `blocks` at once (a list of blocks of one
    rank; each entry's arithmetic as `burst_efficiency` does it, so the values are equal)."""
    shapes = np.asarray(blocks, dtype=np.int64).reshape(len(blocks), -1)
    rank = shapes.shape[1]
    element = tensor.dtype_bytes
    if len(tensor.shape) == 5:
        widths = shapes[:, 3 if rank == 5 else 2] if rank > 2 else np.ones(len(blocks), np.int64)
        burst = 16 * element * widths
    else:
        depth = shapes[:, -1]
        width = shapes[:, -2] if rank > 1 else np.ones(len(blocks), dtype=np.int64)
        if is_read:
            depth = -(-depth // IFM_DEPTH_GRANULE) * IFM_DEPTH_GRANULE
        whole_rows = (depth == element) & (is_read | (depth <= 16))
        burst = np.where(
            whole_rows,
            element * depth * width,
            element * depth if is_read else np.minimum(min(64, 16 * element), depth * element),
        )
    length = region.burst_length
    return length / np.minimum(length, np.maximum(burst, 1))
