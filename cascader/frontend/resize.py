"""RESIZE (nearest neighbour, bilinear) as NPU pooling over a nearest-upscaled IFM, as Vela does.

The NPU can read its IFM 2x nearest-upscaled. A 2^n resize becomes n-1 1x1 average pools that
each double the size, then a final op on one more doubling: a 1x1 average (nearest), an
f x f average (bilinear; padded bottom/right unless align_corners) or, for nearest with
align_corners, a depthwise conv whose one non-zero tap picks the neighbour. A same-size resize
is a copy; a 1x1 IFM is broadcast by adding it to zeros. Vela rounds resize averages NATURAL.
A 2x bilinear resize with half-pixel centres is four depthwise convolutions, one per output
phase, over the edge-padded IFM.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
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
    Pooling,
    Quant,
)

# Half-pixel 2x bilinear: an even output row (column) weighs its IFM row above 1/4 and its own
# 3/4, an odd one its own 3/4 and the one below 1/4, edge rows repeated. The 2x2 taps are in
# 32nds (sum 32) so that the NPU's first (doubling) rounding is exact and the one that remains
# rounds half away from zero, as TFLite's integer resize does.
_HALF_PIXEL_TAPS = (np.array([1, 3]), np.array([3, 1]))
_HALF_PIXEL_SCALE = 1 / 32


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
        return _half_pixel_bilinear_x2(name, ifm, ofm)
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


def _half_pixel_bilinear_x2(name: str, ifm: NpuTensor, ofm: NpuTensor) -> list[NpuOp]:
    """Vela's rewrite of a 2x half-pixel bilinear resize: the IFM padded by one repeated edge
    row and column on every side, then one 2x2 depthwise conv per output phase (row parity a,
    column parity b). Vela writes each phase straight into the OFM with doubled strides; here
    each phase is copied into its block of the OFM viewed as (H, 2W, 2C) (the same bytes as
    (2H, 2W, C)), then viewed back. Unlike Vela it does not first requantize the IFM to the
    OFM's quantisation: TFLite's int8 kernel does not either."""
    _, h, w, c = ifm.shape
    padded = NpuTensor(f"{name}_edge_padded", (1, h + 2, w + 2, c), ifm.quant, ifm.dtype)
    ops: list[NpuOp] = list(_edge_pad(padded.name, ifm, padded))
    phases = NpuTensor(f"{name}_phases", (1, h, 2 * w, 2 * c), ofm.quant, ofm.dtype)
    multiplier, shift = quantise_scale(_HALF_PIXEL_SCALE)
    # TFLite interpolates the stored integers whatever the two quantisations: the convs see
    # zero points of 0, so they round the same sums and write the same bytes.
    raw = Quant(ifm.quant.scale, 0)
    for a in (0, 1):
        for b in (0, 1):
            phase = NpuTensor(f"{name}_phase{a}{b}", (1, h, w, c), ofm.quant, ofm.dtype)
            taps = 2 * np.outer(_HALF_PIXEL_TAPS[a], _HALF_PIXEL_TAPS[b]).astype(np.int8)
            ops.append(
                Conv2D(
                    name=phase.name,
                    kind="depthwise_conv2d",
                    ifm=replace(padded, quant=raw),
                    ofm=replace(phase, quant=raw),
                    kernel=Kernel(2, 2),
                    padding=Padding(),
                    weights=np.broadcast_to(taps[None, :, :, None], (c, 2, 2, 1)).copy(),
                    weight_zero_point=0,
                    biases=np.zeros(c, np.int64),
                    multipliers=np.full(c, multiplier, np.int32),
                    shifts=np.full(c, shift, np.int32),
                    activation=Activation(),
                    ifm_offset=(0, a, b, 0),
                    ifm_region=(1, h + 1, w + 1, c),
                )
            )
            ops.append(
                Identity(
                    f"{name}_phase{a}{b}_write",
                    "COPY",
                    phase,
                    phases,
                    region=phase.shape,
                    ofm_offset=(0, 0, a * w, b * c),
                )
            )
    ops.append(Identity(name, "RESHAPE", phases, ofm))
    return ops


def _edge_pad(name: str, ifm: NpuTensor, padded: NpuTensor) -> list[Identity]:
    """Copies that surround `ifm` by one repeat of its edge rows, then of its edge columns."""
    _, h, w, c = ifm.shape
    rows = NpuTensor(f"{name}_rows", (1, h + 2, w, c), ifm.quant, ifm.dtype)
    row, column = (1, 1, w, c), (1, h + 2, 1, c)
    return [
        Identity(f"{rows.name}_0", "COPY", ifm, rows, region=ifm.shape, ofm_offset=(0, 1, 0, 0)),
        Identity(f"{rows.name}_1", "COPY", ifm, rows, region=row, ofm_offset=(0, 0, 0, 0)),
        Identity(
            f"{rows.name}_2",
            "COPY",
            ifm,
            rows,
            region=row,
            ifm_offset=(0, h - 1, 0, 0),
            ofm_offset=(0, h + 1, 0, 0),
        ),
        Identity(f"{name}_0", "COPY", rows, padded, region=rows.shape, ofm_offset=(0, 0, 1, 0)),
        Identity(f"{name}_1", "COPY", rows, padded, region=column, ofm_offset=(0, 0, 0, 0)),
        Identity(
            f"{name}_2",
            "COPY",
            rows,
            padded,
            region=column,
            ifm_offset=(0, 0, w - 1, 0),
            ofm_offset=(0, 0, w + 1, 0),
        ),
    ]
