"""The order in which the NPU's weight decoder consumes weights, so a decoded stream can be
put back into OHWI.

For each block of OFM_BLK_DEPTH output channels, the IFM depth is walked in blocks (16 deep
for part-kernel-first or 16-bit IFMs, else 32; depthwise walks one micro-block), the kernel in
sub-kernels of at most 8x8 taps (8/dilation), and inside a sub-kernel:
- depth first: OFM micro-blocks, then kernel taps, then IFM micro-blocks, then one weight per
  (OFM channel, IFM channel) of the micro-blocks;
- part-kernel first: IFM micro-blocks outermost, then OFM micro-blocks, then taps (padded to a
  multiple of 4 for 8-bit, 2 for 16-bit IFMs), then the micro-block weights;
- depthwise: taps padded to a multiple of 4, one weight per OFM channel of the micro-block.
Positions past the real channels or taps carry padding weights (zero in Vela's streams).
Checked against `mlw_codec.reorder_encode`, the encoder Vela uses, in the tests.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cascader.memo import memo_function

_SUB_KERNEL = 8


@dataclass(frozen=True)
class WeightLayout:
    """Everything the traversal depends on, for one core's stream."""

    ofm_depth: int
    kernel_height: int
    kernel_width: int
    ifm_depth: int  # 1 for depthwise
    ofm_block_depth: int
    depthwise: bool
    part_kernel_first: bool
    ifm_bits: int
    dilation_y: int
    dilation_x: int
    ifm_ublock: int
    ofm_ublock: int


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def _chunk(layout: WeightLayout, oz: int, iz: int, sy: int, sx: int, ifm_block: int) -> np.ndarray:
    """Flat OHWI indices (or -1) of one (OFM block, IFM block, sub-kernel) chunk."""
    lay = layout
    cob = min(lay.ofm_block_depth, lay.ofm_depth - oz)
    if lay.depthwise:
        cib = lay.ifm_ublock
    elif lay.part_kernel_first:
        cib = min(ifm_block, lay.ifm_depth - iz)
    else:
        cib = ifm_block
    sub_h = min(lay.kernel_height - sy, _SUB_KERNEL // lay.dilation_y)
    sub_w = min(lay.kernel_width - sx, _SUB_KERNEL // lay.dilation_x)
    taps = sub_w * sub_h
    if lay.part_kernel_first:
        quantum = 2 if lay.ifm_bits == 16 else 4
        taps = _ceil(taps, quantum) * quantum
    elif lay.depthwise:
        taps = _ceil(taps, 4) * 4
    outer = _ceil(cib, lay.ifm_ublock) if lay.part_kernel_first else 1
    inner = 1 if lay.part_kernel_first else _ceil(cib, lay.ifm_ublock)
    per_ifm = 1 if lay.depthwise else lay.ifm_ublock
    u_out, ob, tap, u_in, o_z, i_z = np.meshgrid(
        np.arange(outer),
        np.arange(_ceil(cob, lay.ofm_ublock)),
        np.arange(taps),
        np.arange(inner),
        np.arange(lay.ofm_ublock),
        np.arange(per_ifm),
        indexing="ij",
    )
    kx, ky = tap % sub_w, tap // sub_w
    o = oz + ob * lay.ofm_ublock + o_z
    i = iz + (u_out + u_in) * lay.ifm_ublock + i_z
    valid = (ky < sub_h) & (o < oz + cob)
    depth = 1 if lay.depthwise else lay.ifm_depth
    if not lay.depthwise:
        valid &= i < lay.ifm_depth
        channel = i
    else:
        channel = np.zeros_like(i)
    flat = ((o * lay.kernel_height + sy + ky) * lay.kernel_width + sx + kx) * depth + channel
    return np.where(valid, flat, -1).reshape(-1)


@memo_function(256)
def stream_order(layout: WeightLayout) -> np.ndarray:
    """Flat OHWI index of each decoded weight of a stream, -1 for padding positions."""
    lay = layout
    ifm_block = 16 if lay.part_kernel_first or lay.ifm_bits == 16 else 32
    chunks = []
    for oz in range(0, lay.ofm_depth, lay.ofm_block_depth):
        for iz in range(0, 1 if lay.depthwise else lay.ifm_depth, ifm_block):
            for sy in range(0, lay.kernel_height, _SUB_KERNEL // lay.dilation_y):
                for sx in range(0, lay.kernel_width, _SUB_KERNEL // lay.dilation_x):
                    chunks.append(_chunk(lay, oz, iz, sy, sx, ifm_block))
    order = np.concatenate(chunks) if chunks else np.zeros(0, np.int64)
    order.setflags(write=False)
    return order
