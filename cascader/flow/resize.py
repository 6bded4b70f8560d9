"""RESIZE (nearest neighbour, bilinear) as NPU pooling over a nearest-upscaled IFM, as Vela does.

The NPU can read its IFM 2x nearest-upscaled. A 2^n resize becomes n-1 1x1 average pools that
each double the size, then a final op on one more doubling: a 1x1 average (nearest), an
f x f average (bilinear; padded bottom/right unless align_corners) or, for nearest with
align_corners, a depthwise conv whose one non-zero tap picks the neighbour. A same-size resize
is a copy; a 1x1 IFM is broadcast by adding it to zeros. Vela rounds resize averages NATURAL.
"""

from __future__ import annotations

import math

import numpy as np
from ethosu.vela.scaling import quantise_scale

from cascader.flow.npu_ops import (
    Activation,
    BinaryElementwise,
    Conv2D,
    Identity,
    Kernel,
    NpuOp,
    NpuTensor,
    Padding,
    Pooling,
    Quant,
)


class ResizeNotSupported(ValueError):
    """A resize Vela runs by other means (bilinear with half-pixel centres)."""


def upscale_factor(ifm_hw: tuple[int, int], ofm_hw: tuple[int, int], align_corners: bool) -> int:
    """Vela's single upscale factor: the larger of the H and W ratios."""
    if align_corners:
        ratios = [(o - 1) / (i - 1) if i != 1 else 1 for i, o in zip(ifm_hw, ofm_hw, strict=True)]
    else:
        ratios = [o / i for i, o in zip(ifm_hw, ofm_hw, strict=True)]
    return int(max(ratios))


def legalize_resize(
    name: str, ifm: NpuTensor, ofm: NpuTensor, bilinear: bool, align_corners: bool, half_pixel: bool
) -> list[NpuOp]:
    """The ops resizing NHWC `ifm` to `ofm` (named `name`)."""
    if ifm.shape == ofm.shape:
        return [Identity(name, "COPY" if ifm.quant == ofm.quant else "REQUANTIZE", ifm, ofm)]
    (ifm_h, ifm_w), (ofm_h, ofm_w) = ifm.shape[1:3], ofm.shape[1:3]
    if ifm_h == ifm_w == 1:
        zeros = NpuTensor(f"{name}_zeros", ofm.shape, Quant(1.0, 0), ifm.dtype)
        return [BinaryElementwise(name, "ADD", zeros, ifm, ofm, Activation(), ifm_scalar=0)]
    if bilinear and half_pixel:
        raise ResizeNotSupported("bilinear resize with half-pixel centres")
    factor = upscale_factor((ifm_h, ifm_w), (ofm_h, ofm_w), align_corners)
    factor_h = 1 if ofm_h == ifm_h == 1 else factor
    factor_w = 1 if ofm_w == ifm_w == 1 else factor
    ops: list[NpuOp] = []
    source = ifm
    h, w = ifm_h, ifm_w
    for step in range(int(math.log2(factor)) - 1):
        h, w = h * (2 if factor_h != 1 else 1), w * (2 if factor_w != 1 else 1)
        doubled = NpuTensor(f"{name}_x2_{step}", (1, h, w, ofm.shape[3]), ofm.quant, ofm.dtype)
        ops.append(_average(doubled.name, source, doubled, Kernel(1, 1), Padding()))
        source = doubled
    if bilinear:
        padding = Padding() if align_corners else Padding(0, 0, factor_h - 1, factor_w - 1)
        ops.append(_average(name, source, ofm, Kernel(factor_h, factor_w), padding))
    elif align_corners:
        ops.append(_nearest_tap(name, source, ofm, factor_h, factor_w))
    else:
        ops.append(_average(name, source, ofm, Kernel(1, 1), Padding()))
    return ops


def _average(name: str, ifm: NpuTensor, ofm: NpuTensor, kernel: Kernel, padding: Padding):
    return Pooling(
        name, "AVG", ifm, ofm, kernel, padding, Activation(), upscale="NEAREST", rounding="NATURAL"
    )


def _nearest_tap(name: str, ifm: NpuTensor, ofm: NpuTensor, factor_h: int, factor_w: int):
    """Depthwise conv with a single 1 below-right of the kernel centre (align_corners)."""
    channels = ofm.shape[3]
    weights = np.zeros((channels, factor_h, factor_w, 1), np.int8)
    weights[:, factor_h // 2, factor_w // 2, :] = 1
    multiplier, shift = quantise_scale(1.0)  # a nearest resize never rescales
    return Conv2D(
        name=name,
        kind="depthwise_conv2d",
        ifm=ifm,
        ofm=ofm,
        kernel=Kernel(factor_h, factor_w),
        padding=Padding(),
        weights=weights,
        weight_zero_point=0,
        biases=np.zeros(channels, np.int64),
        multipliers=np.full(channels, multiplier, np.int32),
        shifts=np.full(channels, shift, np.int32),
        activation=Activation(),
        upscale="NEAREST",
    )
