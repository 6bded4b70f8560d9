"""Build fully int8-quantised TFLite models without TensorFlow.

`ModelBuilder` records a float graph and runs it eagerly on a seeded calibration batch, the way
post-training quantisation does: every activation's int8 scale and zero point come from the
float range it actually takes. Weights are per-channel symmetric int8, biases int32 at
input_scale*weight_scale. Ops whose int8 kernels do not rescale (pooling, reshape, concat,
pad, slicing, resize, min/max) share one set of quantisation parameters across their inputs and
outputs, found by union-find when the model is built. LOGISTIC, TANH and SOFTMAX outputs get
the fixed parameters TFLite's int8 kernels require.

    b = ModelBuilder(seed=0)
    x = b.input((1, 32, 32, 3))
    y = b.conv2d(x, 16, kernel=3, stride=2, activation="RELU6")
    b.output(b.softmax(b.fully_connected(b.mean(y, keep_dims=False), 10)))
    flatbuffer = b.build()
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from cascader.testing import float_ops as F
from cascader.testing.quant import (
    PerChannelWeights,
    QuantParams,
    activation_qparams,
    quantize_bias,
    quantize_per_channel,
)
from cascader.testing.tflite_writer import OperatorDef, TensorDef, write_model

IntPair = int | tuple[int, int]

LOGISTIC_QPARAMS = QuantParams(1.0 / 256.0, -128)
TANH_QPARAMS = QuantParams(1.0 / 128.0, 0)
SOFTMAX_QPARAMS = QuantParams(1.0 / 256.0, -128)


@dataclass(frozen=True, eq=False)
class Tensor:
    """Handle to an int8 activation of the model being built."""

    id: int
    shape: tuple[int, ...]


@dataclass
class _Bias:
    values: np.ndarray
    input_id: int
    weight_scales: np.ndarray


@dataclass
class _TensorSpec:
    name: str
    shape: tuple[int, ...]
    dtype: str
    data: np.ndarray | None = None
    weights: PerChannelWeights | None = None
    bias: _Bias | None = None


@dataclass
class _OpSpec:
    kind: str
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    options: dict[str, Any]
    activation_inputs: tuple[int, ...]
    evaluate: Callable[..., tuple[np.ndarray, ...]]


def _pair(v: IntPair) -> tuple[int, int]:
    return (v, v) if isinstance(v, int) else (int(v[0]), int(v[1]))


def _axis(axis: int, rank: int) -> int:
    axis = axis + rank if axis < 0 else axis
    if not 0 < axis < rank:
        raise ValueError(f"axis {axis} out of range for rank {rank} (the batch axis is fixed)")
    return axis


class ModelBuilder:
    """Records an int8 TFLite graph; see the module docstring for the quantisation scheme."""

    def __init__(self, seed: int = 0, calibration_samples: int = 8, name: str = "model") -> None:
        self.seed = seed
        self.name = name
        self._rng = np.random.default_rng(seed)
        self._samples = calibration_samples
        self._tensors: list[_TensorSpec] = []
        self._ops: list[_OpSpec] = []
        self._values: dict[int, np.ndarray] = {}
        self._fixed: dict[int, QuantParams] = {}
        self._range_scale: dict[int, float] = {}
        self._parent: dict[int, int] = {}
        self._inputs: list[Tensor] = []
        self._input_ranges: list[tuple[float, float]] = []
        self._outputs: list[Tensor] = []

    # ---------------------------------------------------------------- graph bookkeeping
    @property
    def inputs(self) -> list[Tensor]:
        return list(self._inputs)

    @property
    def outputs(self) -> list[Tensor]:
        return list(self._outputs)

    @property
    def op_kinds(self) -> list[str]:
        return [op.kind for op in self._ops]

    def input_range(self, t: Tensor) -> tuple[float, float]:
        """Float interval the calibration samples of graph input `t` were drawn from."""
        return self._input_ranges[self._inputs.index(t)]

    def _add_tensor(self, spec: _TensorSpec) -> int:
        self._tensors.append(spec)
        return len(self._tensors) - 1

    def _activation(self, name: str, values: np.ndarray) -> Tensor:
        tid = self._add_tensor(_TensorSpec(name, (1, *values.shape[1:]), "int8"))
        self._values[tid] = values
        self._parent[tid] = tid
        return Tensor(tid, (1, *values.shape[1:]))

    def _int32(self, name: str, values: Sequence[int] | np.ndarray) -> int:
        data = np.asarray(values, np.int32)
        return self._add_tensor(_TensorSpec(name, data.shape, "int32", data=data))

    def _weights(self, name: str, values: np.ndarray, axis: int) -> tuple[int, PerChannelWeights]:
        q = quantize_per_channel(values, axis)
        return self._add_tensor(
            _TensorSpec(name, q.values.shape, "int8", data=q.values, weights=q)
        ), q

    def _bias(
        self, name: str, channels: int, source: Tensor, weights: PerChannelWeights
    ) -> tuple[int, np.ndarray]:
        values = self._rng.normal(0.0, 0.1, channels)
        bias = _Bias(values, source.id, weights.scales)
        return self._add_tensor(_TensorSpec(name, (channels,), "int32", bias=bias)), values

    def _find(self, tid: int) -> int:
        while self._parent[tid] != tid:
            self._parent[tid] = self._parent[self._parent[tid]]
            tid = self._parent[tid]
        return tid

    def _share_qparams(self, ids: Sequence[int]) -> None:
        roots = [self._find(i) for i in ids]
        for r in roots[1:]:
            self._parent[r] = roots[0]

    def _op(
        self,
        kind: str,
        inputs: Sequence[Tensor],
        evaluate: Callable[..., np.ndarray | tuple[np.ndarray, ...]],
        tflite_inputs: Sequence[int] | None = None,
        options: dict[str, Any] | None = None,
        same_qparams: bool = False,
        fixed: QuantParams | None = None,
    ) -> list[Tensor]:
        """Evaluate the op on the calibration batch and record it; returns its outputs.

        `tflite_inputs` is the operator's input list in the file (activations and constants in
        TFLite's order); it defaults to the activation inputs alone.
        """

        def run(*values: np.ndarray) -> tuple[np.ndarray, ...]:
            out = evaluate(*values)
            return out if isinstance(out, tuple) else (out,)

        results = run(*(self._values[t.id] for t in inputs))
        prefix = f"{kind.lower()}_{len(self._ops)}"
        outs = [
            self._activation(f"{prefix}/out{i}" if len(results) > 1 else f"{prefix}/out", v)
            for i, v in enumerate(results)
        ]
        act_ids = tuple(t.id for t in inputs)
        file_inputs = tuple(tflite_inputs) if tflite_inputs is not None else act_ids
        self._ops.append(
            _OpSpec(kind, file_inputs, tuple(t.id for t in outs), options or {}, act_ids, run)
        )
        if same_qparams:
            self._share_qparams([*act_ids, *(t.id for t in outs)])
        if fixed is not None:
            for t in outs:
                self._fixed[t.id] = fixed
        return outs

    def _he_normal(self, shape: tuple[int, ...], fan_in: int) -> np.ndarray:
        return self._rng.normal(0.0, math.sqrt(2.0 / fan_in), shape)

    # ------------------------------------------------------------------------ inputs/outputs
    def input(self, shape: Sequence[int], low: float = -1.0, high: float = 1.0) -> Tensor:
        """Graph input; calibration samples are uniform in [low, high]."""
        shape = tuple(int(d) for d in shape)
        if shape[0] != 1:
            raise ValueError(f"batch must be 1, got shape {shape}")
        values = self._rng.uniform(low, high, (self._samples, *shape[1:]))
        t = self._activation(f"input_{len(self._inputs)}", values)
        self._inputs.append(t)
        self._input_ranges.append((low, high))
        return t

    def output(self, *tensors: Tensor) -> None:
        self._outputs.extend(tensors)

    # ------------------------------------------------------------------ MAC-based operators
    def conv2d(
        self,
        x: Tensor,
        filters: int,
        kernel: IntPair = 3,
        stride: IntPair = 1,
        dilation: IntPair = 1,
        padding: F.Padding = "SAME",
        activation: str = "RELU",
    ) -> Tensor:
        kh, kw = _pair(kernel)
        cin = x.shape[3]
        n = len(self._ops)
        w_id, w = self._weights(
            f"conv_2d_{n}/weights", self._he_normal((filters, kh, kw, cin), kh * kw * cin), 0
        )
        b_id, bf = self._bias(f"conv_2d_{n}/bias", filters, x, w)
        wf = w.dequantize()
        s, d = _pair(stride), _pair(dilation)
        options = {"padding": padding, "stride": s, "dilation": d, "activation": activation}
        return self._op(
            "CONV_2D",
            [x],
            lambda v: F.fused_activation(F.conv2d(v, wf, bf, s, d, padding), activation),
            tflite_inputs=(x.id, w_id, b_id),
            options=options,
        )[0]

    def depthwise_conv2d(
        self,
        x: Tensor,
        kernel: IntPair = 3,
        stride: IntPair = 1,
        dilation: IntPair = 1,
        depth_multiplier: int = 1,
        padding: F.Padding = "SAME",
        activation: str = "RELU",
    ) -> Tensor:
        kh, kw = _pair(kernel)
        channels = x.shape[3] * depth_multiplier
        n = len(self._ops)
        w_id, w = self._weights(
            f"depthwise_conv_2d_{n}/weights", self._he_normal((1, kh, kw, channels), kh * kw), 3
        )
        b_id, bf = self._bias(f"depthwise_conv_2d_{n}/bias", channels, x, w)
        wf = w.dequantize()
        s, d = _pair(stride), _pair(dilation)
        options = {
            "padding": padding,
            "stride": s,
            "dilation": d,
            "depth_multiplier": depth_multiplier,
            "activation": activation,
        }
        return self._op(
            "DEPTHWISE_CONV_2D",
            [x],
            lambda v: F.fused_activation(
                F.depthwise_conv2d(v, wf, bf, s, d, padding, depth_multiplier), activation
            ),
            tflite_inputs=(x.id, w_id, b_id),
            options=options,
        )[0]

    def transpose_conv(
        self,
        x: Tensor,
        filters: int,
        kernel: IntPair = 3,
        stride: IntPair = 2,
        padding: F.Padding = "SAME",
    ) -> Tensor:
        """Learned upsampling: output is input*stride (SAME) or (input-1)*stride+kernel."""
        kh, kw = _pair(kernel)
        s = _pair(stride)
        _, h, w_, cin = x.shape
        if padding == "SAME":
            out_hw = (h * s[0], w_ * s[1])
        else:
            out_hw = ((h - 1) * s[0] + kh, (w_ - 1) * s[1] + kw)
        n = len(self._ops)
        shape_id = self._int32(f"transpose_conv_{n}/output_shape", (1, *out_hw, filters))
        fan_in = max(kh * kw * cin // (s[0] * s[1]), 1)
        w_id, w = self._weights(
            f"transpose_conv_{n}/weights", self._he_normal((filters, kh, kw, cin), fan_in), 0
        )
        b_id, bf = self._bias(f"transpose_conv_{n}/bias", filters, x, w)
        wf = w.dequantize()
        return self._op(
            "TRANSPOSE_CONV",
            [x],
            lambda v: F.transpose_conv2d(v, wf, bf, out_hw, s, padding),
            tflite_inputs=(shape_id, w_id, x.id, b_id),
            options={"padding": padding, "stride": s},
        )[0]

    def fully_connected(self, x: Tensor, units: int, activation: str = "NONE") -> Tensor:
        """Dense layer over the flattened non-batch dimensions; output is [1, units]."""
        depth = math.prod(x.shape[1:])
        n = len(self._ops)
        w_id, w = self._weights(
            f"fully_connected_{n}/weights", self._he_normal((units, depth), depth), 0
        )
        b_id, bf = self._bias(f"fully_connected_{n}/bias", units, x, w)
        wf = w.dequantize()
        return self._op(
            "FULLY_CONNECTED",
            [x],
            lambda v: F.fused_activation(v.reshape(v.shape[0], -1) @ wf.T + bf, activation),
            tflite_inputs=(x.id, w_id, b_id),
            options={"activation": activation},
        )[0]

    # ---------------------------------------------------------------------------- pooling
    def _pool(
        self, kind: str, x: Tensor, pool: IntPair, stride: IntPair | None, padding: F.Padding
    ) -> Tensor:
        p = _pair(pool)
        s = _pair(stride) if stride is not None else p
        mode = "MAX" if kind == "MAX_POOL_2D" else "AVG"
        return self._op(
            kind,
            [x],
            lambda v: F.pool2d(v, mode, p, s, padding),
            options={"padding": padding, "stride": s, "pool": p},
            same_qparams=True,
        )[0]

    def max_pool2d(
        self,
        x: Tensor,
        pool: IntPair = 2,
        stride: IntPair | None = None,
        padding: F.Padding = "VALID",
    ) -> Tensor:
        return self._pool("MAX_POOL_2D", x, pool, stride, padding)

    def average_pool2d(
        self,
        x: Tensor,
        pool: IntPair = 2,
        stride: IntPair | None = None,
        padding: F.Padding = "VALID",
    ) -> Tensor:
        return self._pool("AVERAGE_POOL_2D", x, pool, stride, padding)

    def mean(self, x: Tensor, axes: Sequence[int] = (1, 2), keep_dims: bool = True) -> Tensor:
        norm = tuple(_axis(a, len(x.shape)) for a in axes)
        axis_id = self._int32(f"mean_{len(self._ops)}/axis", norm)
        return self._op(
            "MEAN",
            [x],
            lambda v: v.mean(axis=norm, keepdims=keep_dims),
            tflite_inputs=(x.id, axis_id),
            options={"keep_dims": keep_dims},
        )[0]

    # ------------------------------------------------------------------- element-wise binary
    def _binary(
        self, kind: str, a: Tensor, b: Tensor, fn: Callable[..., np.ndarray], activation: str
    ) -> Tensor:
        if len(a.shape) != len(b.shape):
            raise ValueError(f"{kind}: operands must have equal rank, got {a.shape} and {b.shape}")
        np.broadcast_shapes(a.shape, b.shape)
        return self._op(
            kind,
            [a, b],
            lambda u, v: F.fused_activation(fn(u, v), activation),
            options={"activation": activation},
        )[0]

    def add(self, a: Tensor, b: Tensor, activation: str = "NONE") -> Tensor:
        return self._binary("ADD", a, b, np.add, activation)

    def sub(self, a: Tensor, b: Tensor, activation: str = "NONE") -> Tensor:
        return self._binary("SUB", a, b, np.subtract, activation)

    def mul(self, a: Tensor, b: Tensor, activation: str = "NONE") -> Tensor:
        return self._binary("MUL", a, b, np.multiply, activation)

    def _min_max(self, kind: str, a: Tensor, b: Tensor, fn: Callable[..., np.ndarray]) -> Tensor:
        np.broadcast_shapes(a.shape, b.shape)
        return self._op(kind, [a, b], fn, same_qparams=True)[0]

    def minimum(self, a: Tensor, b: Tensor) -> Tensor:
        """Int8 MINIMUM compares raw values, so operands and result share quantisation."""
        return self._min_max("MINIMUM", a, b, np.minimum)

    def maximum(self, a: Tensor, b: Tensor) -> Tensor:
        """Int8 MAXIMUM compares raw values, so operands and result share quantisation."""
        return self._min_max("MAXIMUM", a, b, np.maximum)

    # ----------------------------------------------------------------- data movement
    def reshape(self, x: Tensor, new_shape: Sequence[int]) -> Tensor:
        target = list(new_shape)
        if -1 in target:
            known = math.prod(d for d in target if d != -1)
            target[target.index(-1)] = math.prod(x.shape) // known
        if target[0] != 1 or math.prod(target) != math.prod(x.shape):
            raise ValueError(f"cannot reshape {x.shape} to {tuple(new_shape)}")
        shape_id = self._int32(f"reshape_{len(self._ops)}/shape", target)
        return self._op(
            "RESHAPE",
            [x],
            lambda v: v.reshape(v.shape[0], *target[1:]),
            tflite_inputs=(x.id, shape_id),
            options={"new_shape": tuple(target)},
            same_qparams=True,
        )[0]

    def concatenation(
        self, xs: Sequence[Tensor], axis: int = -1, activation: str = "NONE"
    ) -> Tensor:
        """Int8 CONCATENATION does not rescale: all inputs share the output's quantisation."""
        ax = _axis(axis, len(xs[0].shape))
        return self._op(
            "CONCATENATION",
            list(xs),
            lambda *vs: F.fused_activation(np.concatenate(vs, axis=ax), activation),
            options={"axis": ax, "activation": activation},
            same_qparams=True,
        )[0]

    def pad(self, x: Tensor, paddings: Sequence[tuple[int, int]]) -> Tensor:
        """Zero padding (the zero point in int8); `paddings` has one (before, after) per axis."""
        pads = [tuple(int(p) for p in pair) for pair in paddings]
        if len(pads) != len(x.shape) or pads[0] != (0, 0):
            raise ValueError(f"paddings {paddings} do not fit shape {x.shape} (batch unpadded)")
        pad_id = self._int32(f"pad_{len(self._ops)}/paddings", pads)
        return self._op(
            "PAD", [x], lambda v: np.pad(v, pads), tflite_inputs=(x.id, pad_id), same_qparams=True
        )[0]

    def strided_slice(
        self,
        x: Tensor,
        begin: Sequence[int],
        end: Sequence[int],
        strides: Sequence[int] | None = None,
    ) -> Tensor:
        step = list(strides) if strides is not None else [1] * len(begin)
        if len(begin) != len(x.shape) or begin[0] != 0 or end[0] != 1 or step[0] != 1:
            raise ValueError("strided_slice needs one begin/end/stride per axis, batch kept whole")
        n = len(self._ops)
        consts = (
            self._int32(f"strided_slice_{n}/begin", begin),
            self._int32(f"strided_slice_{n}/end", end),
            self._int32(f"strided_slice_{n}/strides", step),
        )
        index = (
            slice(None),
            *(slice(b, e, s) for b, e, s in zip(begin[1:], end[1:], step[1:], strict=True)),
        )
        return self._op(
            "STRIDED_SLICE",
            [x],
            lambda v: v[index],
            tflite_inputs=(x.id, *consts),
            same_qparams=True,
        )[0]

    def split(self, x: Tensor, num_splits: int, axis: int = -1) -> list[Tensor]:
        ax = _axis(axis, len(x.shape))
        if x.shape[ax] % num_splits:
            raise ValueError(f"axis {ax} of {x.shape} does not split into {num_splits}")
        axis_id = self._int32(f"split_{len(self._ops)}/axis", np.int32(ax))
        return self._op(
            "SPLIT",
            [x],
            lambda v: tuple(np.split(v, num_splits, axis=ax)),
            tflite_inputs=(axis_id, x.id),
            options={"num_splits": num_splits},
            same_qparams=True,
        )

    def _resize(
        self,
        kind: str,
        x: Tensor,
        size: IntPair,
        align_corners: bool,
        half_pixel_centers: bool,
        fn: Callable[..., np.ndarray],
    ) -> Tensor:
        hw = _pair(size)
        size_id = self._int32(f"{kind.lower()}_{len(self._ops)}/size", hw)
        return self._op(
            kind,
            [x],
            lambda v: fn(v, hw, align_corners, half_pixel_centers),
            tflite_inputs=(x.id, size_id),
            options={"align_corners": align_corners, "half_pixel_centers": half_pixel_centers},
            same_qparams=True,
        )[0]

    def resize_nearest_neighbor(
        self,
        x: Tensor,
        size: IntPair,
        align_corners: bool = False,
        half_pixel_centers: bool = False,
    ) -> Tensor:
        return self._resize(
            "RESIZE_NEAREST_NEIGHBOR", x, size, align_corners, half_pixel_centers, F.resize_nearest
        )

    def resize_bilinear(
        self,
        x: Tensor,
        size: IntPair,
        align_corners: bool = False,
        half_pixel_centers: bool = False,
    ) -> Tensor:
        return self._resize(
            "RESIZE_BILINEAR", x, size, align_corners, half_pixel_centers, F.resize_bilinear
        )

    # ----------------------------------------------------------------------- activations
    def logistic(self, x: Tensor) -> Tensor:
        return self._op("LOGISTIC", [x], F.logistic, fixed=LOGISTIC_QPARAMS)[0]

    def tanh(self, x: Tensor) -> Tensor:
        return self._op("TANH", [x], np.tanh, fixed=TANH_QPARAMS)[0]

    def softmax(self, x: Tensor, beta: float = 1.0) -> Tensor:
        return self._op(
            "SOFTMAX",
            [x],
            lambda v: F.softmax(v, beta),
            options={"beta": beta},
            fixed=SOFTMAX_QPARAMS,
        )[0]

    def hard_swish(self, x: Tensor) -> Tensor:
        return self._op("HARD_SWISH", [x], F.hard_swish)[0]

    def leaky_relu(self, x: Tensor, alpha: float = 0.2) -> Tensor:
        return self._op(
            "LEAKY_RELU", [x], lambda v: F.leaky_relu(v, alpha), options={"alpha": alpha}
        )[0]

    def quantize(self, x: Tensor, range_scale: float = 2.0) -> Tensor:
        """Int8 -> int8 requantisation to a range `range_scale` times wider than x's."""
        out = self._op("QUANTIZE", [x], lambda v: v.copy())[0]
        self._range_scale[out.id] = range_scale
        return out

    # ------------------------------------------------------------------------- results
    def evaluate(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Run the float graph (with the int8 weights) on a batch: arrays are (N, *shape[1:])."""
        env = {t.id: np.asarray(v, np.float64) for t, v in zip(self._inputs, inputs, strict=True)}
        for op in self._ops:
            results = op.evaluate(*(env[i] for i in op.activation_inputs))
            env.update(zip(op.outputs, results, strict=True))
        return [env[t.id] for t in self._outputs]

    def _resolve_qparams(self) -> dict[int, QuantParams]:
        lows: dict[int, float] = {}
        highs: dict[int, float] = {}
        fixed: dict[int, QuantParams] = {}
        for tid, values in self._values.items():
            root = self._find(tid)
            f = self._range_scale.get(tid, 1.0)
            lows[root] = min(lows.get(root, 0.0), float(values.min()) * f)
            highs[root] = max(highs.get(root, 0.0), float(values.max()) * f)
            if tid in self._fixed and fixed.setdefault(root, self._fixed[tid]) != self._fixed[tid]:
                raise ValueError(f"tensor {self._tensors[tid].name} needs two fixed qparams")
        params = {
            root: fixed.get(root) or activation_qparams(lows[root], highs[root]) for root in lows
        }
        return {tid: params[self._find(tid)] for tid in self._values}

    def build(self) -> bytes:
        """Serialise to a TFLite flatbuffer; the same seed and calls give identical bytes."""
        if not self._outputs:
            raise ValueError("model has no outputs; call output() first")
        qparams = self._resolve_qparams()
        tensors = [self._tensor_def(tid, spec, qparams) for tid, spec in enumerate(self._tensors)]
        operators = [OperatorDef(op.kind, op.inputs, op.outputs, op.options) for op in self._ops]
        description = f"cascader.testing.ModelBuilder seed={self.seed}: {self.name}"
        return write_model(
            tensors,
            operators,
            [t.id for t in self._inputs],
            [t.id for t in self._outputs],
            description,
        )

    def _tensor_def(
        self, tid: int, spec: _TensorSpec, qparams: dict[int, QuantParams]
    ) -> TensorDef:
        if spec.weights is not None:
            w = spec.weights
            return TensorDef(
                spec.name,
                spec.shape,
                "int8",
                w.values.tobytes(),
                tuple(float(s) for s in w.scales),
                (0,) * len(w.scales),
                w.axis,
            )
        if spec.bias is not None:
            in_scale = qparams[spec.bias.input_id].scale
            data = quantize_bias(spec.bias.values, in_scale, spec.bias.weight_scales)
            scales = tuple(float(in_scale * s) for s in spec.bias.weight_scales)
            return TensorDef(
                spec.name, spec.shape, "int32", data.tobytes(), scales, (0,) * len(scales)
            )
        if spec.data is not None:
            return TensorDef(spec.name, spec.shape, spec.dtype, spec.data.tobytes())
        q = qparams[tid]
        return TensorDef(spec.name, spec.shape, "int8", None, (q.scale,), (q.zero_point,))
