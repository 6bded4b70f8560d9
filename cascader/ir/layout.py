"""How feature maps are laid out in memory: NHWC, or NHCWB16 (bricks of 16 channels), their
stored shapes and bytes, and how an NHWC box maps through an affine read between layouts."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol

import numpy as np

from cascader.ir.npu_ops import Layout, NpuTensor

BRICK = 16  # channels per NHCWB16 brick

# (n, h, w, c) -> (n, h, c/16, w, 16): one row per NHCWB16 axis, homogeneous column last.
NHWC_TO_NHCWB16 = np.array(
    [
        [1, 0, 0, 0, 0],
        [0, 1, 0, 0, 0],
        [0, 0, 0, 1 / BRICK, 0],
        [0, 0, 1, 0, 0],
        [0, 0, 0, 0, BRICK],
        [0, 0, 0, 0, 1],
    ],
    dtype=np.float64,
)


# (n, h, c/16, w, 16) -> (n, h, w, c). A stripe of k bricks holds 16 k channels; the last brick
# of a tensor whose depth is not a multiple of 16 is partly empty, which clipping to the tensor
# accounts for. (TVM's matrix subtracts the empty part from every stripe, so a stripe of the
# first bricks of such a tensor read too few channels.)
NHCWB16_TO_NHWC = np.array(
    [
        [1, 0, 0, 0, 0, 0],
        [0, 1, 0, 0, 0, 0],
        [0, 0, 0, 1, 0, 0],
        [0, 0, BRICK, 0, 0, 0],
        [0, 0, 0, 0, 0, 1],
    ],
    dtype=np.float64,
)


class AffineRead(Protocol):
    """What a propagator is to this module: a homogeneous transform and an offset, in the
    stored layouts of the output and the input."""

    @property
    def transform(self) -> np.ndarray: ...

    @property
    def offset(self) -> Sequence[int]: ...


def stored_shape(tensor: NpuTensor) -> tuple[int, ...]:
    """The shape of a tensor as laid out in memory: NHCWB16 is (N, H, ceil(C/16), W, 16)."""
    if tensor.layout == Layout.NHCWB16:
        n, h, w, c = tensor.shape
        return (n, h, math.ceil(c / BRICK), w, BRICK)
    return tuple(tensor.shape)


def feature_map_bytes(shape: Sequence[int], layout: Layout, dtype_bytes: int) -> int:
    """Bytes of an NHWC-shaped box stored in `layout` (NHCWB16 rounds depth up to bricks)."""
    n, h, w, c = (1, 1, 1, *shape)[-4:]
    if layout == Layout.NHCWB16:
        c = math.ceil(c / BRICK) * BRICK
    return n * h * w * c * dtype_bytes


def _stored_box(
    offset: tuple[int, ...], shape: tuple[int, ...], tensor: NpuTensor
) -> tuple[np.ndarray, np.ndarray]:
    """An NHWC box of `tensor` as (start, shape) in its stored layout."""
    if tensor.layout != Layout.NHCWB16:
        return np.array(offset), np.array(shape)
    (n0, h0, w0, c0), (n, h, w, c) = offset, shape
    first, last = c0 // BRICK, -(-(c0 + c) // BRICK)
    return np.array([n0, h0, first, w0, 0]), np.array([n, h, last - first, w, BRICK])


def propagate_box(
    propagator: AffineRead,
    offset: tuple[int, ...],
    shape: tuple[int, ...],
    ofm: NpuTensor,
    ifm: NpuTensor,
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(offset, shape) of the NHWC box of `ifm` that a propagator says the NHWC box (offset,
    shape) of `ofm` reads: the affine map of the box's start (rounded down) and shape (rounded
    up) in the stored layouts, clipped to the tensor. This is how a stripe's position maps,
    beside the stripe shape the cascader propagates."""
    start, size = _stored_box(offset, shape, ofm)
    linear = propagator.transform[:-1, :-1]
    shift = propagator.transform[:-1, -1]
    eps = 1e-9  # 1/2 and 1/16 are exact in binary, but a sum of products may not be
    first = np.floor(linear @ start + eps).astype(np.int64) + np.array(propagator.offset)
    count = np.ceil(linear @ size + shift - eps).astype(np.int64)
    full = np.array(stored_shape(ifm))
    lo = np.clip(first, 0, full)
    hi = np.maximum(np.clip(first + count, 0, full), lo)
    if ifm.layout != Layout.NHCWB16:
        return tuple(int(v) for v in lo), tuple(int(v) for v in hi - lo)
    c0, c1 = int(lo[2]) * BRICK, min(int(hi[2]) * BRICK, ifm.shape[3])
    return (
        (int(lo[0]), int(lo[1]), int(lo[3]), c0),
        (int(hi[0] - lo[0]), int(hi[1] - lo[1]), int(hi[3] - lo[3]), max(c1 - c0, 0)),
    )
