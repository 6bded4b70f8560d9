"""Per-operator checks of a TFLite model: input and output counts, the options table each
operator needs, and the options and shapes of the operators the NPU runs, against TFLite's
definitions and what the NPU and Vela accept (Vela's weight encoder takes dilations of 1 and 2
only; TVM's frontend divides by strides and asserts on channel counts)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NoReturn

import numpy as np
import tflite
from tflite.BuiltinOptions import BuiltinOptions

from cascader.frontend.errors import ModelError

_BO = BuiltinOptions
# (fewest inputs, most inputs, outputs or None for "one or more", inputs that may be -1).
_ARITY: dict[str, tuple[int, int, int | None, frozenset[int]]] = {
    "CONV_2D": (2, 3, 1, frozenset({2})),
    "DEPTHWISE_CONV_2D": (2, 3, 1, frozenset({2})),
    "FULLY_CONNECTED": (2, 3, 1, frozenset({2})),
    "TRANSPOSE_CONV": (3, 4, 1, frozenset({3})),
    "MAX_POOL_2D": (1, 1, 1, frozenset()),
    "AVERAGE_POOL_2D": (1, 1, 1, frozenset()),
    "ADD": (2, 2, 1, frozenset()),
    "SUB": (2, 2, 1, frozenset()),
    "MUL": (2, 2, 1, frozenset()),
    "MINIMUM": (2, 2, 1, frozenset()),
    "MAXIMUM": (2, 2, 1, frozenset()),
    "SOFTMAX": (1, 1, 1, frozenset()),
    "LOGISTIC": (1, 1, 1, frozenset()),
    "TANH": (1, 1, 1, frozenset()),
    "HARD_SWISH": (1, 1, 1, frozenset()),
    "LEAKY_RELU": (1, 1, 1, frozenset()),
    "RELU": (1, 1, 1, frozenset()),
    "RELU6": (1, 1, 1, frozenset()),
    "QUANTIZE": (1, 1, 1, frozenset()),
    "DEQUANTIZE": (1, 1, 1, frozenset()),
    "RESHAPE": (1, 2, 1, frozenset()),
    "CONCATENATION": (1, 1 << 16, 1, frozenset()),
    "PAD": (2, 2, 1, frozenset()),
    "PADV2": (3, 3, 1, frozenset()),
    "MEAN": (2, 2, 1, frozenset()),
    "RESIZE_NEAREST_NEIGHBOR": (2, 2, 1, frozenset()),
    "RESIZE_BILINEAR": (2, 2, 1, frozenset()),
    "STRIDED_SLICE": (4, 4, 1, frozenset()),
    "SPLIT": (2, 2, None, frozenset()),
    "SPLIT_V": (3, 3, None, frozenset()),
}
# The options table each of these operators must carry (TVM asserts on the type).
_OPTIONS: dict[str, tuple[int, type]] = {
    "CONV_2D": (_BO.Conv2DOptions, tflite.Conv2DOptions),
    "DEPTHWISE_CONV_2D": (_BO.DepthwiseConv2DOptions, tflite.DepthwiseConv2DOptions),
    "TRANSPOSE_CONV": (_BO.TransposeConvOptions, tflite.TransposeConvOptions),
    "FULLY_CONNECTED": (_BO.FullyConnectedOptions, tflite.FullyConnectedOptions),
    "MAX_POOL_2D": (_BO.Pool2DOptions, tflite.Pool2DOptions),
    "AVERAGE_POOL_2D": (_BO.Pool2DOptions, tflite.Pool2DOptions),
    "SOFTMAX": (_BO.SoftmaxOptions, tflite.SoftmaxOptions),
    "CONCATENATION": (_BO.ConcatenationOptions, tflite.ConcatenationOptions),
    "LEAKY_RELU": (_BO.LeakyReluOptions, tflite.LeakyReluOptions),
}
# Options that may be left out (TFLite then uses defaults) but, when given, must be these.
_OPTIONAL_OPTIONS: dict[str, int] = {
    "ADD": _BO.AddOptions,
    "SUB": _BO.SubOptions,
    "MUL": _BO.MulOptions,
    "RESHAPE": _BO.ReshapeOptions,
    "SQUEEZE": _BO.SqueezeOptions,
    "MEAN": _BO.ReducerOptions,
    "SPLIT": _BO.SplitOptions,
    "STRIDED_SLICE": _BO.StridedSliceOptions,
}
TYPE_NAMES: dict[int, str] = {
    code: name for name, code in vars(tflite.TensorType).items() if not name.startswith("_")
}
_PADDINGS = (0, 1)  # SAME, VALID
_ACTIVATIONS = range(6)  # NONE .. SIGN_BIT
DILATIONS = (1, 2)  # what Vela's weight encoder and the NPU take
MAX_STRIDE = 1 << 16


class _Op:
    """One operator's tensors and options, read for the checks."""

    def __init__(self, subgraph: tflite.SubGraph, op: tflite.Operator, at: str) -> None:
        self.subgraph = subgraph
        self.op = op
        self.at = at
        self.inputs = _indices(op.InputsAsNumpy())
        self.outputs = _indices(op.OutputsAsNumpy())

    def fail(self, problem: str, fix: str = "export the model again") -> NoReturn:
        raise ModelError(f"{self.at}: {problem}; {fix}")

    def shape(self, index: int) -> list[int]:
        return _indices(self.subgraph.Tensors(index).ShapeAsNumpy())

    def input_shape(self, position: int) -> list[int]:
        return self.shape(self.inputs[position])

    def output_shape(self) -> list[int]:
        return self.shape(self.outputs[0])

    def constant(self, position: int, model: tflite.Model) -> bool:
        tensor = self.subgraph.Tensors(self.inputs[position])
        return model.Buffers(tensor.Buffer()).DataLength() > 0

    def int8_weights(self, position: int) -> None:
        """The NPU's weight encoder takes int8 weights (TFLite's int8 scheme)."""
        found = self.subgraph.Tensors(self.inputs[position]).Type()
        if found != tflite.TensorType.INT8:
            name = TYPE_NAMES.get(found, str(found)).lower()
            self.fail(f"its weights are {name}", "quantize the model with int8 weights")

    def rank(self, shape: list[int], rank: int, what: str) -> None:
        if len(shape) != rank:
            self.fail(f"its {what} has shape {shape}, not rank {rank}")


