"""Swish as one table lookup. TFLite writes EfficientNet's swish as LOGISTIC then
MUL(x, sigmoid(x)); on int8 both ops are functions of x alone, so together they are one
256-entry table, computed here with the integer semantics of the two NPU ops (so the folded
op gives the very bytes the pair would). One pass that reads x once and writes the result,
where the pair reads x twice, writes the sigmoid and reads it back."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import numpy as np

from cascader.ir.npu_ops import (
    Activation,
    BinaryElementwise,
    NpuFunction,
    NpuOp,
    UnaryElementwise,
    feature_inputs,
)
from cascader.reference.elementwise import binary_elementwise

_ALL_INT8 = np.arange(-128, 128, dtype=np.int64)


def _is_sigmoid(op: NpuOp) -> bool:
    return (
        isinstance(op, UnaryElementwise)
        and op.operator == "LUT"
        and op.activation.function == "sigmoid"
        and (op.ifm.dtype, op.ofm.dtype) == ("int8", "int8")
    )


def _elementwise_mul(op: NpuOp) -> bool:
    """An int8 MUL of two same-shaped feature maps (no broadcast, no scalar)."""
    return (
        isinstance(op, BinaryElementwise)
        and op.operator == "MUL"
        and op.ifm_scalar is None
        and op.ifm2_scalar is None
        and op.ifm.shape == op.ifm2.shape == op.ofm.shape
        and (op.ifm.dtype, op.ifm2.dtype, op.ofm.dtype) == ("int8", "int8", "int8")
    )


def _swish_table(sigmoid: UnaryElementwise, mul: BinaryElementwise, x_first: bool) -> tuple:
    """mul(x, sigmoid(x)) for every int8 x, as the NPU computes the two ops."""
    s = np.asarray(sigmoid.activation.lut, np.int64)[_ALL_INT8 + 128]
    row = (1, 1, 1, len(_ALL_INT8))
    flat = replace(
        mul,
        ifm=replace(mul.ifm, shape=row),
        ifm2=replace(mul.ifm2, shape=row),
        ofm=replace(mul.ofm, shape=row),
    )
    a, b = (_ALL_INT8, s) if x_first else (s, _ALL_INT8)
    values = binary_elementwise(flat, a.reshape(row), b.reshape(row))
    return tuple(int(v) for v in values.reshape(-1))


def fold_swish(function: NpuFunction) -> NpuFunction:
    """The function with each sigmoid whose only reader is a MUL by the sigmoid's own input
    replaced, together with that MUL, by one LUT op named as the MUL."""
    readers = Counter(t.name for op in function.ops for t in feature_inputs(op))
    readers.update(function.outputs)
    producer = {op.ofm.name: op for op in function.ops}
    folded: dict[str, UnaryElementwise] = {}  # MUL name -> its replacement
    dropped: set[str] = set()  # sigmoid names
    for op in function.ops:
        if not _elementwise_mul(op):
            continue
        for x, s, x_first in ((op.ifm, op.ifm2, True), (op.ifm2, op.ifm, False)):
            sigmoid = producer.get(s.name)
            if sigmoid is None or not _is_sigmoid(sigmoid) or readers[s.name] != 1:
                continue
            if sigmoid.ifm.name != x.name or sigmoid.ifm.quant != x.quant:
                continue
            table = _swish_table(sigmoid, op, x_first)
            lut = Activation("LUT", lut=table, function="swish")
            folded[op.name] = UnaryElementwise(op.name, "LUT", x, op.ofm, lut)
            dropped.add(sigmoid.name)
            break
    if not folded:
        return function
    ops = tuple(
        folded.get(op.name, op)
        for op in function.ops
        if not (op.name in dropped and _is_sigmoid(op))
    )
    return replace(function, ops=ops)
