"""MAX, AVG and SUM pooling, with the NPU's two ways of averaging.

Without padding Vela programs one global OFM scale, (2^(31+k) + 2^k) / elements with the IFM to
OFM rescale folded in (`generate_ofm_scaling_for_pooling`); with padding it leaves the scale to
the hardware, which scales each output by the same formula for the number of kernel elements
inside the IFM, so edge outputs average only real data, as TFLite's AVERAGE_POOL_2D does.
Vela decides per stripe (a stripe away from the OFM's edges has no padding and takes the
global scale); the formula makes both agree. SUM is the NPU's
REDUCE_SUM: over the window and all channels.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from ethosu.vela.numeric_util import round_away_zero, round_up_to_int
from ethosu.vela.scaling import quantise_pooling_scale

from cascader.ir.boxes import Box
from cascader.ir.npu_ops import Kernel, Padding, Pooling
from cascader.reference.boxes import AxisRead, axis_read
from cascader.reference.scaling import apply_scale, output_stage, zero_point
from cascader.reference.windows import taps, upscale

_FAR_BELOW = -(1 << 40)  # MAX pooling padding: never the maximum


def pooling(op: Pooling, ifm: np.ndarray) -> np.ndarray:
    """The whole OFM of a pooling op over `ifm`."""
    whole = Box.whole(op.ofm.shape)
    read = pooling_reads(op, whole)
    return pooling_box(op, ifm.reshape(op.ifm.shape)[read.slices()], whole)


def _geometry(op: Pooling, ofm_box: Box) -> tuple[Box, AxisRead, AxisRead]:
    factor = 1 if op.upscale == "NONE" else 2
    k = op.kernel
    (n0, y0, x0, c0), (n, h, w, c) = ofm_box.start, ofm_box.shape
    _, height, width, depth = op.ifm.shape
    rows = axis_read(
        y0, h, k.stride_h, (k.height - 1) * k.dilation_h + 1, op.padding.top, height, factor
    )
    cols = axis_read(
        x0, w, k.stride_w, (k.width - 1) * k.dilation_w + 1, op.padding.left, width, factor
    )
    channels = (0, depth) if op.pool_type == "SUM" else (c0, c0 + c)
    shape = (n, rows.ifm_end - rows.ifm_start, cols.ifm_end - cols.ifm_start)
    offset = (n0, rows.ifm_start, cols.ifm_start, channels[0])
    box = Box(offset, (*shape, channels[1] - channels[0]))
    return box, rows, cols


def pooling_reads(op: Pooling, ofm_box: Box) -> Box:
    """The box of the IFM (in the op's view of its shape) an OFM box is computed from."""
    return _geometry(op, ofm_box)[0]


def pooling_box(op: Pooling, ifm_box: np.ndarray, ofm_box: Box) -> np.ndarray:
    """The OFM box from the IFM box `pooling_reads` names (and nothing else)."""
    read, rows, cols = _geometry(op, ofm_box)
    if ifm_box.shape != read.shape:
        raise ValueError(f"{op.name}: IFM box {ifm_box.shape} given, {read.shape} needed")
    x = ifm_box.astype(np.int64)
    if op.pool_type != "AVG":
        x = x - zero_point(op.ifm)
    x = upscale(x, op.upscale)
    x = x[:, rows.crop : rows.crop + rows.length, cols.crop : cols.crop + cols.length, :]
    padding = Padding(rows.pad_before, cols.pad_before, rows.pad_after, cols.pad_after)
    out_hw = ofm_box.shape[1:3]
    if op.pool_type == "MAX":
        result = None
        for _, _, view in taps(x, op.kernel, padding, out_hw, _FAR_BELOW):
            result = view if result is None else np.maximum(result, view)
        return output_stage(result, op.ofm, op.activation).reshape(ofm_box.shape)
    total = sum(view for _, _, view in taps(x, op.kernel, padding, out_hw))
    if op.pool_type == "SUM":
        total = total.sum(axis=3, keepdims=True)
        return output_stage(total, op.ofm, op.activation).reshape(ofm_box.shape)
    return _average(op, total, x.shape[1:3], padding, out_hw).reshape(ofm_box.shape)


def _average(
    op: Pooling,
    total: np.ndarray,
    in_hw: tuple[int, int],
    padding: Padding,
    out_hw: tuple[int, int],
) -> np.ndarray:
    """Vela runs average pools with both zero points 0 (`use_zero_point_0`): the NPU averages
    the stored values, as TFLite's AVERAGE_POOL_2D does, and ties round in that space."""
    if padding.top + padding.left + padding.bottom + padding.right:
        ones = np.ones((1, *in_hw, 1), np.int64)
        count = sum(view for _, _, view in taps(ones, op.kernel, padding, out_hw))
        counts, where = np.unique(count, return_inverse=True)
        pairs = np.array([quantise_pooling_scale(int(n)) for n in counts], np.int64)
        scale, shift = pairs[where, 0].reshape(count.shape), pairs[where, 1].reshape(count.shape)
    else:
        scale, shift = global_pooling_scale(op.kernel, op.ifm.quant.scale, op.ofm.quant.scale)
    average = apply_scale(total, scale, shift, op.rounding)
    ofm = replace(op.ofm, quant=replace(op.ofm.quant, zero_point=0))
    return output_stage(average, ofm, op.activation)


def global_pooling_scale(kernel: Kernel, ifm_scale: float, ofm_scale: float) -> tuple[int, int]:
    """Vela's OFM scale and shift for an unpadded average pool (its concat/requantize case)."""
    elements = kernel.height * kernel.width
    rescale = 1.0 if ifm_scale == ofm_scale or np.isnan(ifm_scale) else ifm_scale / ofm_scale
    rescale_bits = 0
    if elements == 1 and rescale > 1:
        rescale_bits = len(bin(round_up_to_int(rescale))) - 2 + 1
    elif elements == 1 and rescale < 1:
        rescale_bits = -(len(bin(round_up_to_int(1 / rescale))) - 2 - 1)
    scale, shift = quantise_pooling_scale(elements, rescale_bits)
    return int(round_away_zero(scale * np.double(rescale))), shift
