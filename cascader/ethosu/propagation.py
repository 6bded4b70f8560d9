"""The explicit Propagators of each NPU op: the affine map from an output stripe to the input
stripes it reads (the cascader's view of an op), with the op's stripe-align hint.

Propagators are written in NHWC and composed with the layout-transform matrices when a tensor
is NHCWB16 (5-D: N, H, C/16, W, 16), so one affine map covers the op and its layout stages.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from cascader.core.propagator import Propagator
from cascader.ir.layout import BRICK, NHCWB16_TO_NHWC, NHWC_TO_NHCWB16, stored_shape
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
    dilated_kernel,
    feature_inputs,
)
from cascader.ir.units import SCALE_BIAS_BYTES

SUBKERNEL_LIMIT = (8, 8)  # the NPU splits larger kernels into sub-kernels of at most 8 x 8


@dataclass(frozen=True)
class OpPropagation:
    """Per input (in part-input order) its propagator, plus the output stripe-align hint."""

    propagators: tuple[Propagator, ...]
    stripe_align_hint: tuple[int, ...]


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
    if any(reads_through_view(op, t) for t in feature_inputs(op)):
        whole = tuple(reshape_propagator(t, ofm) for t in feature_inputs(op))
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
    if isinstance(op, Concatenation):
        return OpPropagation(tuple(_concatenated(t, ofm) for t in op.ifms), hint)
    if isinstance(op, UnaryElementwise) or (isinstance(op, Identity) and op.ifm.shape == ofm.shape):
        return OpPropagation((_feature_map_propagator(np.eye(5), op.ifm, ofm),), hint)
    if isinstance(op, Identity) and pads_whole_input(op):
        shift = tuple(-o for o in op.ofm_offset or (0, 0, 0, 0))
        return OpPropagation((_feature_map_propagator(np.eye(5), op.ifm, ofm, shift),), hint)
    return OpPropagation((reshape_propagator(op.ifm, ofm),), (1,) * len(stored_shape(ofm)))


def _concatenated(ifm: NpuTensor, ofm: NpuTensor) -> Propagator:
    """An input of a concatenation: a stripe of the output reads the same rows and columns
    of it, all its channels (they lie in one slice of the output's), so a concatenation
    striped in rows reads its inputs in the same row stripes. An input read through a
    reshape is read whole."""
    if tuple(ifm.shape[:3]) != tuple(ofm.shape[:3]):
        return reshape_propagator(ifm, ofm)
    rows = np.eye(5)
    rows[3] = [0, 0, 0, 0, ifm.shape[3]]
    return _feature_map_propagator(rows, ifm, ofm)


def pads_whole_input(op: Identity) -> bool:
    """A pad: its whole IFM copied at an offset into an OFM filled with the zero point. A
    stripe of it reads the IFM rows under the stripe (the border reads none), so a pad can
    sit inside a cascade; other block copies read their whole input (a concatenation along
    the channels is one op, `Concatenation`, and reads the rows under its stripes)."""
    return (
        op.ofm_fill is not None
        and op.operator in ("COPY", "REQUANTIZE")
        and not op.ifm_offset
        and not op.ifm_strides
        and tuple(op.region or op.ifm.shape) == tuple(op.ifm.shape)
        and len(op.ifm.shape) == len(op.ofm.shape) == 4
    )


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
