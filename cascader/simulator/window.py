"""The IFM of a kernel operation (convolution, depthwise, pooling) as the NPU reads it.

There are no IFM width/height registers: the NPU reads the IFM rows the OFM needs, (OFM_H - 1)
* stride + dilated kernel height, of which PAD_TOP rows before the IFM and PAD_BOTTOM rows
after it are padding (likewise for columns). With IFM_UPSCALE those rows are of the 2x
upscaled IFM (each element repeated for NEAREST, zeros inserted after it for TRANSPOSE), so
the stored IFM has half of them, rounded up. Padding and inserted elements are the IFM zero
point, i.e. 0 once it is subtracted.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import cascader.simulator.descriptors as d
from cascader.ir.npu_ops import Kernel, Padding
from cascader.reference.windows import upscale
from cascader.simulator.addressing import read_feature_map
from cascader.simulator.context import Access, OpContext


@dataclass(frozen=True)
class Window:
    """The upscaled, zero-point-free IFM (1, H, W, C) and how the kernel slides over it."""

    values: np.ndarray
    kernel: Kernel
    padding: Padding
    out_hw: tuple[int, int]
    ifm: d.FeatureMap


def _extent(out: int, extent: int, stride: int, before: int, after: int, factor: int) -> int:
    logical = (out - 1) * stride + extent - before - after
    if logical <= 0:
        raise d.Unsupported(f"padding {before}+{after} leaves no IFM to read")
    return logical


def read_window(ctx: OpContext, channels: int) -> Window:
    """Read the IFM of `channels` channels the current kernel operation uses."""
    oh, ow, _ = d.ofm_shape(ctx.regs)
    k = d.kernel(ctx.regs)
    pad = d.padding(ctx.regs)
    mode = d.upscale(ctx.regs)
    factor = 1 if mode == "NONE" else 2
    if factor > 1 and (k.stride_x, k.stride_y) != (1, 1):
        raise d.Unsupported("IFM upscaling with a kernel stride above 1")
    rows = _extent(oh, k.dilated_height, k.stride_y, pad.top, pad.bottom, factor)
    cols = _extent(ow, k.dilated_width, k.stride_x, pad.left, pad.right, factor)
    shape = (-(-rows // factor), -(-cols // factor), channels)
    ifm = d.feature_map(ctx.regs, "IFM", shape)
    values, addresses = read_feature_map(ctx.memory, ifm, ctx.reporter)
    ctx.accesses.append(Access.of_elements(ifm.region, False, addresses, ifm.element_bytes, "IFM"))
    x = upscale(values[None] - ifm.zero_point, mode)[:, :rows, :cols, :]
    return Window(
        values=x,
        kernel=Kernel(k.height, k.width, k.stride_y, k.stride_x, k.dilation_y, k.dilation_x),
        padding=Padding(pad.top, pad.left, pad.bottom, pad.right),
        out_hw=(oh, ow),
        ifm=ifm,
    )