def _indices(vector: np.ndarray | int) -> list[int]:
    return [] if isinstance(vector, int) else [int(v) for v in vector]


def check_operator(
    model: tflite.Model, subgraph: tflite.SubGraph, op: tflite.Operator, kind: str, at: str
) -> None:
    """Raise ModelError when operator `op` (of `kind`, described as `at`) is malformed."""
    o = _Op(subgraph, op, at)
    arity = _ARITY.get(kind)
    optional = arity[3] if arity else frozenset()
    for position, index in enumerate(o.inputs):
        if index == -1 and position not in optional:
            o.fail(f"input {position} is omitted (tensor -1) but is not optional")
    if arity is not None:
        low, high, outputs, _ = arity
        if not low <= len(o.inputs) <= high:
            o.fail(f"has {len(o.inputs)} inputs; TFLite defines {low} to {high}")
        if outputs is not None and len(o.outputs) != outputs:
            o.fail(f"has {len(o.outputs)} outputs; TFLite defines {outputs}")
    options = _options(o, kind)
    check = _CHECKS.get(kind)
    if check is not None:
        check(o, options, model)


def _options(o: _Op, kind: str):
    found = o.op.BuiltinOptionsType()
    if kind in _OPTIONAL_OPTIONS:
        if found not in (_BO.NONE, _OPTIONAL_OPTIONS[kind]):
            o.fail(f"carries options of type {found}, not {kind}'s")
        return None
    if kind not in _OPTIONS:
        return None
    expected, reader = _OPTIONS[kind]
    if found != expected:
        o.fail(f"carries options of type {found}, not {reader.__name__}")
    table = o.op.BuiltinOptions()
    options = reader()
    options.Init(table.Bytes, table.Pos)
    return options


