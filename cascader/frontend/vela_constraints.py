"""Vela 5.2's NPU operator constraints, as predicates on plain shapes and integers.

The ranges are read from Vela's own `TFLiteSupportedOperators` class so they move with Vela;
the predicates restate its checks for the shapes a Relax composite exposes (Vela's checks take
its internal Operation objects, which we do not have at partition time).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from ethosu.vela.tflite_supported_operators import TFLiteSupportedOperators as _Vela
from ethosu.vela.utils import calc_resize_factor

Shape = Sequence[int]


def dims_in_range(*shapes: Shape) -> bool:
    """Every tensor dimension within Vela's [1, 65535]."""
    low, high = _Vela.tens_dim_range
    return all(low <= int(d) <= high for shape in shapes for d in shape)


def batch_is_one(shape: Shape) -> bool:
    return len(shape) < 4 or int(shape[0]) == 1


def strides_fit(stride_hw: Shape, ifm: Shape, ofm: Shape) -> bool:
    """Vela's stride rule for conv2d and avg pool: H in [1,3] (unless OFM H is 1); W in [1,3]
    or a larger W stride it can rewrite by resizing the IFM width (unless OFM W is 1)."""
    stride_h, stride_w = (int(s) for s in stride_hw)
    h_ok = int(ofm[1]) == 1 or 1 <= stride_h <= 3
    optimized = calc_resize_factor(int(ifm[2]), stride_w)[1] if stride_w > 1 else stride_w
    w_ok = int(ofm[2]) == 1 or (stride_w >= 1 and optimized <= 3)
    return h_ok and w_ok


def strides_within(stride_hw: Shape, low: int = 1, high: int = 3) -> bool:
    return all(low <= int(s) <= high for s in stride_hw)


def dilated_kernel_fits(kernel_hw: Shape, dilation_hw: Shape) -> bool:
    """Dilated kernel height in [1, 64] and dilated area in [1, 4096]."""
    dh = (int(kernel_hw[0]) - 1) * int(dilation_hw[0]) + 1
    dw = (int(kernel_hw[1]) - 1) * int(dilation_hw[1]) + 1
    h_low, h_high = _Vela.dilated_height_range
    p_low, p_high = _Vela.dilated_product_range
    return h_low <= dh <= h_high and p_low <= dh * dw <= p_high


def weight_sums_fit(weights_ohwi: np.ndarray, zero_point: int = 0) -> bool:
    """Per output channel, the sum of |w - zp| within Vela's accumulator-safe limit."""
    values = weights_ohwi.astype(np.int64) - zero_point
    per_channel = np.abs(values).reshape(values.shape[0], -1).sum(axis=1)
    return int(per_channel.max(initial=0)) <= _Vela.weights_limit


def depth_multiplier_fits(ifm_channels: int, ofm_channels: int) -> bool:
    """Depthwise: any whole depth multiplier. Vela 5.2 runs multipliers > 1 over several IFM
    channels on the NPU too (its Python checker only allowed a single IFM channel)."""
    return ofm_channels % ifm_channels == 0


def max_pool_kernel_fits(kernel_hw: Shape) -> bool:
    h_low, h_high = _Vela.filter_height_range
    p_low, p_high = _Vela.filter_product_range
    kh, kw = int(kernel_hw[0]), int(kernel_hw[1])
    return h_low <= kh <= h_high and p_low <= kh * kw <= p_high


def avg_pool_fits(kernel_hw: Shape, stride_hw: Shape, padded: bool, ifm: Shape, ofm: Shape) -> bool:
    """Avg pool: SAME padding limits the kernel to 8x8 (W may equal its stride) and the W stride
    to 3; VALID padding allows the large max-pool kernel range."""
    if not strides_fit(stride_hw, ifm, ofm):
        return False
    kh, kw = int(kernel_hw[0]), int(kernel_hw[1])
    if padded:
        low, high = _Vela.filter_range
        w_ok = low <= kw <= high or int(stride_hw[1]) == kw
        return w_ok and low <= kh <= high and int(stride_hw[1]) <= 3
    return max_pool_kernel_fits(kernel_hw)


def broadcast_fits(ifm: Shape, ifm2: Shape, ofm: Shape) -> bool:
    """Broadcasting only along dimensions of size 1, from either input."""
    size = min(len(ifm), len(ifm2))
    if size == 0:
        return True
    for i, i2, o in zip(ifm[-size:], ifm2[-size:], ofm[-size:], strict=True):
        if not (i == i2 or i == 1 or i2 == 1) or o != max(i, i2):
            return False
    return True


def mean_fits(ifm: Shape, axes: Sequence[int]) -> bool:
    """Reduced-area product (int8) and reduced width/depth limits."""
    rank = len(ifm)
    axes = sorted(a % rank for a in axes)
    if int(np.prod([int(ifm[a]) for a in axes])) > _Vela.mean_kernel_product_int8:
        return False
    limit = _Vela.mean_reduced_axis_max_size
    width_axis = 2 if rank >= 4 else 1
    if width_axis in axes and int(ifm[width_axis]) > limit:
        return False
    return not (rank - 1 in axes and int(ifm[-1]) > limit)


def resize_fits(ifm: Shape, ofm: Shape, align_corners: bool, half_pixel: bool) -> bool:
    """Resize by 1x/2x/4x/8x (equal in H and W), or from 1x1, or identity."""
    if align_corners and half_pixel:
        return False
    ih, iw, oh, ow = int(ifm[1]), int(ifm[2]), int(ofm[1]), int(ofm[2])
    if (ih == 1 and iw == 1) or tuple(ifm) == tuple(ofm):
        return True
    if align_corners:
        fh = (oh - 1) / (ih - 1) if ih != 1 else 1.0
        fw = (ow - 1) / (iw - 1) if iw != 1 else 1.0
    else:
        fh, fw = oh / ih, ow / iw
    allowed = (1.0, 2.0, 4.0, 8.0)
    if fh not in allowed or fw not in allowed:
        return False
    if half_pixel and not (fh == 2.0 and fw == 2.0):
        return False
    if oh != 1 and ow != 1:
        return fh == fw
    return (fh == ih == 1) or (fw == iw == 1)


def transpose_conv_fits(stride_hw: Shape, kernel_hw: Shape, ifm: Shape, ofm: Shape) -> bool:
    """Strides 1x1 or 2x2 (2x1 for a 1-high IFM and kernel); OFM = IFM*stride (SAME) or
    IFM*stride + max(k - stride, 0) (VALID)."""
    sh, sw = int(stride_hw[0]), int(stride_hw[1])
    kh, kw = int(kernel_hw[0]), int(kernel_hw[1])
    stride_ok = (sh, sw) in ((1, 1), (2, 2)) or (
        (sh, sw) == (1, 2) and int(ifm[1]) == 1 and kh == 1
    )
    same = int(ofm[1]) == int(ifm[1]) * sh and int(ofm[2]) == int(ifm[2]) * sw
    valid = int(ofm[1]) == int(ifm[1]) * sh + max(kh - sh, 0) and int(ofm[2]) == int(
        ifm[2]
    ) * sw + max(kw - sw, 0)
    return stride_ok and (same or valid)


def pad_fits(pad_width: Sequence[int], rank: int) -> bool:
    """Pads of rank 3 or 4 tensors, never along the batch axis."""
    return rank in (3, 4) and (rank == 3 or int(pad_width[0]) == int(pad_width[1]) == 0)
