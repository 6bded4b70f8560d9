"""Binary and unary elementwise ops with the input and output scaling Vela programs.

ADD/SUB (`generate_scaling_for_elementwise`): an explicit rescale or unknown scales mean no
input scaling and that output scale. Equal input scales use the "simplified" scaling (both
operands times an integer, then the output scale) when the output multiplier's low 12 bits are
zero, else the "advanced" one: the operand with the smaller scale is rescaled by
(OPA_SCALE, OPA_SHIFT) with TFL rounding, the other is shifted left by 19 (int8 inputs; the
left shift of 20 TFLite's ADD does, halved), and the sum takes the output scale.
MUL: the output scale is Vela's float32 `elementwise_mul_scale`; with a 32-bit operand the
64-bit product is only shifted (the multiplier is not applied), which is what Vela's softmax
relies on for its Q-format products (scale 0.5 = (2^30, 31) -> a rounding high multiply).
MIN/MAX/SHL/SHR and CLZ do no scaling.
"""

from __future__ import annotations

import numpy as np
from ethosu.vela import scaling

from cascader.ir.boxes import Box
from cascader.ir.npu_ops import BinaryElementwise, NpuTensor, UnaryElementwise
from cascader.reference.scaling import (
    INT32_MAX,
    INT32_MIN,
    apply_scale,
    output_stage,
    rounding_mode,
    zero_point,
)

_UNSCALED_SHIFT = {8: 19, 16: 14}  # the advanced scaling's implicit shift of the other operand


def _operand(tensor: NpuTensor, values: np.ndarray | None, scalar: int | None) -> np.ndarray:
    if scalar is not None:
        return np.full((1, 1, 1, 1), scalar - zero_point(tensor), np.int64)
    return values.astype(np.int64) - zero_point(tensor)


def _known(scale: float) -> bool:
    return not np.isnan(scale)


def _operand_box(tensor: NpuTensor, ofm: NpuTensor, ofm_box: Box) -> Box:
    """An operand's part of an OFM box: broadcast axes read their one element."""
    if len(tensor.shape) != len(ofm.shape):
        return Box.whole(tensor.shape)
    offset = tuple(0 if d == 1 else o for d, o in zip(tensor.shape, ofm_box.start, strict=True))
    shape = tuple(1 if d == 1 else s for d, s in zip(tensor.shape, ofm_box.shape, strict=True))
    return Box(offset, shape)


def binary_reads(op: BinaryElementwise, ofm_box: Box) -> tuple[Box | None, Box | None]:
    """The boxes of IFM and IFM2 an OFM box is computed from; None for a scalar operand."""
    return (
        None if op.ifm_scalar is not None else _operand_box(op.ifm, op.ofm, ofm_box),
        None if op.ifm2_scalar is not None else _operand_box(op.ifm2, op.ofm, ofm_box),
    )


def binary_elementwise(
    op: BinaryElementwise, ifm: np.ndarray | None, ifm2: np.ndarray | None
) -> np.ndarray:
    """The whole OFM of a binary op; a scalar operand's array may be None."""
    whole = Box.whole(op.ofm.shape)
    operands = [
        None if box is None else values.reshape(tensor.shape)[box.slices()]
        for box, values, tensor in zip(
            binary_reads(op, whole), (ifm, ifm2), (op.ifm, op.ifm2), strict=True
        )
    ]
    return binary_elementwise_box(op, operands[0], operands[1], whole)