def _window(o: _Op, options, kernel: tuple[int, int], dilation: tuple[int, int]) -> None:
    """Padding, activation and strides of a windowed op, and its output height and width
    as TFLite computes them from the input's."""
    if options.Padding() not in _PADDINGS:
        o.fail(f"has padding {options.Padding()}; TFLite defines SAME (0) and VALID (1)")
    if options.FusedActivationFunction() not in _ACTIVATIONS:
        o.fail(f"has fused activation {options.FusedActivationFunction()}, which TFLite lacks")
    strides = (options.StrideH(), options.StrideW())
    if not all(1 <= s <= MAX_STRIDE for s in strides):
        o.fail(f"has strides {strides[0]}x{strides[1]}; strides must be 1 to {MAX_STRIDE}")
    ifm, ofm = o.input_shape(0), o.output_shape()
    expected = []
    for axis, (k, d, s) in enumerate(zip(kernel, dilation, strides, strict=True), start=1):
        extent = ifm[axis] if options.Padding() == 0 else ifm[axis] - (k - 1) * d
        if extent < 1:
            o.fail(f"its {k}-wide window (dilation {d}) does not fit its input {ifm}")
        expected.append(math.ceil(extent / s))
    if ofm[1:3] != expected:
        o.fail(f"its output is {ofm}, but its input {ifm} and options give {expected} in H, W")


def _check_conv(o: _Op, options, model: tflite.Model) -> None:
    ifm, weights, ofm = o.input_shape(0), o.input_shape(1), o.output_shape()
    for shape, what in ((ifm, "input"), (weights, "weights"), (ofm, "output")):
        o.rank(shape, 4, what)
    dilation = (options.DilationHFactor(), options.DilationWFactor())
    if not all(d in DILATIONS for d in dilation):
        o.fail(
            f"has dilation {dilation[0]}x{dilation[1]}; the NPU and Vela's weight encoder take "
            "dilations of 1 and 2 only",
            "rewrite the layer without a larger dilation",
        )
    if not o.constant(1, model):
        o.fail("its weights are not a constant tensor")
    o.int8_weights(1)
    depthwise = isinstance(options, tflite.DepthwiseConv2DOptions)
    if depthwise:
        if weights[0] != 1 or weights[3] != ofm[3] or ofm[3] % ifm[3]:
            o.fail(f"its weights {weights} do not map input {ifm} to output {ofm} depthwise")
        if options.DepthMultiplier() * ifm[3] != ofm[3]:
            o.fail(f"has depth multiplier {options.DepthMultiplier()} for {ifm[3]} -> {ofm[3]}")
    elif weights[0] != ofm[3] or ifm[3] % weights[3]:
        o.fail(f"its weights {weights} do not map input {ifm} to output {ofm}")
    _bias(o, 2, ofm[3], model)
    _window(o, options, (weights[1], weights[2]), dilation)


def _check_transpose_conv(o: _Op, options, model: tflite.Model) -> None:
    weights, ifm, ofm = o.input_shape(1), o.input_shape(2), o.output_shape()
    for shape, what in ((ifm, "input"), (weights, "weights"), (ofm, "output")):
        o.rank(shape, 4, what)
    if options.Padding() not in _PADDINGS:
        o.fail(f"has padding {options.Padding()}; TFLite defines SAME (0) and VALID (1)")
    strides = (options.StrideH(), options.StrideW())
    if not all(1 <= s <= MAX_STRIDE for s in strides):
        o.fail(f"has strides {strides[0]}x{strides[1]}; strides must be 1 to {MAX_STRIDE}")
    if not (o.constant(0, model) and o.constant(1, model)):
        o.fail("its output shape and weights are not constant tensors")
    o.int8_weights(1)
    if weights[0] != ofm[3] or weights[3] != ifm[3]:
        o.fail(f"its weights {weights} do not map input {ifm} to output {ofm}")
    if len(o.inputs) > 3:
        _bias(o, 3, ofm[3], model)


def _check_fully_connected(o: _Op, options, model: tflite.Model) -> None:
    ifm, weights, ofm = o.input_shape(0), o.input_shape(1), o.output_shape()
    o.rank(weights, 2, "weights")
    if not o.constant(1, model):
        o.fail("its weights are not a constant tensor")
    o.int8_weights(1)
    if options.WeightsFormat() != 0:
        o.fail("has shuffled weights; the NPU takes the default weight format")
    if options.FusedActivationFunction() not in _ACTIVATIONS:
        o.fail(f"has fused activation {options.FusedActivationFunction()}, which TFLite lacks")
    if math.prod(ifm) % weights[1] or not ofm or ofm[-1] != weights[0]:
        o.fail(f"its weights {weights} do not map input {ifm} to output {ofm}")
    _bias(o, 2, weights[0], model)


