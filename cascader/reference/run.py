"""Run legalized NPU functions through the integer reference; and single
ops one OFM box (stripe) at a time, from exactly the input boxes that box reads.

Tensors live in an environment keyed by name, as the legalized ops name them; an op reads a
tensor under its own view of the shape (softmax and mean read reshaped views, elided reshapes
leave the producer's name), so every read reshapes the stored array. Boxes are in the op's view
of each tensor, NHWC.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from cascader.ir.boxes import Box
from cascader.ir.npu_ops import (
    BinaryElementwise,
    Concatenation,
    Conv2D,
    Identity,
    NpuFunction,
    NpuOp,
    Pooling,
    UnaryElementwise,
)
from cascader.reference.conv import conv2d, conv2d_box, conv2d_reads
from cascader.reference.elementwise import (
    binary_elementwise,
    binary_elementwise_box,
    binary_reads,
    unary_elementwise,
    unary_elementwise_box,
    unary_reads,
)
from cascader.reference.identity import identity, identity_box, identity_reads
from cascader.reference.pooling import pooling, pooling_box, pooling_reads


class ReferenceError(ValueError):
    """A model or function the reference cannot run (missing inputs, host ops)."""


def _read(env: Mapping[str, np.ndarray], name: str, op: NpuOp) -> np.ndarray:
    if name not in env:
        raise ReferenceError(f"{op.name}: reads {name!r} before anything produced it")
    return env[name]


def run_op(op: NpuOp, env: dict[str, np.ndarray]) -> np.ndarray:
    """Compute `op` from the tensors in `env`, store its OFM there under its name, return it."""
    if isinstance(op, Conv2D):
        out = conv2d(op, _read(env, op.ifm.name, op))
    elif isinstance(op, Pooling):
        out = pooling(op, _read(env, op.ifm.name, op))
    elif isinstance(op, BinaryElementwise):
        a = None if op.ifm_scalar is not None else _read(env, op.ifm.name, op)
        b = None if op.ifm2_scalar is not None else _read(env, op.ifm2.name, op)
        out = binary_elementwise(op, a, b)
    elif isinstance(op, UnaryElementwise):
        out = unary_elementwise(op, _read(env, op.ifm.name, op))
    elif isinstance(op, Identity):
        out = identity(op, _read(env, op.ifm.name, op), env.get(op.ofm.name))
    elif isinstance(op, Concatenation):
        out = None
        for copy in op.copies:
            out = identity(copy, _read(env, copy.ifm.name, op), out)
    else:
        raise ReferenceError(f"no reference for {type(op).__name__}")
    env[op.ofm.name] = out
    return out


def op_reads(op: NpuOp, ofm_box: Box) -> tuple[Box | None, ...]:
    """Per feature-map input (IFM, then IFM2 of a binary op), the box of it, in the op's view
    of its shape, that the OFM box is computed from; None for a scalar operand."""
    if isinstance(op, Conv2D):
        return (conv2d_reads(op, ofm_box),)
    if isinstance(op, Pooling):
        return (pooling_reads(op, ofm_box),)
    if isinstance(op, BinaryElementwise):
        return binary_reads(op, ofm_box)
    if isinstance(op, UnaryElementwise):
        return (unary_reads(op, ofm_box),)
    if isinstance(op, Identity):
        return (identity_reads(op, ofm_box),)
    if isinstance(op, Concatenation):
        return tuple(identity_reads(copy, ofm_box) for copy in op.copies)
    raise ReferenceError(f"no reference for {type(op).__name__}")


def run_op_box(op: NpuOp, inputs: Sequence[np.ndarray | None], ofm_box: Box) -> np.ndarray:
    """One box (stripe) of the op's OFM from exactly the input boxes `op_reads` names."""
    if isinstance(op, Conv2D):
        return conv2d_box(op, inputs[0], ofm_box)
    if isinstance(op, Pooling):
        return pooling_box(op, inputs[0], ofm_box)
    if isinstance(op, BinaryElementwise):
        return binary_elementwise_box(op, inputs[0], inputs[1], ofm_box)
    if isinstance(op, UnaryElementwise):
        return unary_elementwise_box(op, inputs[0], ofm_box)
    if isinstance(op, Identity):
        return identity_box(op, inputs[0], ofm_box)
    if isinstance(op, Concatenation):
        return _concatenation_box(op, inputs, ofm_box)
    raise ReferenceError(f"no reference for {type(op).__name__}")


def _concatenation_box(
    op: Concatenation, inputs: Sequence[np.ndarray | None], ofm_box: Box
) -> np.ndarray:
    """An OFM box of a concatenation: each copy writes the part of the box in its slice."""
    out = np.zeros(ofm_box.shape, np.dtype(op.ofm.dtype))
    for copy, values in zip(op.copies, inputs, strict=True):
        slice_box = Box(copy.ofm_offset, tuple(copy.region))
        inside = slice_box.intersect(ofm_box)
        if inside.empty:
            continue
        local = Box(tuple(i - o for i, o in zip(inside.start, ofm_box.start, strict=True)),
                    inside.shape)  # fmt: skip
        out[local.slices()] = identity_box(copy, values, inside)
    return out


def run_function(
    function: NpuFunction, inputs: Sequence[np.ndarray] | Mapping[str, np.ndarray]
) -> list[np.ndarray]:
    """The function's outputs, in its output order, for inputs given in its input order or
    by name."""
    if not isinstance(inputs, Mapping):
        if len(inputs) != len(function.inputs):
            raise ReferenceError(
                f"{function.name}: {len(inputs)} inputs given, {len(function.inputs)} expected"
            )
        inputs = dict(zip(function.inputs, inputs, strict=True))
    env = {name: np.asarray(inputs[name]) for name in function.inputs}
    for op in function.ops:
        run_op(op, env)
    return [_read(env, name, function.ops[-1]) for name in function.outputs]
