"""NPU_OP_CONV and NPU_OP_DEPTHWISE: weights and scales from their streams, the IFM through
the window the registers describe, int64 accumulation, per-channel scaling, output stage.

Accumulation follows the project's reference (`cascader.reference.conv`): one strided view
of the padded IFM per kernel tap (`reference.windows.taps`), a float64 matrix product for
convolutions (exact: every partial sum stays far below 2^53) and a per-tap product for
depthwise. The accumulator gets the 40-bit bias, then the channel's multiplier and shift
with the rounding OFM_PRECISION selects (`reference.scaling.apply_scale`).
"""

from __future__ import annotations

import numpy as np
from ethosu.vela.ethos_u55_regs.ethos_u55_regs import cmd0

import cascader.simulator.descriptors as d
from cascader.reference.scaling import apply_scale
from cascader.reference.windows import taps
from cascader.simulator.context import Access, OpContext
from cascader.simulator.output_stage import finish
from cascader.simulator.weights import read_scaling, read_weights
from cascader.simulator.window import read_window
from cascader.simulator.writeback import write_ofm


def run_convolution(ctx: OpContext, depthwise: bool) -> bool:
    """Execute the operation; False (reported) when its weights or scales are unusable."""
    regs, config = ctx.regs, ctx.config
    oh, ow, oc = d.ofm_shape(regs)
    k = d.kernel(regs)
    cin = d.ifm_depth(regs)
    if depthwise and cin != oc:
        raise d.Unsupported(f"depthwise IFM depth {cin} differs from OFM depth {oc}")
    if depthwise and k.part_kernel_first:
        raise d.Unsupported("part-kernel-first traversal of a depthwise convolution")
    ifm_dtype = d.feature_map(regs, "IFM", (1, 1, 1)).dtype
    if ifm_dtype == "int32":
        raise d.Unsupported("a convolution over a 32-bit IFM")
    weight_streams = d.weight_streams(regs, config.cores)
    scale_streams = d.scale_streams(regs, config.cores)
    for stream in weight_streams:
        ctx.accesses.append(
            Access(stream.region, False, stream.address, stream.address + stream.length, "weights")
        )
    for stream in scale_streams:
        ctx.accesses.append(
            Access(stream.region, False, stream.address, stream.address + stream.length, "scales")
        )
    weights = read_weights(
        ctx.memory,
        weight_streams,
        (oc, k.height, k.width, 1 if depthwise else cin),
        regs.param(cmd0.NPU_SET_OFM_BLK_DEPTH_M1) + 1,
        depthwise,
        k.part_kernel_first,
        8 * np.dtype(ifm_dtype).itemsize,
        (k.dilation_y, k.dilation_x),
        (config.ifm_ublock_depth, config.ofm_ublock_depth),
        ctx.reporter,
    )
    scaling = read_scaling(ctx.memory, scale_streams, oc, ctx.reporter)
    if weights is None or scaling is None:
        return False
    window = read_window(ctx, cin)
    views = taps(window.values, window.kernel, window.padding, window.out_hw)
    if depthwise:
        acc = np.zeros((1, oh, ow, oc), np.int64)
        for ky, kx, view in views:
            acc += view * weights[:, ky, kx, 0]
    else:
        columns = np.concatenate([view for _, _, view in views], axis=3).astype(np.float64)
        flat = weights.reshape(oc, -1).T.astype(np.float64)
        acc = np.rint(columns @ flat).astype(np.int64)
    acc = acc[0] + scaling.biases
    scaled = apply_scale(acc, scaling.multipliers, scaling.shifts, d.ofm_rounding(regs))
    ofm = d.feature_map(regs, "OFM", (oh, ow, oc))
    act = d.activation_setting(regs)
    write_ofm(ctx, ofm, finish(scaled, ofm, act, ctx))
    return True
