"""A mean's sum over H and W in two depthwise convolutions, rows first (the `row_sum_mean`
point option).

MEAN legalizes, as Vela does, to one depthwise convolution whose all-ones kernel covers the
whole H x W input, summing it into a 1 x 1 x C int32 tensor. That one output reads every input
row, so a schedule holds the mean's input whole; where it is among a network's largest tensors
(DS-CNN: every layer 25 x 10 x 64) that sets the schedule's floor. Summing each row first
(a 1 x W all-ones kernel into H x 1 x C int16, output row r reading input row r only) lets the
large input run in row stripes with the layers before it; an H x 1 all-ones kernel then sums
the row sums into the same int32 tensor, so the mean's final MUL and its result are unchanged.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from cascader.ir.npu_ops import Activation, Conv2D, Kernel, NpuFunction, NpuTensor, Padding, Quant

# The NPU's depthwise kernel is at most 64 rows tall (Vela's MEAN splits taller sums into row
# blocks); a row sum of W values of at most 255 in magnitude (zero point subtracted) fits
# int16 while W <= 128.
MAX_ROWS = 64
MAX_ROW_WIDTH = 128


def row_sum_means(function: NpuFunction) -> tuple[NpuFunction, dict[str, str]]:
    """The function with every whole-window int32 sum split rows first (`split_sum`), and
    which op each new op came from (by name); the function itself when none splits."""
    ops = []
    made: dict[str, str] = {}
    for op in function.ops:
        split = split_sum(op) if isinstance(op, Conv2D) else None
        if split is None:
            ops.append(op)
            continue
        ops.extend(split)
        made[split[0].name] = op.name
    if not made:
        return function, made
    return replace(function, ops=tuple(ops)), made


def split_sum(op: Conv2D) -> tuple[Conv2D, Conv2D] | None:
    """The row sums and the sum of the row sums that compute `op`, when it is an unscaled
    depthwise sum of an 8-bit 1 x H x W x C tensor with an all-ones kernel of its whole
    window (1 < H <= MAX_ROWS, W <= MAX_ROW_WIDTH) into 1 x 1 x 1 x C int32; else None."""
    if not _whole_window_sum(op):
        return None
    _, height, width, channels = op.ifm.shape
    rows = NpuTensor(f"{op.name}_rows", (1, height, 1, channels), Quant(1.0, 0), "int16")
    row_sums = _ones_sum(f"{op.name}_rows", op.ifm, rows, Kernel(1, width))
    return row_sums, _ones_sum(op.name, rows, op.ofm, Kernel(height, 1))


def _whole_window_sum(op: Conv2D) -> bool:
    shape = op.ifm.shape
    if op.kind != "depthwise_conv2d" or len(shape) != 4 or op.ofm.dtype != "int32":
        return False
    _, height, width, channels = shape
    return (
        op.ifm.dtype in ("int8", "uint8")
        and 1 < height <= MAX_ROWS
        and width <= MAX_ROW_WIDTH
        and op.ofm.shape == (1, 1, 1, channels)
        and (op.kernel.height, op.kernel.width) == (height, width)
        and op.kernel.dilation_h == op.kernel.dilation_w == 1
        and op.padding == Padding()
        and op.upscale == "NONE"
        and not any(op.ifm_offset)
        and op.ifm_region in ((), tuple(shape))
        and op.weight_zero_point == 0
        and op.weights.shape == (channels, height, width, 1)
        and bool(np.all(op.weights == 1))
        and not np.any(op.biases)
        and bool(np.all(op.multipliers == 1))
        and not np.any(op.shifts)
        and op.activation == Activation()
    )


def _ones_sum(name: str, ifm: NpuTensor, ofm: NpuTensor, kernel: Kernel) -> Conv2D:
    """An unscaled depthwise sum of each `kernel`-sized window of `ifm` into `ofm`."""
    channels = ifm.shape[-1]
    return Conv2D(
        name=name,
        kind="depthwise_conv2d",
        ifm=ifm,
        ofm=ofm,
        kernel=kernel,
        padding=Padding(),
        weights=np.ones((channels, kernel.height, kernel.width, 1), np.int8),
        weight_zero_point=0,
        biases=np.zeros(channels, np.int64),
        multipliers=np.ones(channels, np.int32),
        shifts=np.zeros(channels, np.int32),
        activation=Activation(),
    )
