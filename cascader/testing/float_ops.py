"""Float reference kernels with TFLite's semantics (padding, rounding of coordinates).

The model builder runs these on a calibration batch to choose activation ranges, and tests run
them on fresh inputs to check what an int8 runtime computes. Arrays are NHWC float64 with the
leading axis used as the sample axis, so one call evaluates a whole batch.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

Padding = Literal["SAME", "VALID"]
Pair = tuple[int, int]

FUSED_ACTIVATIONS = ("NONE", "RELU", "RELU6", "RELU_N1_TO_1")


def fused_activation(x: np.ndarray, name: str) -> np.ndarray:
    if name == "NONE":
        return x
    if name == "RELU":
        return np.maximum(x, 0.0)
    if name == "RELU6":
        return np.clip(x, 0.0, 6.0)
    if name == "RELU_N1_TO_1":
        return np.clip(x, -1.0, 1.0)
    raise ValueError(f"unknown fused activation {name!r}; expected one of {FUSED_ACTIVATIONS}")


def conv_padding(size: int, kernel: int, stride: int, dilation: int, padding: Padding) -> Pair:
    """(before, after) padding of one spatial axis, as TFLite computes it."""
    effective = (kernel - 1) * dilation + 1
    if padding == "VALID":
        return 0, 0
    out = math.ceil(size / stride)
    total = max((out - 1) * stride + effective - size, 0)
    return total // 2, total - total // 2


def conv_output_size(size: int, kernel: int, stride: int, dilation: int, padding: Padding) -> int:
    effective = (kernel - 1) * dilation + 1
    if padding == "SAME":
        return math.ceil(size / stride)
    return math.ceil((size - effective + 1) / stride)


def _windows(
    x: np.ndarray, kernel: Pair, stride: Pair, dilation: Pair, padding: Padding, fill: float = 0.0
) -> np.ndarray:
    """Strided, dilated kernel windows: (N, OH, OW, C, KH, KW)."""
    pads = [
        conv_padding(x.shape[1 + a], kernel[a], stride[a], dilation[a], padding) for a in (0, 1)
    ]
    padded = np.pad(x, ((0, 0), pads[0], pads[1], (0, 0)), constant_values=fill)
    extent = tuple((kernel[a] - 1) * dilation[a] + 1 for a in (0, 1))
    win = sliding_window_view(padded, extent, axis=(1, 2))
    return win[:, :: stride[0], :: stride[1], :, :: dilation[0], :: dilation[1]]


def conv2d(
    x: np.ndarray,
    weights: np.ndarray,
    bias: np.ndarray,
    stride: Pair,
    dilation: Pair,
    padding: Padding,
) -> np.ndarray:
    """weights: OHWI (TFLite CONV_2D layout)."""
    win = _windows(x, weights.shape[1:3], stride, dilation, padding)
    return np.einsum("nyxcij,oijc->nyxo", win, weights, optimize=True) + bias


def depthwise_conv2d(
    x: np.ndarray,
    weights: np.ndarray,
    bias: np.ndarray,
    stride: Pair,
    dilation: Pair,
    padding: Padding,
    depth_multiplier: int,
) -> np.ndarray:
    """weights: 1HW(C*M); output channel c*M+m reads input channel c."""
    kh, kw = weights.shape[1:3]
    channels = x.shape[3]
    win = _windows(x, (kh, kw), stride, dilation, padding)
    per_channel = weights.reshape(kh, kw, channels, depth_multiplier)
    out = np.einsum("nyxcij,ijcm->nyxcm", win, per_channel, optimize=True)
    return out.reshape(*out.shape[:3], channels * depth_multiplier) + bias


def transpose_conv2d(
    x: np.ndarray,
    weights: np.ndarray,
    bias: np.ndarray,
    output_hw: Pair,
    stride: Pair,
    padding: Padding,
) -> np.ndarray:
    """weights: OHWI. Each input pixel scatters a kernel-sized patch into the output."""
    n, h, w, _ = x.shape
    kh, kw = weights.shape[1:3]
    pads = [
        max((size_in - 1) * s + k - size_out, 0) // 2 if padding == "SAME" else 0
        for size_in, s, k, size_out in (
            (h, stride[0], kh, output_hw[0]),
            (w, stride[1], kw, output_hw[1]),
        )
    ]
    full_h = max((h - 1) * stride[0] + kh, pads[0] + output_hw[0])
    full_w = max((w - 1) * stride[1] + kw, pads[1] + output_hw[1])
    full = np.zeros((n, full_h, full_w, weights.shape[0]))
    for ky in range(kh):
        for kx in range(kw):
            patch = x @ weights[:, ky, kx, :].T
            full[
                :,
                ky : ky + (h - 1) * stride[0] + 1 : stride[0],
                kx : kx + (w - 1) * stride[1] + 1 : stride[1],
            ] += patch
    out = full[:, pads[0] : pads[0] + output_hw[0], pads[1] : pads[1] + output_hw[1]]
    return out + bias


def pool2d(
    x: np.ndarray, kind: Literal["MAX", "AVG"], pool: Pair, stride: Pair, padding: Padding
) -> np.ndarray:
    """TFLite pooling: padded positions are ignored (AVG divides by the valid count)."""
    win = _windows(x, pool, stride, (1, 1), padding, fill=np.nan)
    return np.nanmax(win, axis=(4, 5)) if kind == "MAX" else np.nanmean(win, axis=(4, 5))


def _source_coords(
    out_size: int, in_size: int, align_corners: bool, half_pixel_centers: bool
) -> tuple[np.ndarray, float]:
    scale = (in_size - 1) / (out_size - 1) if align_corners and out_size > 1 else in_size / out_size
    offset = 0.5 if half_pixel_centers else 0.0
    return np.arange(out_size) + offset, scale


def resize_bilinear(
    x: np.ndarray, size: Pair, align_corners: bool, half_pixel_centers: bool
) -> np.ndarray:
    out = x
    for axis, out_size in ((1, size[0]), (2, size[1])):
        in_size = x.shape[axis]
        pos, scale = _source_coords(out_size, in_size, align_corners, half_pixel_centers)
        src = pos * scale - (0.5 if half_pixel_centers else 0.0)
        lo = np.maximum(np.floor(src), 0).astype(int)
        hi = np.minimum(np.ceil(src), in_size - 1).astype(int)
        frac_shape = [1, 1, 1, 1]
        frac_shape[axis] = out_size
        frac = (src - lo).reshape(frac_shape)
        out = np.take(out, lo, axis=axis) * (1 - frac) + np.take(out, hi, axis=axis) * frac
    return out


def resize_nearest(
    x: np.ndarray, size: Pair, align_corners: bool, half_pixel_centers: bool
) -> np.ndarray:
    out = x
    for axis, out_size in ((1, size[0]), (2, size[1])):
        in_size = x.shape[axis]
        pos, scale = _source_coords(out_size, in_size, align_corners, half_pixel_centers)
        # TFLite rounds half away from zero here (coordinates are non-negative).
        src = np.floor(pos * scale + 0.5) if align_corners else np.floor(pos * scale)
        out = np.take(out, np.clip(src.astype(int), 0, in_size - 1), axis=axis)
    return out


def softmax(x: np.ndarray, beta: float) -> np.ndarray:
    e = np.exp(beta * (x - x.max(axis=-1, keepdims=True)))
    return e / e.sum(axis=-1, keepdims=True)


def hard_swish(x: np.ndarray) -> np.ndarray:
    return x * np.clip(x + 3.0, 0.0, 6.0) / 6.0


def leaky_relu(x: np.ndarray, alpha: float) -> np.ndarray:
    return np.where(x >= 0, x, alpha * x)


def logistic(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))