def binary_elementwise_box(
    op: BinaryElementwise, ifm: np.ndarray | None, ifm2: np.ndarray | None, ofm_box: Box
) -> np.ndarray:
    """The OFM box from the operand boxes `binary_reads` names."""
    a = _operand(op.ifm, ifm, op.ifm_scalar)
    b = _operand(op.ifm2, ifm2, op.ifm2_scalar)
    a, b = np.broadcast_to(a, ofm_box.shape), np.broadcast_to(b, ofm_box.shape)
    mode = rounding_mode(op.rounding)
    if op.operator in ("ADD", "SUB"):
        result = _add_sub(op, a, b, mode)
    elif op.operator == "MUL":
        result = _mul(op, a, b, mode)
    elif op.operator == "MIN":
        result = np.minimum(a, b)
    elif op.operator == "MAX":
        result = np.maximum(a, b)
    elif op.operator == "SHL":
        result = np.clip(a << np.clip(b, 0, 31), INT32_MIN, INT32_MAX)
    elif op.operator == "SHR":
        # Softmax's final shift reaches 32 and more for long rows (1000 classes).
        result = apply_scale(a, 1, np.clip(b, 0, 63), mode)
    else:
        raise ValueError(f"{op.name}: unknown binary elementwise operator {op.operator!r}")
    return output_stage(result, op.ofm, op.activation).reshape(ofm_box.shape)


def _add_sub(op: BinaryElementwise, a: np.ndarray, b: np.ndarray, mode: str) -> np.ndarray:
    sign = 1 if op.operator == "ADD" else -1
    scales = (op.ifm.quant.scale, op.ifm2.quant.scale, op.ofm.quant.scale)
    if op.rescale is not None or not all(_known(s) for s in scales):
        multiplier, shift = op.rescale or (1, 0)
        return apply_scale(a + sign * b, multiplier, shift, mode)
    ifm_scale, ifm2_scale, ofm_scale = scales
    if ifm_scale == ifm2_scale:
        opa, opb, multiplier, shift = scaling.simplified_elementwise_add_sub_scale(*scales)
        if int(multiplier) & 0xFFF == 0:
            return apply_scale(a * int(opa) + sign * b * int(opb), multiplier, shift, mode)
    bits = 16 if op.ifm.dtype == "int16" else 8
    in_scale, in_shift, multiplier, shift, to_scale = scaling.advanced_elementwise_add_sub_scale(
        ifm_scale, ifm2_scale, ofm_scale, bits
    )
    if to_scale == scaling.OperandToScale.OPa:
        a, b = apply_scale(a, in_scale, in_shift, mode), b << _UNSCALED_SHIFT[bits]
    else:
        a, b = a << _UNSCALED_SHIFT[bits], apply_scale(b, in_scale, in_shift, mode)
    return apply_scale(a + sign * b, multiplier, shift, mode)


def _mul(op: BinaryElementwise, a: np.ndarray, b: np.ndarray, mode: str) -> np.ndarray:
    scales = (op.ifm.quant.scale, op.ifm2.quant.scale, op.ofm.quant.scale)
    if op.rescale is not None:
        multiplier, shift = op.rescale
    elif all(_known(s) for s in scales):
        multiplier, shift = scaling.elementwise_mul_scale(*scales)
    else:
        multiplier, shift = 1, 0
    if "int32" in (op.ifm.dtype, op.ifm2.dtype):
        multiplier = 1
    return apply_scale(a * b, multiplier, shift, mode)


def unary_elementwise(op: UnaryElementwise, ifm: np.ndarray) -> np.ndarray:
    """The whole OFM of a unary op."""
    return unary_elementwise_box(op, ifm.reshape(op.ifm.shape), Box.whole(op.ofm.shape))


def unary_reads(op: UnaryElementwise, ofm_box: Box) -> Box:
    return ofm_box


def unary_elementwise_box(op: UnaryElementwise, ifm: np.ndarray, ofm_box: Box) -> np.ndarray:
    """A table lookup indexed by the raw IFM value, or a count of leading zeros."""
    x = ifm.astype(np.int64)
    if op.operator == "LUT":
        table = np.asarray(op.activation.lut, np.int64)
        return table[np.clip(x, -128, 127) + 128].astype(np.dtype(op.ofm.dtype))
    if op.operator == "CLZ":
        bits = x.astype(np.int32).view(np.uint32).astype(np.float64)
        length = np.frexp(bits)[1].astype(np.int64)  # bit length: exact below 2^53
        return output_stage(32 - length, op.ofm, op.activation).reshape(ofm_box.shape)
    raise ValueError(f"{op.name}: unknown unary elementwise operator {op.operator!r}")
