"""NPU primitive ops as tensor expressions: a TE compute per op (what it computes, element by
element, in tvm.te) and the explicit Propagators the cascader uses to map an output stripe to
the input stripes it reads, with the op's stripe-align hint.

Propagators are written in NHWC and composed with the layout-transform matrices when a tensor
is NHCWB16 (5-D: N, H, C/16, W, 16), so one affine map covers the op and its layout stages.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
from tvm import te, tirx

from cascader.core.propagator import Propagator
from cascader.flow.npu_ops import (
    BinaryElementwise,
    Conv2D,
    Identity,
    Layout,
    NpuOp,
    NpuTensor,
    Pooling,
    UnaryElementwise,
)

SCALE_BIAS_BYTES = 10  # per output channel: 40-bit bias, 32-bit multiplier, 6-bit shift (packed)
SUBKERNEL_LIMIT = (8, 8)  # the NPU splits larger kernels into sub-kernels of at most 8 x 8
BRICK = 16

# (n, h, w, c) -> (n, h, c/16, w, 16): one row per NHCWB16 axis, homogeneous column last.
NHWC_TO_NHCWB16 = np.array(
    [
        [1, 0, 0, 0, 0],
        [0, 1, 0, 0, 0],
        [0, 0, 0, 1 / BRICK, 0],
        [0, 0, 1, 0, 0],
        [0, 0, 0, 0, BRICK],
        [0, 0, 0, 0, 1],
    ],
    dtype=np.float64,
)


# (n, h, c/16, w, 16) -> (n, h, w, c). A stripe of k bricks holds 16 k channels; the last brick
# of a tensor whose depth is not a multiple of 16 is partly empty, which clipping to the tensor
# accounts for. (TVM's matrix subtracts the empty part from every stripe, so a stripe of the
# first bricks of such a tensor read too few channels.)
NHCWB16_TO_NHWC = np.array(
    [
        [1, 0, 0, 0, 0, 0],
        [0, 1, 0, 0, 0, 0],
        [0, 0, 0, 1, 0, 0],
        [0, 0, BRICK, 0, 0, 0],
        [0, 0, 0, 0, 0, 1],
    ],
    dtype=np.float64,
)


@dataclass(frozen=True)
class OpPropagation:
    """Per input (in part-input order) its propagator, plus the output stripe-align hint."""

    propagators: tuple[Propagator, ...]
    stripe_align_hint: tuple[int, ...]


def dilated_kernel(op: Conv2D | Pooling) -> tuple[int, int]:
    k = op.kernel
    return (k.height - 1) * k.dilation_h + 1, (k.width - 1) * k.dilation_w + 1


def subkernels(op: NpuOp) -> int:
    """How many sub-kernels the NPU splits the op's kernel into (each re-reads the input)."""
    if not isinstance(op, Conv2D | Pooling):
        return 1
    kh, kw = dilated_kernel(op)
    return math.ceil(kh / SUBKERNEL_LIMIT[0]) * math.ceil(kw / SUBKERNEL_LIMIT[1])


def _constant_rows(values: list[int], out_dims: int) -> np.ndarray:
    """A transform needing a fixed extent per input axis whatever the output stripe is."""
    matrix = np.zeros((len(values) + 1, out_dims + 1))
    matrix[:-1, -1] = values
    matrix[-1, -1] = 1
    return matrix


def _in_layout(matrix: np.ndarray, tensor: NpuTensor) -> np.ndarray:
    return NHWC_TO_NHCWB16 @ matrix if tensor.layout == Layout.NHCWB16 else matrix


def _out_layout(matrix: np.ndarray, ofm: NpuTensor) -> np.ndarray:
    return matrix @ NHCWB16_TO_NHWC if ofm.layout == Layout.NHCWB16 else matrix


