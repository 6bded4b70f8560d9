"""NPU primitive ops as tensor expressions: a TE compute per op (what it computes, element by
element, in tvm.te), the op graph the scheduler tiles. Placeholders are in each tensor's
stored layout, a layout stage reads them as NHWC, the op runs in NHWC with int32/int64
arithmetic, a layout stage writes it back. The layout stages are the inline parts of the op:
its propagators (`cascader.ethosu.propagation`) already fold them in."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from tvm import te, tirx

from cascader.ir.layout import BRICK, stored_shape
from cascader.ir.npu_ops import (
    BinaryElementwise,
    Concatenation,
    Conv2D,
    Identity,
    Layout,
    NpuOp,
    NpuTensor,
    Pooling,
    UnaryElementwise,
    as_feature_maps,
    feature_inputs,
)


@dataclass(frozen=True)
class TeOp:
    """The TE of one NPU op: its placeholders by role (ifm, ifm2 and on for a
    concatenation's further inputs, weights, bias, multiplier, shift, lut) and its output in
    the OFM's stored layout."""

    inputs: dict[str, te.Tensor]
    output: te.Tensor


def _placeholder(tensor: NpuTensor, name: str) -> te.Tensor:
    return te.placeholder(stored_shape(tensor), tensor.dtype, name=name)


def _to_nhwc(data: te.Tensor, tensor: NpuTensor) -> te.Tensor:
    """Layout stage: a stored NHCWB16 tensor read as NHWC (or the NHWC tensor itself)."""
    if tensor.layout != Layout.NHCWB16:
        return data
    return te.compute(
        tensor.shape,
        lambda n, h, w, c: data[n, h, c // BRICK, w, c % BRICK],
        name=f"{data.op.name}_to_nhwc",
    )


def _to_stored(data: te.Tensor, tensor: NpuTensor) -> te.Tensor:
    """Layout stage: NHWC written in the tensor's stored layout (padding channels repeat the
    last channel; the NPU never reads them)."""
    if tensor.layout != Layout.NHCWB16:
        return data
    depth = tensor.shape[3]
    return te.compute(
        stored_shape(tensor),
        lambda n, h, cb, w, c: data[n, h, w, te.min(cb * BRICK + c, depth - 1)],
        name=f"{data.op.name}_to_nhcwb16",
    )


def _round_shift(value: tirx.PrimExpr, multiplier, shift) -> tirx.PrimExpr:
    """value * multiplier / 2**shift rounded half up, in 64 bits (the NPU's output scaling).
    `multiplier` and `shift` are per-channel expressions or Python ints."""
    product = (
        value.astype("int64") * tirx.const(multiplier, "int64")
        if isinstance(multiplier, int)
        else value.astype("int64") * multiplier.astype("int64")
    )
    if isinstance(shift, int):
        return (product + ((1 << shift) >> 1)) >> shift if shift else product
    shift = shift.astype("int64")
    half = te.if_then_else(shift > 0, tirx.const(1, "int64") << (shift - 1), tirx.const(0, "int64"))
    return (product + half) >> shift


def _rescale(value: tirx.PrimExpr, scale: float) -> tirx.PrimExpr:
    """value * scale rounded to the nearest integer (float scaling of copies and pools)."""
    return te.round(value.astype("float32") * tirx.const(scale, "float32")).astype("int32")


def _activate(value: tirx.PrimExpr, op: NpuOp, lut: te.Tensor | None) -> tirx.PrimExpr:
    """Clamp to the activation's range in the output type, or look the value up in the LUT."""
    activation = getattr(op, "activation", None)
    if activation is not None and activation.kind == "LUT" and lut is not None:
        index = te.max(te.min(value, 127), -128) + 128
        return lut[index].astype(op.ofm.dtype)
    if activation is not None and activation.kind == "CLAMP":
        low, high = activation.clamp_min, activation.clamp_max
    else:
        info = np.iinfo(op.ofm.dtype)
        low, high = int(info.min), int(info.max)
    return te.max(te.min(value, high), low).astype(op.ofm.dtype)


def _conv_te(op: Conv2D, inputs: dict[str, te.Tensor], ifm: te.Tensor) -> te.Tensor:
    k, p = op.kernel, op.padding
    _, height, width, _ = op.ifm.shape
    zero = op.ifm.quant.zero_point
    weights, wzp = inputs["weights"], op.weight_zero_point
    ry = te.reduce_axis((0, k.height), name="ry")
    rx = te.reduce_axis((0, k.width), name="rx")

    def tap(n, h, w, c):
        y = h * k.stride_h + ry * k.dilation_h - p.top
        x = w * k.stride_w + rx * k.dilation_w - p.left
        inside = te.all(y >= 0, y < height, x >= 0, x < width)
        return te.if_then_else(inside, ifm[n, y, x, c].astype("int32") - zero, 0)

    if op.kind == "depthwise_conv2d":
        acc = te.compute(
            op.ofm.shape,
            lambda n, h, w, c: te.sum(
                tap(n, h, w, c) * (weights[c, ry, rx, 0].astype("int32") - wzp), axis=[ry, rx]
            ),
            name="acc",
        )
    else:
        rc = te.reduce_axis((0, op.ifm.shape[3]), name="rc")
        acc = te.compute(
            op.ofm.shape,
            lambda n, h, w, c: te.sum(
                tap(n, h, w, rc) * (weights[c, ry, rx, rc].astype("int32") - wzp),
                axis=[ry, rx, rc],
            ),
            name="acc",
        )
    bias, mult, shift = inputs["bias"], inputs["multiplier"], inputs["shift"]
    zero_out = op.ofm.quant.zero_point
    return te.compute(
        op.ofm.shape,
        lambda n, h, w, c: _activate(
            (_round_shift(acc[n, h, w, c] + bias[c], mult[c], shift[c]) + zero_out).astype("int32"),
            op,
            inputs.get("lut"),
        ),
        name="ofm",
    )


def _pool_te(op: Pooling, inputs: dict[str, te.Tensor], ifm: te.Tensor) -> te.Tensor:
    k, p = op.kernel, op.padding
    _, height, width, depth = op.ifm.shape
    ry = te.reduce_axis((0, k.height), name="ry")
    rx = te.reduce_axis((0, k.width), name="rx")
    ifm_q, ofm_q = op.ifm.quant, op.ofm.quant
    lut = inputs.get("lut")

    def window(h, w):
        y, x = h * k.stride_h + ry - p.top, w * k.stride_w + rx - p.left
        return y, x, te.all(y >= 0, y < height, x >= 0, x < width)

    if op.pool_type == "SUM":  # over channels into one channel (softmax's sum)
        rc = te.reduce_axis((0, depth), name="rc")
        summed = te.compute(
            op.ofm.shape,
            lambda n, h, w, c: te.sum(ifm[n, h, w, rc].astype("int32") - ifm_q.zero_point, axis=rc),
            name="pooled",
        )
        return te.compute(op.ofm.shape, lambda *i: _activate(summed[i], op, lut), name="ofm")
    if op.pool_type == "MAX":
        low = int(np.iinfo(op.ifm.dtype).min)

        def peak(n, h, w, c):
            y, x, inside = window(h, w)
            return te.max(te.if_then_else(inside, ifm[n, y, x, c].astype("int32"), low),
                          axis=[ry, rx])  # fmt: skip

        pooled = te.compute(op.ofm.shape, peak, name="pooled")
        return te.compute(
            op.ofm.shape,
            lambda n, h, w, c: _activate(
                _rescale(pooled[n, h, w, c] - ifm_q.zero_point, ifm_q.scale / ofm_q.scale)
                + ofm_q.zero_point,
                op,
                lut,
            ),
            name="ofm",
        )

    def total(n, h, w, c):
        y, x, inside = window(h, w)
        value = ifm[n, y, x, c].astype("int32") - ifm_q.zero_point
        return te.sum(te.if_then_else(inside, value, 0), axis=[ry, rx])

    summed = te.compute(op.ofm.shape, total, name="pooled")

    def average(n, h, w, c):
        top, left = h * k.stride_h - p.top, w * k.stride_w - p.left
        rows = te.min(top + k.height, height) - te.max(top, 0)
        cols = te.min(left + k.width, width) - te.max(left, 0)
        mean = summed[n, h, w, c].astype("float32") / (rows * cols).astype("float32")
        scaled = te.round(mean * tirx.const(ifm_q.scale / ofm_q.scale, "float32"))
        return _activate(scaled.astype("int32") + ofm_q.zero_point, op, lut)

    return te.compute(op.ofm.shape, average, name="ofm")


_INT_OPERATORS = {
    "ADD": lambda a, b: a + b,
    "SUB": lambda a, b: a - b,
    "MUL": lambda a, b: a * b,
    "MIN": te.min,
    "MAX": te.max,
    "SHL": lambda a, b: a.astype("int64") << te.max(te.min(b, 63), 0).astype("int64"),
    "SHR": lambda a, b: a.astype("int64") >> te.max(te.min(b, 63), 0).astype("int64"),
}


def _binary_te(op: BinaryElementwise, inputs: dict[str, te.Tensor], ifm, ifm2) -> te.Tensor:
    """With an explicit `rescale` the op works on the raw integers and scales the result by
    (multiplier, shift); otherwise in real values with each tensor's scale."""
    combine = _INT_OPERATORS[op.operator]
    q1, q2, qo = op.ifm.quant, op.ifm2.quant, op.ofm.quant

    def operand(data, tensor, scalar, idx):
        if scalar is not None:
            return tirx.const(scalar, "int32")
        n, h, w, c = (0 if size == 1 else i for size, i in zip(tensor.shape, idx, strict=True))
        return data[n, h, w, c].astype("int32")

    def value(*idx):
        a = operand(ifm, op.ifm, op.ifm_scalar, idx)
        b = operand(ifm2, op.ifm2, op.ifm2_scalar, idx)
        if op.rescale is not None:
            mult, shift = op.rescale
            raw = combine(a - q1.zero_point, b - q2.zero_point)
            result = _round_shift(raw, int(mult), int(shift))
            return _activate(result.astype("int32") + qo.zero_point, op, inputs.get("lut"))
        ra = (a - q1.zero_point).astype("float32") * tirx.const(q1.scale, "float32")
        rb = (b - q2.zero_point).astype("float32") * tirx.const(q2.scale, "float32")
        real = combine(ra, rb) / tirx.const(qo.scale, "float32")
        return _activate(te.round(real).astype("int32") + qo.zero_point, op, inputs.get("lut"))

    return te.compute(op.ofm.shape, value, name="ofm")


def _unary_te(op: UnaryElementwise | Identity, inputs: dict[str, te.Tensor], ifm) -> te.Tensor:
    """CLZ counts leading zeros; a LUT or a requantizing copy rescales then clamps or looks up."""
    data = ifm if op.ifm.shape == op.ofm.shape else _reshaped(ifm, op.ifm, op.ofm.shape)
    if isinstance(op, UnaryElementwise) and op.operator == "CLZ":
        return te.compute(op.ofm.shape, lambda *i: tirx.clz(data[i].astype("int32")), name="ofm")
    qi, qo = op.ifm.quant, op.ofm.quant
    ratio = qi.scale / qo.scale if qo.scale and not np.isnan(qo.scale) else 1.0
    return te.compute(
        op.ofm.shape,
        lambda *i: _activate(
            _rescale(data[i].astype("int32") - qi.zero_point, ratio) + qo.zero_point,
            op,
            inputs.get("lut"),
        ),
        name="ofm",
    )


def _concatenation_te(op: Concatenation, ifms: list[te.Tensor]) -> te.Tensor:
    """Each input requantized into its channel slice: an output channel reads the input
    whose slice holds it, at the channel less the slice's offset."""
    qo = op.ofm.quant
    ends = [*op.offsets[1:], op.ofm.shape[3]]

    def value(n, h, w, c):
        found = None
        for tensor, data, offset, end in reversed(
            list(zip(op.ifms, ifms, op.offsets, ends, strict=True))
        ):
            qi = tensor.quant
            ratio = qi.scale / qo.scale if qo.scale and not np.isnan(qo.scale) else 1.0
            raw = data[n, h, w, c - offset].astype("int32") - qi.zero_point
            copied = _activate(_rescale(raw, ratio) + qo.zero_point, op, None)
            found = copied if found is None else te.if_then_else(c < end, copied, found)
        return found

    return te.compute(op.ofm.shape, value, name="ofm")


def _reshaped(data: te.Tensor, tensor: NpuTensor, shape: tuple[int, ...]) -> te.Tensor:
    """A reshape stage: the same elements in row-major order under a new shape."""
    strides = [math.prod(shape[i + 1 :]) for i in range(len(shape))]
    source = [math.prod(tensor.shape[i + 1 :]) for i in range(len(tensor.shape))]

    def element(*idx):
        flat = sum(i * s for i, s in zip(idx, strides, strict=True))
        return data[tuple((flat // s) % size for s, size in zip(source, tensor.shape, strict=True))]

    return te.compute(shape, element, name=f"{data.op.name}_reshaped")


def feature_roles(op: NpuOp) -> tuple[str, ...]:
    """The placeholder roles of the op's feature-map inputs in `feature_inputs` order: "ifm",
    "ifm2", then "ifm3" and on (a concatenation's further inputs)."""
    return tuple(f"ifm{slot + 1}" if slot else "ifm" for slot in range(len(feature_inputs(op))))


def te_compute(op: NpuOp, feature_maps: dict[str, te.Tensor] | None = None) -> TeOp:
    """The TE of an NPU op, its feature maps taken as 4-D. `feature_maps` (by role, see
    `feature_roles`: a producer's output in the stored layout) replace those placeholders,
    so that the ops of a plan form one TE graph."""
    op = as_feature_maps(op)
    given = feature_maps or {}
    inputs = {
        role: given[role] if role in given else _placeholder(tensor, role)
        for role, tensor in zip(feature_roles(op), feature_inputs(op), strict=True)
    }
    if isinstance(op, Concatenation):
        ifms = [
            _to_nhwc(inputs[role], t) for role, t in zip(feature_roles(op), op.ifms, strict=True)
        ]
        return TeOp(inputs, _to_stored(_concatenation_te(op, ifms), op.ofm))
    if isinstance(op, Conv2D):
        channels = op.ofm.shape[-1]
        inputs["weights"] = te.placeholder(op.weights.shape, "int8", name="weights")
        inputs["bias"] = te.placeholder((channels,), "int64", name="bias")
        inputs["multiplier"] = te.placeholder((channels,), "int32", name="multiplier")
        inputs["shift"] = te.placeholder((channels,), "int32", name="shift")
    activation = getattr(op, "activation", None)
    if activation is not None and activation.kind == "LUT":
        inputs["lut"] = te.placeholder((256,), activation.lut_dtype, name="lut")
    ifm = _to_nhwc(inputs["ifm"], op.ifm)
    if isinstance(op, Conv2D):
        out = _conv_te(op, inputs, ifm)
    elif isinstance(op, Pooling):
        out = _pool_te(op, inputs, ifm)
    elif isinstance(op, BinaryElementwise):
        out = _binary_te(op, inputs, ifm, _to_nhwc(inputs["ifm2"], op.ifm2))
    else:
        out = _unary_te(op, inputs, ifm)
    return TeOp(inputs, _to_stored(out, op.ofm))
