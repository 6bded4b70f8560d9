"""NPU_OP_ELEMENTWISE: binary ADD, SUB, MUL, MIN, MAX, SHL, SHR and unary LRELU, ABS, CLZ.

Operands are the IFM and IFM2 (IFM2 broadcast along the axes IFM2_BROADCAST marks, or a
scalar from IFM2_SCALAR) minus their zero points; IFM2_BROADCAST's operand-order bit makes
IFM2 the first operand (A) and the IFM the second (B). The arithmetic is the reference's
(`cascader.reference.elementwise`), driven by the registers instead of quantisation scales:
- ADD/SUB: IFM_PRECISION's scale mode 0 computes A*OPA_SCALE +- B*OPB_SCALE; mode 1 rescales
  A by OPA_SCALE (multiplier, shift; IFM rounding) and shifts B left by 19 for 8-bit (14 for
  16-bit) operands, mode 2 the other way round; then OFM_SCALE.
- MUL: A*B, then OFM_SCALE; with a 32-bit operand only its shift (Vela's softmax products).
- MIN/MAX; SHL by B (0-31, saturating to int32); SHR by B (0-63) with the OFM rounding.
- LRELU: negative values times OFM_SCALE; ABS: |A| times OFM_SCALE; CLZ: leading zeros of A
  as a 32-bit word.
OFM_SCALE applies only with OFM_PRECISION's global-scale bit, which Vela sets for ADD, SUB,
MUL, LRELU and ABS. Vela's int8 streams use every mode but LRELU and ABS (it turns int8 leaky
ReLU into a LUT), so those two follow the scales Vela programs for them (alpha; IFM/OFM scale
ratio) without a Vela-output check.
"""

from __future__ import annotations

import numpy as np
from ethosu.vela.ethos_u55_regs.ethos_u55_regs import cmd1, elementwise_mode

import cascader.simulator.descriptors as d
from cascader.reference.scaling import INT32_MAX, INT32_MIN, apply_scale
from cascader.simulator.addressing import read_feature_map
from cascader.simulator.context import Access, OpContext
from cascader.simulator.output_stage import finish
from cascader.simulator.writeback import write_ofm

_UNARY = {elementwise_mode.LRELU.value, elementwise_mode.ABS.value, elementwise_mode.CLZ.value}
_UNSCALED_SHIFT = {1: 19, 2: 14}  # by operand bytes: the advanced scaling's implicit shift
_NAMES = {mode.value: mode.name for mode in elementwise_mode}


def _read(
    ctx: OpContext, name: str, shape: tuple[int, int, int]
) -> tuple[np.ndarray, d.FeatureMap]:
    fm = d.feature_map(ctx.regs, name, shape)
    values, addresses = read_feature_map(ctx.memory, fm, ctx.reporter)
    ctx.accesses.append(Access.of_elements(fm.region, False, addresses, fm.element_bytes, name))
    return values - fm.zero_point, fm


def _ifm2(
    ctx: OpContext, shape: tuple[int, int, int]
) -> tuple[np.ndarray, d.FeatureMap, d.Broadcast]:
    cast = d.broadcast(ctx.regs)
    if cast.scalar:
        fm = d.feature_map(ctx.regs, "IFM2", (1, 1, 1))
        value = d.ifm2_scalar(ctx.regs, fm.dtype) - fm.zero_point
        return np.full((1, 1, 1), value, np.int64), fm, cast
    h, w, c = shape
    values, fm = _read(
        ctx, "IFM2", (1 if cast.height else h, 1 if cast.width else w, 1 if cast.depth else c)
    )
    return values, fm, cast


def _add_sub(ctx: OpContext, a: np.ndarray, b: np.ndarray, sign: int, bytes_: int) -> np.ndarray:
    regs = ctx.regs
    mode = d.ifm_scale_mode(regs)
    opa = regs.value(cmd1.NPU_SET_OPA_SCALE)
    opa_shift = regs.cmd1_param(cmd1.NPU_SET_OPA_SCALE) & 0x3F
    if mode == 0:
        return a * opa + sign * (b * regs.value(cmd1.NPU_SET_OPB_SCALE))
    rounding = d.ifm_rounding(regs)
    shift = _UNSCALED_SHIFT.get(bytes_)
    if shift is None:
        raise d.Unsupported("advanced ADD/SUB scaling of 32-bit operands")
    if mode == 1:
        return apply_scale(a, opa, opa_shift, rounding) + sign * (b << shift)
    if mode == 2:
        return (a << shift) + sign * apply_scale(b, opa, opa_shift, rounding)
    raise d.Unsupported(f"NPU_SET_IFM_PRECISION scale mode {mode}")


def run_elementwise(ctx: OpContext, mode: int) -> None:
    regs = ctx.regs
    if mode not in _NAMES:
        raise d.Unsupported(f"NPU_OP_ELEMENTWISE mode {mode}")
    shape = d.ofm_shape(regs)
    if d.ifm_depth(regs) != shape[2]:
        raise d.Unsupported(f"elementwise IFM depth {d.ifm_depth(regs)} != OFM depth {shape[2]}")
    a, ifm = _read(ctx, "IFM", shape)
    rounding = d.ofm_rounding(regs)
    multiplier, shift = d.ofm_scale(regs)
    scale_output = d.global_scaling(regs)
    if mode in _UNARY:
        if mode == elementwise_mode.CLZ.value:
            bits = (a & 0xFFFFFFFF).astype(np.float64)
            result = 32 - np.frexp(bits)[1].astype(np.int64)
        elif mode == elementwise_mode.ABS.value:
            result = np.abs(a)
        else:  # LRELU: only negative values take the slope
            scaled = apply_scale(a, multiplier, shift, rounding) if scale_output else a
            result = np.where(a < 0, scaled, a)
            scale_output = False
    else:
        b, ifm2, cast = _ifm2(ctx, shape)
        if cast.reversed_operands:
            a, b = np.broadcast_to(b, shape), a
            first_bytes = ifm2.element_bytes
        else:
            b = np.broadcast_to(b, shape)
            first_bytes = ifm.element_bytes
        wide = "int32" in (ifm.dtype, ifm2.dtype)
        if mode == elementwise_mode.ADD.value:
            result = _add_sub(ctx, a, b, 1, first_bytes)
        elif mode == elementwise_mode.SUB.value:
            result = _add_sub(ctx, a, b, -1, first_bytes)
        elif mode == elementwise_mode.MUL.value:
            result = a * b
            if wide:
                multiplier = 1
        elif mode == elementwise_mode.MIN.value:
            result = np.minimum(a, b)
        elif mode == elementwise_mode.MAX.value:
            result = np.maximum(a, b)
        elif mode == elementwise_mode.SHL.value:
            result = np.clip(a << np.clip(b, 0, 31), INT32_MIN, INT32_MAX)
        else:  # SHR
            result = apply_scale(a, 1, np.clip(b, 0, 63), rounding)
    if scale_output:
        result = apply_scale(result, multiplier, shift, rounding)
    ofm = d.feature_map(regs, "OFM", shape)
    act = d.activation_setting(regs)
    write_ofm(ctx, ofm, finish(result, ofm, act, ctx))