def _feature_map_propagator(
    nhwc: np.ndarray, tensor: NpuTensor, ofm: NpuTensor, offset: tuple[int, ...] = (0, 0, 0, 0)
) -> Propagator:
    """`nhwc` maps an NHWC output stripe to the NHWC input stripe; `offset` is where output
    element 0 reads (minus the padding, plus the block an op reads at an offset)."""
    matrix = _in_layout(_out_layout(nhwc, ofm), tensor)
    n, h, w, c = offset
    stored = [n, h, c // BRICK, w, 0] if tensor.layout == Layout.NHCWB16 else [n, h, w, c]
    return Propagator(matrix.tolist(), stored)


def _constant_propagator(nhwc: np.ndarray, ofm: NpuTensor) -> Propagator:
    matrix = _out_layout(nhwc, ofm)
    return Propagator(matrix.tolist(), [0] * (matrix.shape[0] - 1))


def _window(op: Conv2D | Pooling, depth_row: list[float]) -> np.ndarray:
    """NHWC input rows of a sliding window: extent = stride * out + (kernel - stride). An op
    reading its IFM 2x upscaled runs at stride 1 over the upscaled rows, so it reads half as
    many IFM rows: out / 2 + (kernel + pad % 2) / 2 covers every start parity (see
    `_window_offset` for the matching start)."""
    kh, kw = dilated_kernel(op)
    k, p = op.kernel, op.padding
    if op.upscale != "NONE":
        rows = [0, 1 / 2, 0, 0, (kh + p.top % 2) / 2]
        cols = [0, 0, 1 / 2, 0, (kw + p.left % 2) / 2]
    else:
        rows = [0, k.stride_h, 0, 0, kh - k.stride_h]
        cols = [0, 0, k.stride_w, 0, kw - k.stride_w]
    return np.array([[1, 0, 0, 0, 0], rows, cols, depth_row, [0, 0, 0, 0, 1]], dtype=np.float64)


def _window_offset(op: Conv2D | Pooling) -> tuple[int, int, int, int]:
    """Where output element 0's window starts in the IFM: before it by the padding (half of
    it, rounded up, over an upscaled IFM), after it by the block's offset (MEAN's row blocks
    each read their own rows)."""
    p = op.padding
    top, left = (-(-p.top // 2), -(-p.left // 2)) if op.upscale != "NONE" else (p.top, p.left)
    n, y, x, c = getattr(op, "ifm_offset", ()) or (0, 0, 0, 0)
    return (n, y - top, x - left, c)


def _elementwise_rows(tensor: NpuTensor) -> np.ndarray:
    """Identity over NHWC, except broadcast axes (size 1) which always read their one element."""
    matrix = np.zeros((5, 5))
    for axis, size in enumerate(tensor.shape):
        matrix[axis, 4 if size == 1 else axis] = 1
    matrix[4, 4] = 1
    return matrix


def op_propagation(op: NpuOp, output_quantum: tuple[int, ...]) -> OpPropagation:
    """Propagators of an NPU op's inputs: [ifm, weights, scale_bias] for convolutions,
    [ifm, ifm2] for binary elementwise, [ifm] otherwise. The stripe-align hint is the output
    quantum: stripes aligned to the smallest block the NPU writes waste no work."""
    ofm = op.ofm
    hint = tuple(output_quantum)
    if any(reads_through_view(op, t) for t in _feature_inputs(op)):
        whole = tuple(reshape_propagator(t, ofm) for t in _feature_inputs(op))
        return OpPropagation(whole + _weight_propagators(op), hint)
    if isinstance(op, Conv2D):
        depthwise = op.kind == "depthwise_conv2d"
        ifm_depth = op.ifm.shape[-1]
        depth_row = [0, 0, 0, 1, 0] if depthwise else [0, 0, 0, 0, ifm_depth]
        ifm = _feature_map_propagator(_window(op, depth_row), op.ifm, ofm, _window_offset(op))
        return OpPropagation((ifm, *_weight_propagators(op)), hint)
    if isinstance(op, Pooling):
        # SUM reduces every IFM channel into its one output channel.
        depth_row = [0, 0, 0, 0, op.ifm.shape[-1]] if op.pool_type == "SUM" else [0, 0, 0, 1, 0]
        window = _window(op, depth_row)
        return OpPropagation(
            (_feature_map_propagator(window, op.ifm, ofm, _window_offset(op)),), hint
        )
    if isinstance(op, BinaryElementwise):
        return OpPropagation(
            tuple(_feature_map_propagator(_elementwise_rows(t), t, ofm) for t in (op.ifm, op.ifm2)),
            hint,
        )
    if isinstance(op, UnaryElementwise) or (isinstance(op, Identity) and op.ifm.shape == ofm.shape):
        return OpPropagation((_feature_map_propagator(np.eye(5), op.ifm, ofm),), hint)
    return OpPropagation((reshape_propagator(op.ifm, ofm),), (1,) * len(ofm.shape))


def _stored_box(
    offset: tuple[int, ...], shape: tuple[int, ...], tensor: NpuTensor
) -> tuple[np.ndarray, np.ndarray]:
    """An NHWC box of `tensor` as (start, shape) in its stored layout."""
    if tensor.layout != Layout.NHCWB16:
        return np.array(offset), np.array(shape)
    (n0, h0, w0, c0), (n, h, w, c) = offset, shape
    first, last = c0 // BRICK, -(-(c0 + c) // BRICK)
    return np.array([n0, h0, first, w0, 0]), np.array([n, h, last - first, w, BRICK])


def propagate_box(
    propagator: Propagator,
    offset: tuple[int, ...],
    shape: tuple[int, ...],
    ofm: NpuTensor,
    ifm: NpuTensor,
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(offset, shape) of the NHWC box of `ifm` that a propagator says the NHWC box (offset,
    shape) of `ofm` reads: the affine map of the box's start (rounded down) and shape (rounded
    up) in the stored layouts, clipped to the tensor. This is how a stripe's position maps,
    beside the stripe shape the cascader propagates."""
    start, size = _stored_box(offset, shape, ofm)
    linear = propagator.transform[:-1, :-1]
    shift = propagator.transform[:-1, -1]
    eps = 1e-9  # 1/2 and 1/16 are exact in binary, but a sum of products may not be
    first = np.floor(linear @ start + eps).astype(np.int64) + np.array(propagator.offset)
    count = np.ceil(linear @ size + shift - eps).astype(np.int64)
    full = np.array(stored_shape(ifm))
    lo = np.clip(first, 0, full)
    hi = np.maximum(np.clip(first + count, 0, full), lo)
    if ifm.layout != Layout.NHCWB16:
        return tuple(int(v) for v in lo), tuple(int(v) for v in hi - lo)
    c0, c1 = int(lo[2]) * BRICK, min(int(hi[2]) * BRICK, ifm.shape[3])
    return (
        (int(lo[0]), int(lo[1]), int(lo[3]), c0),
        (int(hi[0] - lo[0]), int(hi[1] - lo[1]), int(hi[3] - lo[3]), max(c1 - c0, 0)),
    )


def _feature_inputs(op: NpuOp) -> tuple[NpuTensor, ...]:
    return (op.ifm, op.ifm2) if isinstance(op, BinaryElementwise) else (op.ifm,)


def _weight_propagators(op: NpuOp) -> tuple[Propagator, ...]:
    """A convolution's weights (all of each output channel's) and scale-bias bytes."""
    if not isinstance(op, Conv2D):
        return ()
    _, kh, kw, i = op.weights.shape
    weights = np.array(
        [[0, 0, 0, 1, 0], [0, 0, 0, 0, kh], [0, 0, 0, 0, kw], [0, 0, 0, 0, i], [0, 0, 0, 0, 1]],
        dtype=np.float64,
    )
    bias = np.array([[0, 0, 0, 1, 0], [0, 0, 0, 0, SCALE_BIAS_BYTES], [0, 0, 0, 0, 1]],
                    dtype=np.float64)  # fmt: skip
    return (_constant_propagator(weights, op.ofm), _constant_propagator(bias, op.ofm))


def reads_through_view(op: NpuOp, tensor: NpuTensor) -> bool:
    """Whether `op` reads `tensor` under another shape than the tensor has: softmax's channel
    max reads its (1, H, W, C) input as (1, H*W, C, 1), its SUB the (1, H*W, 1, 1) maxima as
    (1, H, W, 1), a fully connected layer a 4-D input as one row. The graph gives such inputs
    their producer's shape, in which the op's window is no affine map, so the op reads all
    of it."""
    shape = tensor.shape
    if isinstance(op, BinaryElementwise | UnaryElementwise) or (
        isinstance(op, Identity) and shape == op.ofm.shape
    ):
        return any(s not in (o, 1) for s, o in zip(shape, op.ofm.shape, strict=True))
    if not isinstance(op, Conv2D | Pooling):
        return False
    block = (getattr(op, "ifm_region", ()) or shape)[1:]
    start = (getattr(op, "ifm_offset", ()) or (0, 0, 0, 0))[1:]
    if any(o + b > s for o, b, s in zip(start, block, shape[1:], strict=True)):
        return True
    factor = 1 if op.upscale == "NONE" else 2
    k, p = op.kernel, op.padding
    kh, kw = dilated_kernel(op)
    need_h = (op.ofm.shape[1] - 1) * k.stride_h + kh - p.top - p.bottom
    need_w = (op.ofm.shape[2] - 1) * k.stride_w + kw - p.left - p.right
    if need_h > factor * block[0] or need_w > factor * block[1]:
        return True
    depth, out_depth = block[2], op.ofm.shape[3]
    if isinstance(op, Pooling):
        return op.pool_type != "SUM" and depth != out_depth
    if op.kind == "depthwise_conv2d":
        return out_depth % depth != 0
    return op.weights.shape[3] != depth


def reshape_propagator(ifm: NpuTensor, ofm: NpuTensor) -> Propagator:
    """A reshape reads its whole input for any output stripe (element order is not affine)."""
    return Propagator(
        _constant_rows(list(stored_shape(ifm)), len(stored_shape(ofm))).tolist(),
        [0] * len(stored_shape(ifm)),
    )


def stored_shape(tensor: NpuTensor) -> tuple[int, ...]:
    """The shape of a tensor as laid out in memory: NHCWB16 is (N, H, ceil(C/16), W, 16)."""
    if tensor.layout == Layout.NHCWB16:
        n, h, w, c = tensor.shape
        return (n, h, math.ceil(c / BRICK), w, BRICK)
    return tuple(tensor.shape)


# ---- TE computes ----------------------------------------------------------------------------
# The op graph the scheduler tiles: placeholders in each tensor's stored layout, a layout stage
# to NHWC, the op in NHWC with int32/int64 arithmetic, a layout stage back. The layout stages
# are the inline parts of the op: the propagators above already fold them in.


@dataclass(frozen=True)
class TeOp:
    """The TE of one NPU op: its placeholders by role (ifm, ifm2, weights, bias, multiplier,
    shift, lut) and its output in the OFM's stored layout."""

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


def _reshaped(data: te.Tensor, tensor: NpuTensor, shape: tuple[int, ...]) -> te.Tensor:
    """A reshape stage: the same elements in row-major order under a new shape."""
    strides = [math.prod(shape[i + 1 :]) for i in range(len(shape))]
    source = [math.prod(tensor.shape[i + 1 :]) for i in range(len(tensor.shape))]

    def element(*idx):
        flat = sum(i * s for i, s in zip(idx, strides, strict=True))
        return data[tuple((flat // s) % size for s, size in zip(source, tensor.shape, strict=True))]

    return te.compute(shape, element, name=f"{data.op.name}_reshaped")


def feature_map(tensor: NpuTensor) -> NpuTensor:
    """A tensor as a 4-D NHWC/NHCWB16 feature map: lower ranks gain leading unit axes."""
    if len(tensor.shape) == 4:
        return tensor
    return replace(tensor, shape=(1, 1, 1, *tensor.shape)[-4:])


def as_feature_maps(op: NpuOp) -> NpuOp:
    """The op with every feature map 4-D (a fully connected layer's (1, C) becomes 1x1xC)."""
    slots = ("ifm", "ifm2", "ofm") if isinstance(op, BinaryElementwise) else ("ifm", "ofm")
    return replace(op, **{slot: feature_map(getattr(op, slot)) for slot in slots})


def te_compute(op: NpuOp, feature_maps: dict[str, te.Tensor] | None = None) -> TeOp:
    """The TE of an NPU op, its feature maps taken as 4-D. `feature_maps` ("ifm", "ifm2": a
    producer's output in the stored layout) replace those placeholders, so that the ops of a
    plan form one TE graph."""
    op = as_feature_maps(op)
    given = feature_maps or {}
    inputs = {"ifm": given["ifm"] if "ifm" in given else _placeholder(op.ifm, "ifm")}
    if isinstance(op, BinaryElementwise):
        inputs["ifm2"] = given["ifm2"] if "ifm2" in given else _placeholder(op.ifm2, "ifm2")
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