def _bias(o: _Op, position: int, channels: int, model: tflite.Model) -> None:
    if len(o.inputs) <= position or o.inputs[position] == -1:
        return
    bias = o.input_shape(position)
    if bias != [channels] or not o.constant(position, model):
        o.fail(f"its bias has shape {bias}; it must be a constant of shape [{channels}]")


def _check_pool(o: _Op, options, model: tflite.Model) -> None:
    o.rank(o.input_shape(0), 4, "input")
    o.rank(o.output_shape(), 4, "output")
    kernel = (options.FilterHeight(), options.FilterWidth())
    if not all(1 <= k <= MAX_STRIDE for k in kernel):
        o.fail(f"has a {kernel[0]}x{kernel[1]} window; windows must be 1 to {MAX_STRIDE}")
    if o.input_shape(0)[3] != o.output_shape()[3]:
        o.fail(f"maps {o.input_shape(0)} to {o.output_shape()}, changing the depth")
    _window(o, options, kernel, (1, 1))


def _check_binary(o: _Op, options, model: tflite.Model) -> None:
    a, b, ofm = o.input_shape(0), o.input_shape(1), o.output_shape()
    try:
        expected = list(np.broadcast_shapes(tuple(a), tuple(b)))
    except ValueError:
        o.fail(f"its inputs {a} and {b} do not broadcast")
    if ofm != expected:
        o.fail(f"its output is {ofm}, but inputs {a} and {b} broadcast to {expected}")


def _check_softmax(o: _Op, options, model: tflite.Model) -> None:
    beta = options.Beta()
    if not (math.isfinite(beta) and beta > 0):
        o.fail(f"has beta {beta}; beta must be finite and positive")
    if o.input_shape(0) != o.output_shape():
        o.fail(f"maps {o.input_shape(0)} to {o.output_shape()}")


def _check_leaky_relu(o: _Op, options, model: tflite.Model) -> None:
    if not math.isfinite(options.Alpha()):
        o.fail(f"has alpha {options.Alpha()}; alpha must be finite")


def _check_concatenation(o: _Op, options, model: tflite.Model) -> None:
    shapes = [o.input_shape(p) for p in range(len(o.inputs))]
    ofm = o.output_shape()
    rank = len(ofm)
    axis = options.Axis()
    if not -rank <= axis < rank or any(len(s) != rank for s in shapes):
        o.fail(f"joins {shapes} along axis {axis} into {ofm}")
    axis %= rank
    rest = [s[:axis] + s[axis + 1 :] for s in shapes]
    if (
        any(r != ofm[:axis] + ofm[axis + 1 :] for r in rest)
        or sum(s[axis] for s in shapes) != (ofm[axis])
    ):
        o.fail(f"joins {shapes} along axis {axis} into {ofm}")


def _check_same_size(o: _Op, options, model: tflite.Model) -> None:
    if math.prod(o.input_shape(0)) != math.prod(o.output_shape()):
        o.fail(f"reshapes {o.input_shape(0)} into {o.output_shape()}, another element count")


_Check = Callable[[_Op, object, tflite.Model], None]
_CHECKS: dict[str, _Check] = {
    "CONV_2D": _check_conv,
    "DEPTHWISE_CONV_2D": _check_conv,
    "TRANSPOSE_CONV": _check_transpose_conv,
    "FULLY_CONNECTED": _check_fully_connected,
    "MAX_POOL_2D": _check_pool,
    "AVERAGE_POOL_2D": _check_pool,
    "ADD": _check_binary,
    "SUB": _check_binary,
    "MUL": _check_binary,
    "MINIMUM": _check_binary,
    "MAXIMUM": _check_binary,
    "SOFTMAX": _check_softmax,
    "LEAKY_RELU": _check_leaky_relu,
    "CONCATENATION": _check_concatenation,
    "RESHAPE": _check_same_size,
}
