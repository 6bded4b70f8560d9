"""NPU_OP_POOL: MAX, AVERAGE and REDUCE_SUM over the kernel window.

The IFM zero point is subtracted first (Vela programs 0 where it wants the stored values
averaged). MAX ignores padded positions. AVERAGE and REDUCE_SUM add the window (REDUCE_SUM
also every IFM channel, into one). An AVERAGE with padding (or without OFM_PRECISION's
global-scale bit) is divided by the hardware per output: scaled by the formula of
`ethosu.vela.scaling.quantise_pooling_scale` for the number of window elements inside the IFM
(TFLite's AVERAGE_POOL_2D averages real data only). With the global-scale bit, OFM_SCALE then
applies: Vela's Python core folds 1/elements of an unpadded average into it, and its C++ core
sets the bit with OFM_SCALE = (1, 0) for a padded one (so whether OFM_SCALE also applies after
a padded average is not observable on Vela's streams). MAX and REDUCE_SUM are scaled only
by OFM_SCALE, when the bit is set.
"""

from __future__ import annotations

import numpy as np
from ethosu.vela.ethos_u55_regs.ethos_u55_regs import pooling_mode
from ethosu.vela.scaling import quantise_pooling_scale

import cascader.simulator.descriptors as d
from cascader.reference.scaling import apply_scale
from cascader.reference.windows import taps
from cascader.simulator.context import OpContext
from cascader.simulator.output_stage import finish
from cascader.simulator.window import read_window
from cascader.simulator.writeback import write_ofm

_FAR_BELOW = -(1 << 40)  # a padded position never wins a MAX


def run_pooling(ctx: OpContext, mode: int) -> None:
    regs = ctx.regs
    oh, ow, oc = d.ofm_shape(regs)
    rounding = d.ofm_rounding(regs)
    if mode == pooling_mode.REDUCE_SUM.value:
        window = read_window(ctx, d.ifm_depth(regs))
        total = sum(
            view for _, _, view in taps(window.values, window.kernel, window.padding, window.out_hw)
        )
        result = total.sum(axis=3, keepdims=True)
        if oc != 1:
            raise d.Unsupported(f"REDUCE_SUM into {oc} OFM channels")
    elif mode == pooling_mode.MAX.value:
        window = read_window(ctx, oc)
        views = taps(window.values, window.kernel, window.padding, window.out_hw, _FAR_BELOW)
        result = None
        for _, _, view in views:
            result = view if result is None else np.maximum(result, view)
    elif mode == pooling_mode.AVERAGE.value:
        window = read_window(ctx, oc)
        result = sum(
            view for _, _, view in taps(window.values, window.kernel, window.padding, window.out_hw)
        )
        pad = d.padding(regs)
        if pad.top or pad.left or pad.bottom or pad.right or not d.global_scaling(regs):
            ones = np.ones((1, *window.values.shape[1:3], 1), np.int64)
            count = sum(
                view for _, _, view in taps(ones, window.kernel, window.padding, window.out_hw)
            )
            counts, where = np.unique(count, return_inverse=True)
            pairs = np.array([quantise_pooling_scale(int(n)) for n in counts], np.int64)
            scale = pairs[where.reshape(count.shape), 0]
            shift = pairs[where.reshape(count.shape), 1]
            result = apply_scale(result, scale, shift, rounding)
    else:
        raise d.Unsupported(f"NPU_OP_POOL mode {mode}")
    result = result[0]
    if d.global_scaling(regs):
        multiplier, shift = d.ofm_scale(regs)
        result = apply_scale(result, multiplier, shift, rounding)
    ofm = d.feature_map(regs, "OFM", (oh, ow, oc))
    act = d.activation_setting(regs)
    write_ofm(ctx, ofm, finish(result, ofm, act, ctx))
