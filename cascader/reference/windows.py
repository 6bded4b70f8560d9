"""How kernel-based NPU ops read their IFM: 2x upscaled on read, padded, then one strided
view per kernel tap."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from cascader.ir.npu_ops import Kernel, Padding


def upscale(ifm: np.ndarray, mode: str) -> np.ndarray:
    """The NHWC IFM as the NPU reads it with IFM_UPSCALE: NEAREST repeats every element 2x2,
    ZEROS (transpose convolution) keeps each element top-left of a 2x2 cell of zeros."""
    if mode == "NONE":
        return ifm
    if mode == "NEAREST":
        return np.repeat(np.repeat(ifm, 2, axis=1), 2, axis=2)
    if mode == "ZEROS":
        n, h, w, c = ifm.shape
        out = np.zeros((n, 2 * h, 2 * w, c), ifm.dtype)
        out[:, ::2, ::2, :] = ifm
        return out
    raise ValueError(f"unknown IFM upscale mode {mode!r}")


def taps(
    ifm: np.ndarray,
    kernel: Kernel,
    padding: Padding,
    out_hw: tuple[int, int],
    fill: int | float = 0,
) -> Iterator[tuple[int, int, np.ndarray]]:
    """(ky, kx, view) per kernel tap: view[n, y, x, c] is the padded IFM element that tap
    multiplies for output (y, x). Padding holds `fill`: `padding.top`/`left` before the IFM,
    after it as much as the output extent needs (the bottom/right padding of a whole op, or of
    a stripe at the OFM's edge)."""
    n, h, w, c = ifm.shape
    oh, ow = out_hw
    need_h = (oh - 1) * kernel.stride_h + (kernel.height - 1) * kernel.dilation_h + 1
    need_w = (ow - 1) * kernel.stride_w + (kernel.width - 1) * kernel.dilation_w + 1
    bottom = max(need_h - padding.top - h, 0)
    right = max(need_w - padding.left - w, 0)
    padded = np.full((n, padding.top + h + bottom, padding.left + w + right, c), fill, ifm.dtype)
    padded[:, padding.top : padding.top + h, padding.left : padding.left + w, :] = ifm
    for ky in range(kernel.height):
        y0 = ky * kernel.dilation_h
        for kx in range(kernel.width):
            x0 = kx * kernel.dilation_w
            view = padded[
                :,
                y0 : y0 + (oh - 1) * kernel.stride_h + 1 : kernel.stride_h,
                x0 : x0 + (ow - 1) * kernel.stride_w + 1 : kernel.stride_w,
                :,
            ]
            yield ky, kx, view
