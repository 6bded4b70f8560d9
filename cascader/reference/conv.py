"""Conv2D, depthwise and fully connected: int64 accumulators, per-channel output scaling.

Every op is computed over a box of its OFM from the box of its IFM it reads (`conv2d_reads`),
so a stripe computed alone equals the same part of the whole op; the whole op is one box.
Accumulation runs as float64 matrix products: every partial sum of int8 x int8 products stays
far below 2^53, so the result is exact and BLAS makes MobileNet-sized layers take milliseconds.
"""

from __future__ import annotations

import numpy as np

from cascader.ir.boxes import Box
from cascader.ir.npu_ops import Conv2D, Padding
from cascader.reference.boxes import AxisRead, axis_read
from cascader.reference.scaling import apply_scale, output_stage, zero_point
from cascader.reference.windows import taps, upscale


def conv2d(op: Conv2D, ifm: np.ndarray) -> np.ndarray:
    """The whole OFM of a conv2d / depthwise_conv2d / fully_connected op over `ifm`."""
    whole = Box.whole(op.ofm.shape)
    read = conv2d_reads(op, whole)
    return conv2d_box(op, ifm.reshape(op.ifm.shape)[read.slices()], whole)


def _geometry(op: Conv2D, ofm_box: Box) -> tuple[Box, AxisRead, AxisRead, int]:
    """The IFM box an OFM box reads, its row and column reads, and the depth multiplier."""
    block_offset = op.ifm_offset or (0,) * 4
    block = op.ifm_region or op.ifm.shape
    factor = 1 if op.upscale == "NONE" else 2
    k = op.kernel
    (n0, y0, x0, c0), (n, h, w, c) = ofm_box.start, ofm_box.shape
    kh, kw = (k.height - 1) * k.dilation_h + 1, (k.width - 1) * k.dilation_w + 1
    zeros = op.upscale == "ZEROS"
    rows = axis_read(y0, h, k.stride_h, kh, op.padding.top, block[1], factor, zeros)
    cols = axis_read(x0, w, k.stride_w, kw, op.padding.left, block[2], factor, zeros)
    multiplier = 1
    channels = (0, block[3])
    if op.kind == "depthwise_conv2d":
        # OFM channel o reads IFM channel o // depth multiplier.
        multiplier = op.weights.shape[0] // block[3]
        channels = (c0 // multiplier, (c0 + c - 1) // multiplier + 1)
    offset = (n0, rows.ifm_start, cols.ifm_start, channels[0])
    shape = (n, rows.ifm_end - rows.ifm_start, cols.ifm_end - cols.ifm_start)
    box = Box(
        tuple(b + o for b, o in zip(block_offset, offset, strict=True)),
        (*shape, channels[1] - channels[0]),
    )
    return box, rows, cols, multiplier


def conv2d_reads(op: Conv2D, ofm_box: Box) -> Box:
    """The box of the IFM (in the op's view of its shape) an OFM box is computed from."""
    if op.kind == "fully_connected":
        return Box.whole(op.ifm.shape)
    return _geometry(op, ofm_box)[0]


def conv2d_box(op: Conv2D, ifm_box: np.ndarray, ofm_box: Box) -> np.ndarray:
    """The OFM box from the IFM box `conv2d_reads` names (and nothing else)."""
    x = ifm_box.astype(np.int64) - zero_point(op.ifm)
    weights = op.weights.astype(np.int64) - op.weight_zero_point
    if op.kind == "fully_connected":
        acc = _fully_connected(x, weights).reshape(op.ofm.shape)[ofm_box.slices()]
        channels = slice(ofm_box.start[-1], ofm_box.end[-1])
    else:
        read, rows, cols, multiplier = _geometry(op, ofm_box)
        if x.shape != read.shape:
            raise ValueError(f"{op.name}: IFM box {x.shape} given, {read.shape} needed")
        x = upscale(x, op.upscale)
        x = x[:, rows.crop : rows.crop + rows.length, cols.crop : cols.crop + cols.length, :]
        padding = Padding(rows.pad_before, cols.pad_before, rows.pad_after, cols.pad_after)
        channels = slice(ofm_box.start[3], ofm_box.end[3])
        if op.kind == "depthwise_conv2d":
            x = x[..., np.arange(channels.start, channels.stop) // multiplier - read.start[3]]
        acc = _spatial(op, x, weights[channels], padding, ofm_box.shape[1:3])
    acc = acc + op.biases[channels].astype(np.int64)
    multipliers = op.multipliers[channels].astype(np.int64)
    scaled = apply_scale(acc, multipliers, op.shifts[channels].astype(np.int64))
    return output_stage(scaled, op.ofm, op.activation).reshape(ofm_box.shape)


def _fully_connected(x: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Rows of the IFM flattened to the weights' input depth, as TFLite flattens them."""
    channels = weights.shape[0]
    rows = x.reshape(-1, weights.shape[-1]).astype(np.float64)
    return np.rint(rows @ weights.reshape(channels, -1).T.astype(np.float64)).astype(np.int64)


def _spatial(
    op: Conv2D, x: np.ndarray, weights: np.ndarray, padding: Padding, out_hw: tuple[int, int]
) -> np.ndarray:
    channels = weights.shape[0]
    if op.kind == "depthwise_conv2d":
        acc = np.zeros((x.shape[0], *out_hw, channels), np.int64)
        for ky, kx, view in taps(x, op.kernel, padding, out_hw):
            acc += view * weights[:, ky, kx, 0]
        return acc
    columns = np.concatenate(
        [view for _, _, view in taps(x, op.kernel, padding, out_hw)], axis=3
    ).astype(np.float64)
    flat = weights.reshape(channels, -1).T.astype(np.float64)  # (kh*kw*c, o): tap-major
    return np.rint(columns @ flat).astype(np.int64)
