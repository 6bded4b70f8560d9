"""MEAN as NPU primitive ops, the way Vela 5.2 rewrites it.

Vela sums the reduced axes with depthwise convolutions of all-ones kernels into int32 (at most
64 kernel rows and 4096 kernel elements each; taller reductions read successive row blocks and
ADD the partial sums), then one MUL by an integer multiplier with an explicit shift does the
division and the requantisation, with the TFLite reference's rounding. A reduction over the
channel axis first views a 1xHx1xC or 1x1xWxC IFM as 1xHxCx1 / 1xWxCx1.
"""

from __future__ import annotations

import math

import numpy as np
from ethosu.vela.numeric_util import round_down_log2
from ethosu.vela.scaling import quantise_scale

from cascader.ir.npu_ops import (
    Activation,
    BinaryElementwise,
    Conv2D,
    Identity,
    Kernel,
    NpuOp,
    NpuTensor,
    Padding,
    Quant,
)

_MAX_KERNEL_ELEMENTS = 4096
_MAX_KERNEL_HEIGHT = 64


def _four_d(values: list, fill) -> list:
    return [fill] * (4 - len(values)) + list(values)


def mean_multiplier(ifm: Quant, ofm: Quant, elements: int) -> tuple[int, int]:
    """(multiplier, Vela shift) of the final MUL: ifm_scale / ofm_scale / elements, with the
    reference's shift clamping."""
    multiplier, vela_shift = quantise_scale(np.double(ifm.scale) / np.double(ofm.scale))
    reference_shift = 31 - vela_shift
    shift = min(round_down_log2(elements), 32, 31 + reference_shift)
    multiplier = int(np.int32((np.int64(multiplier) << shift) // elements))
    return multiplier, 31 - (reference_shift - shift)


def legalize_mean(name: str, ifm: NpuTensor, ofm: NpuTensor, axes: list[int]) -> list[NpuOp]:
    """The ops computing MEAN of `ifm` over `axes` into `ofm` (named `name`)."""
    rank = len(ifm.shape)
    reduce = _four_d([a in {x % rank for x in axes} for a in range(rank)], False)
    ifm_shape = _four_d(list(ifm.shape), 1)
    kept = [1 if reduce[a] else d for a, d in enumerate(ifm_shape)]
    if not any(r and d > 1 for r, d in zip(reduce, ifm_shape, strict=True)):
        operator = "COPY" if ifm.quant == ofm.quant else "REQUANTIZE"
        return [Identity(name, operator, ifm, ofm)]
    if reduce[3] and ifm_shape[3] > 1:
        drop = 2 if ifm_shape[2] == 1 else 1
        for shape in (reduce, ifm_shape, kept):
            del shape[drop]
        reduce.append(False)
        ifm_shape.append(1)
        kept.append(1)
    h = ifm_shape[1] if reduce[1] else 1
    w = ifm_shape[2] if reduce[2] else 1
    elements = h * w
    if h > _MAX_KERNEL_HEIGHT and elements <= _MAX_KERNEL_ELEMENTS and reduce[1] and reduce[2]:
        ifm_shape = [ifm_shape[0], 1, elements, ifm_shape[3]]
        h, w = 1, elements
    rows = min(_MAX_KERNEL_ELEMENTS // w, h, _MAX_KERNEL_HEIGHT)
    channels = ifm_shape[3]
    view = NpuTensor(ifm.name, tuple(ifm_shape), ifm.quant, ifm.dtype)
    sum_quant = Quant(ofm.quant.scale, ofm.quant.zero_point)
    ops: list[NpuOp] = []
    partial_sums = []
    for i in range(math.ceil(h / rows)):
        kernel_h = min(rows, h - i * rows)
        partial = NpuTensor(f"{name}_sum_{i}", tuple(kept), sum_quant, "int32")
        region = (1, kernel_h if reduce[1] else ifm_shape[1], w if reduce[2] else ifm_shape[2])
        ops.append(
            Conv2D(
                name=partial.name,
                kind="depthwise_conv2d",
                ifm=view,
                ofm=partial,
                kernel=Kernel(kernel_h, w),
                padding=Padding(),
                weights=np.ones((channels, kernel_h, w, 1), np.int8),
                weight_zero_point=0,
                biases=np.zeros(channels, np.int64),
                multipliers=np.ones(channels, np.int32),
                shifts=np.zeros(channels, np.int32),
                activation=Activation(),
                ifm_offset=(0, i * rows, 0, 0),
                ifm_region=(*region, channels),
            )
        )
        partial_sums.append(partial)
    total = partial_sums.pop()
    if partial_sums:
        # Vela adds the last two sums first, then each earlier sum to the running total.
        first, total = total, partial_sums.pop()
        partial_sums.append(first)
    while partial_sums:
        partial = partial_sums.pop()
        added = NpuTensor(f"{name}_add_{len(ops)}", tuple(kept), Quant(1.0, 0), "int32")
        ops.append(
            BinaryElementwise(
                added.name, "ADD", partial, total, added, Activation(), rescale=(1, 0)
            )
        )
        total = added
    multiplier, shift = mean_multiplier(ifm.quant, ofm.quant, elements)
    scalar = NpuTensor(f"{name}_scalar", (1, 1, 1, 1), Quant(1.0, 0), "int32")
    out = NpuTensor(name, tuple(kept), ofm.quant, ofm.dtype, ofm.layout)
    ops.append(
        BinaryElementwise(
            name,
            "MUL",
            total,
            scalar,
            out,
            Activation(),
            ifm2_scalar=multiplier,
            rescale=(1, shift),
        )
    )
    return ops
