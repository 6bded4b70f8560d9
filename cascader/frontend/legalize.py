"""Legalize partitioned "ethos-u" functions into NPU primitive ops with integer quantisation.

Each composite's QDQ subgraph is read back into integers: tensor (scale, zero point),
per-channel (bias, multiplier, shift) from Vela's `quantise_scale`, kernels in OHWI, clamps in
quantised units, LUTs tabulated from the op's real function. Tensors inside int8-only
composites (pooling, reshape, pad, slices) take the quantisation of the tensor they copy.
Softmax and mean expand to several primitive ops, as Vela rewrites them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np
import tvm
from ethosu.vela.data_type import DataType
from ethosu.vela.operation import Op as VelaOp
from ethosu.vela.operation import Operation as VelaOperation
from ethosu.vela.scaling import quantise_scale
from ethosu.vela.tensor import QuantizationParameters
from ethosu.vela.tensor import Tensor as VelaTensor
from ethosu.vela.tflite_graph_optimiser import convert_hardswish_to_lut, convert_lrelu_to_lut
from tvm import relax

from cascader.frontend.mean import legalize_mean
from cascader.frontend.origins import origin_of
from cascader.frontend.partition import CODEGEN
from cascader.frontend.resize import legalize_resize
from cascader.frontend.softmax import legalize_softmax
from cascader.frontend.transpose_conv import transpose_conv_geometry
from cascader.ir.npu_ops import (
    Activation,
    BinaryElementwise,
    Conv2D,
    Identity,
    Kernel,
    Layout,
    NpuFunction,
    NpuOp,
    NpuTensor,
    Padding,
    Pooling,
    Quant,
    UnaryElementwise,
)
from cascader.ir.origins import TfliteOrigin

UNKNOWN_QUANT = Quant(scale=float("nan"), zero_point=0)


class LegalizeError(ValueError):
    """A composite the NPU op set cannot express (yet)."""


# ---- reading a composite ------------------------------------------------------------------


class _Composite:
    """One composite function: its bindings, parameters and op calls, by op name."""

    def __init__(self, func: relax.Function, arg_names: list[str]):
        self.kind = str(func.attrs["Composite"]).removeprefix(f"{CODEGEN}.")
        self.out_name = ""  # set by `_composites`, from `name_hint`
        self.item_names: dict[int, str] = {}  # tuple outputs (split): index -> tensor name
        self.value: dict[relax.Var, relax.Expr] = {}
        for block in func.body.blocks:
            for binding in block.bindings:
                self.value[binding.var] = binding.value
        # The TFLite operator the composite's result was imported for, if the import said.
        found = origin_of(self.resolve(func.body.body))
        self.origin, self.is_output = found if found is not None else (None, False)
        self.param_name = {p: n for p, n in zip(func.params, arg_names, strict=True)}
        self.calls: dict[str, list[relax.Call]] = {}
        for value in self.value.values():
            if isinstance(value, relax.Call) and isinstance(value.op, tvm.ir.Op):
                self.calls.setdefault(value.op.name, []).append(value)

    def name_hint(self, fallback: str) -> str:
        """What the composite's result is called: the model's name for the operator's output
        tensor; inside an operator imported as several composites (a requantize after a
        slice, the reshapes around a fully connected layer), and for a split's tuple (its
        parts take the output names), that name and the kind."""
        if self.origin is None:
            return fallback
        if self.is_output and self.kind != "split":
            return self.origin.tensor
        return f"{self.origin.tensor}:{self.kind}"

    def op_origin(self, position: int) -> TfliteOrigin | None:
        """The TFLite operator the composite's `position`-th NPU op stands for, named by its
        output tensor (a split's parts: each its own output)."""
        if self.origin is None:
            return None
        tensors = self.origin.tensors
        tensor = tensors[position] if self.kind == "split" and position < len(tensors) else None
        return TfliteOrigin((tensor or tensors[0],), self.origin.index, self.origin.op)

    def call(self, op_name: str) -> relax.Call:
        return self.calls[f"relax.{op_name}"][0]

    def has(self, op_name: str) -> bool:
        return f"relax.{op_name}" in self.calls

    def resolve(self, expr: relax.Expr) -> relax.Expr:
        while isinstance(expr, relax.Var) and expr in self.value:
            expr = self.value[expr]
        return expr

    def const(self, expr: relax.Expr) -> np.ndarray:
        """A constant operand, folding the scalar products the frontend leaves unfolded."""
        expr = self.resolve(expr)
        if isinstance(expr, tvm.ir.GenericConst):
            return expr.value.numpy()
        if isinstance(expr, relax.Call) and expr.op.name == "relax.multiply":
            return self.const(expr.args[0]) * self.const(expr.args[1])
        raise LegalizeError(f"{self.kind}: expected a constant, found {type(expr).__name__}")

    def quant(self, qdq: relax.Call) -> Quant:
        scale = self.const(qdq.args[1])
        zero_point = self.const(qdq.args[2])
        return Quant(float(np.ravel(scale)[0]), int(np.ravel(zero_point)[0]))

    def input_name(self, expr: relax.Expr) -> str:
        expr = self.resolve(expr)
        if isinstance(expr, relax.Call) and expr.op.name in ("relax.dequantize", "relax.astype"):
            return self.input_name(expr.args[0])
        return self.param_name[expr]


def _shape(expr: relax.Expr) -> tuple[int, ...]:
    return tuple(int(d) for d in expr.ty.shape)


def _tensor(name: str, expr: relax.Expr, quant: Quant) -> NpuTensor:
    return NpuTensor(name, _shape(expr), quant)


def _padding(pad: tvm.ir.Array) -> Padding:
    top, left, bottom, right = (int(p) for p in pad)
    return Padding(top, left, bottom, right)


def _kernel(size: tuple[int, int], strides, dilation) -> Kernel:
    sh, sw = (int(s) for s in strides)
    dh, dw = (int(d) for d in dilation)
    return Kernel(size[0], size[1], sh, sw, dh, dw)


def _quantized(value: float, quant: Quant) -> int:
    return int(np.clip(np.round(value / quant.scale) + quant.zero_point, -128, 127))


def _int8_clamp(c: _Composite) -> Activation:
    """The frontend's fused activation: an int8 clip after the output quantize."""
    if not c.has("clip"):
        return Activation()
    low, high = (int(float(v.value)) for v in c.call("clip").args[1:3])
    if (low, high) == (-128, 127):
        return Activation()
    return Activation("CLAMP", max(low, -128), min(high, 127))


def _float_clamp(c: _Composite, ofm: Quant) -> Activation:
    """A fused activation still in float (binary ops): relu or clip, in output units."""
    if c.has("nn.relu"):
        return Activation("CLAMP", _quantized(0.0, ofm), 127)
    if c.has("clip"):
        low, high = (float(v.value) for v in c.call("clip").args[1:3])
        return Activation("CLAMP", _quantized(low, ofm), _quantized(high, ofm))
    return Activation()


# ---- per-kind legalization ----------------------------------------------------------------


def _conv_like(c: _Composite) -> Conv2D:
    quantize = c.call("quantize")
    ofm_q = c.quant(quantize)
    deqs = c.calls["relax.dequantize"]
    weight_dq = next(d for d in deqs if _is_weight(c, d))
    ifm_dq = next(d for d in deqs if c.resolve(d.args[0]) in c.param_name)
    ifm_q = c.quant(ifm_dq)
    raw = c.const(_unpermuted(c, weight_dq.args[0])).astype(np.int8)
    w_scales = np.ravel(c.const(weight_dq.args[1])).astype(np.float64)
    w_zp = int(np.ravel(c.const(weight_dq.args[2]))[0])
    upscale = "NONE"
    kind = c.kind
    ifm_expr = c.resolve(ifm_dq.args[0])
    if c.kind == "fully_connected":
        weights = raw.reshape(raw.shape[0], 1, 1, raw.shape[1])  # (O, I) -> OHWI
        kernel, padding = Kernel(1, 1), Padding()
    elif c.kind == "transpose_conv2d":
        strides = tuple(int(s) for s in c.call("nn.conv2d_transpose").attrs.strides)
        weights, kernel, padding, upscale = transpose_conv_geometry(
            raw, strides, _shape(ifm_expr), _shape(quantize)
        )
        kind = "conv2d"
    else:
        conv = c.call("nn.conv2d")
        # conv2d weights arrive HWIO (a depthwise conv over one input channel is a conv2d
        # whose 1HWC weights the frontend reshapes to HWIO); depthwise as TFLite's 1HWC.
        if c.kind == "conv2d":
            weights = np.transpose(raw.reshape(_shape(conv.args[1])), (3, 0, 1, 2))
        else:
            weights = raw.transpose(3, 1, 2, 0)
            ifm_channels = _shape(ifm_expr)[3]
            if weights.shape[0] != ifm_channels:
                weights, kind = _multiplier_as_conv(weights, ifm_channels), "conv2d"
        kernel = _kernel(weights.shape[1:3], conv.attrs.strides, conv.attrs.dilation)
        padding = _padding(conv.attrs.padding)
    channels = weights.shape[0]
    w_scales = np.broadcast_to(w_scales, (channels,))
    biases = np.zeros(channels, np.int64)
    bias_dq = [d for d in deqs if d is not weight_dq and d is not ifm_dq]
    if bias_dq:
        biases = np.ravel(c.const(bias_dq[0].args[0])).astype(np.int64)
    pairs = [quantise_scale(ifm_q.scale * float(ws) / ofm_q.scale) for ws in w_scales]
    multipliers = np.array([p[0] for p in pairs], np.int32)
    shifts = np.array([p[1] for p in pairs], np.int32)
    return Conv2D(
        name=c.out_name,
        kind=kind,
        ifm=_tensor(c.input_name(ifm_dq), ifm_expr, ifm_q),
        ofm=_tensor(c.out_name, quantize, ofm_q),
        kernel=kernel,
        padding=padding,
        weights=weights,
        weight_zero_point=w_zp,
        biases=biases,
        multipliers=multipliers,
        shifts=shifts,
        activation=_int8_clamp(c),
        upscale=upscale,
    )


def _multiplier_as_conv(depthwise: np.ndarray, ifm_channels: int) -> np.ndarray:
    """A depthwise kernel with depth multiplier M (OFM channel o reads IFM channel o // M) as
    the OHWI kernel of a full convolution whose other input channels weigh zero: the same
    integer sums on an NPU op, so the depthwise runs on the NPU as it does under Vela 5.2."""
    channels, kh, kw, _ = depthwise.shape
    outputs = np.arange(channels)
    dense = np.zeros((channels, kh, kw, ifm_channels), depthwise.dtype)
    dense[outputs, :, :, outputs // (channels // ifm_channels)] = depthwise[..., 0]
    return dense


def _unpermuted(c: _Composite, expr: relax.Expr) -> relax.Expr:
    """FULLY_CONNECTED weights as stored, (O, I): the frontend transposes them for matmul."""
    data = c.resolve(expr)
    if isinstance(data, relax.Call) and data.op.name == "relax.permute_dims":
        return c.resolve(data.args[0])
    return data


def _is_weight(c: _Composite, dq: relax.Call) -> bool:
    data = _unpermuted(c, dq.args[0])
    return isinstance(data, tvm.ir.GenericConst) and str(data.value.dtype) == "int8"


def _mean(c: _Composite) -> list[NpuOp]:
    mean, dq, quantize = c.call("mean"), c.call("dequantize"), c.call("quantize")
    ifm_expr = c.resolve(dq.args[0])
    ifm = _tensor(c.input_name(ifm_expr), ifm_expr, c.quant(dq))
    ofm = _tensor(c.out_name, quantize, c.quant(quantize))
    return legalize_mean(c.out_name, ifm, ofm, [int(a) for a in mean.attrs.axis])


def _pool(c: _Composite, quant_of: dict[str, Quant]) -> Pooling:
    pool = c.call("nn.max_pool2d" if c.kind == "max_pool2d" else "nn.avg_pool2d")
    ifm_name = c.input_name(pool.args[0])
    quant = quant_of.get(ifm_name, UNKNOWN_QUANT)
    ifm_expr = c.resolve(pool.args[0])
    if c.kind == "avg_pool2d":
        ifm_expr = c.resolve(ifm_expr.args[0])
    attrs = pool.attrs
    return Pooling(
        c.out_name,
        "MAX" if c.kind == "max_pool2d" else "AVG",
        _tensor(ifm_name, ifm_expr, quant),
        _tensor(c.out_name, pool, quant),
        _kernel(tuple(int(k) for k in attrs.pool_size), attrs.strides, attrs.dilation),
        _padding(attrs.padding),
        _int8_clamp(c),
    )


_BINARY = {"add": "ADD", "sub": "SUB", "mul": "MUL", "min": "MIN", "max": "MAX"}


def _binary(c: _Composite) -> BinaryElementwise:
    op_name = {"add": "add", "sub": "subtract", "mul": "multiply", "min": "minimum"}.get(
        c.kind, "maximum"
    )
    op = c.call(op_name)
    dq1, dq2 = (c.resolve(a) for a in op.args)
    quantize = c.call("quantize")
    ofm_q = c.quant(quantize)
    return BinaryElementwise(
        c.out_name,
        _BINARY[c.kind],
        _tensor(c.input_name(dq1), dq1, c.quant(dq1)),
        _tensor(c.input_name(dq2), dq2, c.quant(dq2)),
        _tensor(c.out_name, quantize, ofm_q),
        _float_clamp(c, ofm_q),
    )


def lut_values(function: Callable[[np.ndarray], np.ndarray], ifm: Quant, ofm: Quant) -> np.ndarray:
    """The int8 output for each int8 input -128..127 of `function` between two quantisations."""
    q_in = np.arange(-128, 128, dtype=np.float64)
    real = function(ifm.scale * (q_in - ifm.zero_point))
    return np.clip(np.round(real / ofm.scale) + ofm.zero_point, -128, 127).astype(np.int8)


def vela_integer_lut(op_type: VelaOp, ifm: Quant, ofm: Quant, **attrs: float) -> np.ndarray:
    """The int8 table Vela builds for HARD_SWISH or LEAKY_RELU: it replays TFLite's integer
    kernels entry by entry, which a float function rounded once does not match."""
    op = VelaOperation(op_type, "lut")
    for role, quant in (("ifm", ifm), ("ofm", ofm)):
        tensor = VelaTensor([1, 1, 1, 1], DataType.int8, role)
        tensor.quantization = QuantizationParameters(scale_f32=quant.scale)
        tensor.quantization.zero_point = quant.zero_point
        if role == "ifm":
            op.add_input_tensor(tensor)
        else:
            op.set_output_tensor(tensor)
    op.attrs.update(attrs)
    if op_type == VelaOp.LeakyRelu:
        op = convert_lrelu_to_lut(op, None)
    else:
        op = convert_hardswish_to_lut(op, None, None)
    return np.asarray(op.activation_lut.values, np.int64).astype(np.int8)


def _lut(c: _Composite) -> UnaryElementwise:
    dq = c.call("dequantize")
    quantize = c.call("quantize")
    ifm_q, ofm_q = c.quant(dq), c.quant(quantize)
    if c.kind == "hard_swish":
        table = vela_integer_lut(VelaOp.HardSwish, ifm_q, ofm_q)
    elif c.kind == "leaky_relu":
        alpha = float(c.call("nn.leakyrelu").attrs.alpha)
        table = vela_integer_lut(VelaOp.LeakyRelu, ifm_q, ofm_q, alpha=alpha)
    else:
        function = np.tanh if c.kind == "tanh" else lambda x: 1.0 / (1.0 + np.exp(-x))
        table = lut_values(function, ifm_q, ofm_q)
    ifm_expr = c.resolve(dq.args[0])
    return UnaryElementwise(
        c.out_name,
        "LUT",
        _tensor(c.input_name(ifm_expr), ifm_expr, ifm_q),
        _tensor(c.out_name, quantize, ofm_q),
        Activation("LUT", lut=tuple(int(v) for v in table), function=c.kind),
    )


def _identity(c: _Composite, quant_of: dict[str, Quant]) -> Identity:
    if c.kind == "requantize":
        dq, quantize = c.call("dequantize"), c.call("quantize")
        ifm_expr = c.resolve(dq.args[0])
        return Identity(
            c.out_name,
            "REQUANTIZE",
            _tensor(c.input_name(ifm_expr), ifm_expr, c.quant(dq)),
            _tensor(c.out_name, quantize, c.quant(quantize)),
        )
    op = next(iter(c.calls.values()))[0]
    ifm_expr = c.resolve(op.args[0])
    name = c.input_name(ifm_expr)
    quant = quant_of.get(name, UNKNOWN_QUANT)
    return Identity(
        c.out_name, "RESHAPE", _tensor(name, ifm_expr, quant), _tensor(c.out_name, op, quant)
    )


def _softmax(c: _Composite) -> list[NpuOp]:
    dq, quantize = c.call("dequantize"), c.call("quantize")
    ifm_expr = c.resolve(dq.args[0])
    ifm = _tensor(c.input_name(ifm_expr), ifm_expr, c.quant(dq))
    return legalize_softmax(c.out_name, ifm, _tensor(c.out_name, quantize, c.quant(quantize)))


# ---- data movement: block copies between regions of tensors ----------------------------------


def _copy(name: str, ifm: NpuTensor, ofm: NpuTensor, **block) -> Identity:
    """A block copy; it requantizes when the two tensors' quantisations differ."""
    operator = "COPY" if ifm.quant == ofm.quant else "REQUANTIZE"
    return Identity(name, operator, ifm, ofm, **block)


def _int8_input(c: _Composite, quant_of: dict[str, Quant]) -> tuple[relax.Call, NpuTensor]:
    """The composite's one op and its int8 input, quantised as known (NaN until propagated)."""
    op = next(iter(c.calls.values()))[0]
    ifm_expr = c.resolve(op.args[0])
    name = c.input_name(ifm_expr)
    return op, _tensor(name, ifm_expr, quant_of.get(name, UNKNOWN_QUANT))


def _pad(c: _Composite, quant_of: dict[str, Quant]) -> Identity:
    pad, ifm = _int8_input(c, quant_of)
    widths = [int(p) for p in pad.attrs.pad_width]
    return Identity(
        c.out_name,
        "COPY",
        ifm,
        _tensor(c.out_name, pad, ifm.quant),
        region=ifm.shape,
        ofm_offset=tuple(widths[0::2]),
        ofm_fill=int(float(pad.attrs.pad_value)),
    )


def _strided_slice(c: _Composite, quant_of: dict[str, Quant]) -> Identity:
    op, ifm = _int8_input(c, quant_of)
    ofm_shape = _shape(op)
    begin, stride = [0] * len(ifm.shape), [1] * len(ifm.shape)
    fields = [[int(v.value) for v in arg.fields] for arg in op.args[1:5]]
    axes, begins, ends = fields[:3]
    steps = fields[3] if len(fields) > 3 else [1] * len(axes)
    for axis, b, e, st in zip(axes, begins, ends, steps, strict=True):
        begin[axis], _, stride[axis] = slice(b, e, st).indices(ifm.shape[axis])
    ofm = NpuTensor(c.out_name, ofm_shape, ifm.quant)
    return Identity(
        c.out_name,
        "COPY",
        ifm,
        ofm,
        region=ofm_shape,
        ifm_offset=tuple(begin),
        ifm_strides=tuple(stride),
    )


def _split(c: _Composite, quant_of: dict[str, Quant]) -> list[Identity]:
    op, ifm = _int8_input(c, quant_of)
    axis = int(op.attrs.axis) % len(ifm.shape)
    copies, start = [], 0
    for i, part in enumerate(op.ty.fields):
        shape = tuple(int(d) for d in part.shape)
        name = c.item_names.get(i, f"{c.out_name}_{i}")
        offset = tuple(start if a == axis else 0 for a in range(len(shape)))
        ofm = NpuTensor(name, shape, ifm.quant)
        copies.append(Identity(name, "COPY", ifm, ofm, region=shape, ifm_offset=offset))
        start += shape[axis]
    return copies


def _concatenate(c: _Composite) -> list[Identity]:
    concat, quantize = c.call("concat"), c.call("quantize")
    ofm = _tensor(c.out_name, quantize, c.quant(quantize))
    axis = int(concat.attrs.axis) % len(ofm.shape)
    copies, start = [], 0
    for dq in concat.args[0].fields:
        dq = c.resolve(dq)
        ifm_expr = c.resolve(dq.args[0])
        ifm = _tensor(c.input_name(ifm_expr), ifm_expr, c.quant(dq))
        offset = tuple(start if a == axis else 0 for a in range(len(ofm.shape)))
        name = f"{c.out_name}_{len(copies)}" if copies else c.out_name
        copies.append(_copy(name, ifm, ofm, region=ifm.shape, ofm_offset=offset))
        start += ifm.shape[axis]
    return copies


def _resize(c: _Composite, quant_of: dict[str, Quant]) -> list[NpuOp]:
    resize = c.call("image.resize2d")
    attrs = resize.attrs
    mode = str(attrs.coordinate_transformation_mode)
    bilinear = str(attrs.method) == "linear"
    if bilinear:
        dq, quantize = c.call("dequantize"), c.call("quantize")
        ifm_expr = c.resolve(dq.args[0])
        ifm = _tensor(c.input_name(ifm_expr), ifm_expr, c.quant(dq))
        ofm = _tensor(c.out_name, quantize, c.quant(quantize))
    else:
        _, ifm = _int8_input(c, quant_of)
        ofm = _tensor(c.out_name, resize, ifm.quant)
    return legalize_resize(
        c.out_name, ifm, ofm, bilinear, mode == "align_corners", mode == "half_pixel"
    )


def _legalize_composite(c: _Composite, quant_of: dict[str, Quant]) -> list[NpuOp]:
    """The primitive ops of one composite (one op, or several for softmax and friends)."""
    if c.kind in ("conv2d", "depthwise_conv2d", "fully_connected", "transpose_conv2d"):
        return [_conv_like(c)]
    if c.kind in ("max_pool2d", "avg_pool2d"):
        return [_pool(c, quant_of)]
    if c.kind == "mean":
        return _mean(c)
    if c.kind in _BINARY:
        return [_binary(c)]
    if c.kind in ("sigmoid", "tanh", "hard_swish", "leaky_relu"):
        return [_lut(c)]
    if c.kind in ("reshape", "requantize"):
        return [_identity(c, quant_of)]
    if c.kind == "softmax":
        return _softmax(c)
    if c.kind == "pad":
        return [_pad(c, quant_of)]
    if c.kind == "strided_slice":
        return [_strided_slice(c, quant_of)]
    if c.kind == "split":
        return list(_split(c, quant_of))
    if c.kind == "concatenate":
        return list(_concatenate(c))
    if c.kind == "resize":
        return _resize(c, quant_of)
    raise LegalizeError(f"composite {CODEGEN}.{c.kind} has no NPU primitive op yet")


# ---- functions and module -------------------------------------------------------------------


class _TensorNames:
    """Unique tensor names: the model's where the import left them (`_Composite.name_hint`),
    else Relax variable names, whose hints repeat ("lv" for every composite output). A later
    duplicate gets a suffix, as the TVMScript printer numbers them. `taken`: names the
    model's other functions gave their ops, so op names are unique model-wide."""

    def __init__(self, taken: set[str]):
        self.of: dict[relax.Var, str] = {}
        self.used: set[str] = set()
        self.taken = taken

    def fresh(self, hint: str) -> str:
        name, n = hint, 0
        while name in self.used or name in self.taken:
            n += 1
            name = f"{hint}_{n}"
        self.used.add(name)
        return name

    def __call__(self, var: relax.Var, hint: str | None = None) -> str:
        if var not in self.of:
            self.of[var] = self.fresh(hint or var.name)
        return self.of[var]


def _composites(
    func: relax.Function, taken: set[str] | None = None, params: Sequence[str | None] = ()
) -> tuple[list[_Composite], list[str], list[str]]:
    """The composites of one external function in binding (topological) order; `params`:
    names for its parameters where known (`_argument_names`)."""
    name = _TensorNames(taken or set())
    inputs = [name(p, params[i] if i < len(params) else None) for i, p in enumerate(func.params)]
    local: dict[relax.Var, relax.Function] = {}
    composites: list[_Composite] = []
    producer: dict[relax.Var, _Composite] = {}
    for block in func.body.blocks:
        for binding in block.bindings:
            value = binding.value
            if isinstance(value, relax.Function):
                local[binding.var] = value
            elif isinstance(value, relax.Call) and value.op in local:
                c = _Composite(local[value.op], [name(a) for a in value.args])
                c.out_name = name(binding.var, c.name_hint(binding.var.name))
                if c.kind == "split" and c.origin is not None:
                    c.item_names = {i: name.fresh(t) for i, t in enumerate(c.origin.tensors)}
                composites.append(c)
                producer[binding.var] = c
            elif isinstance(value, relax.TupleGetItem) and value.tuple_value in producer:
                c = producer[value.tuple_value]
                index = int(value.index)
                if index in c.item_names:
                    name.of[binding.var] = c.item_names[index]
                else:
                    c.item_names[index] = name(binding.var)
    body = func.body.body
    outputs = [name(f) for f in body.fields] if isinstance(body, relax.Tuple) else []
    if isinstance(body, relax.Var):
        outputs = [name(body)]
    return composites, inputs, outputs


def _known_quants(composites: list[_Composite]) -> dict[str, Quant]:
    """Tensor name -> quantisation, from every dequantize input and quantize output."""
    quant_of: dict[str, Quant] = {}
    for c in composites:
        for dq in c.calls.get("relax.dequantize", []):
            if c.resolve(dq.args[0]) in c.param_name:
                quant_of[c.input_name(dq.args[0])] = c.quant(dq)
        if c.has("quantize"):
            quant_of[c.out_name] = c.quant(c.calls["relax.quantize"][-1])
    return quant_of


def _propagate_copies(ops: list[NpuOp], quant_of: dict[str, Quant]) -> list[NpuOp]:
    """Int8 copies (max pooling, reshape, pad, slices, nearest resize) carry their
    neighbour's quantisation both ways."""
    for _ in range(len(ops)):
        changed = False
        for i, op in enumerate(ops):
            if op.ifm.quant is not op.ofm.quant:  # only int8 copies share one Quant
                continue
            if not np.isnan(op.ifm.quant.scale):
                continue
            quant = quant_of.get(op.ifm.name) or quant_of.get(op.ofm.name)
            if quant is None:
                continue
            ops[i] = replace(op, ifm=replace(op.ifm, quant=quant), ofm=replace(op.ofm, quant=quant))
            quant_of[op.ofm.name] = quant
            changed = True
        if not changed:
            break
    return ops


def ethosu_functions(mod: tvm.IRModule) -> list[tuple[str, relax.Function]]:
    return [
        (gv.name_hint, func)
        for gv, func in mod.functions.items()
        if isinstance(func, relax.Function)
        and func.attrs is not None
        and str(func.attrs.get("Codegen", "")) == CODEGEN
    ]


def _argument_names(mod: tvm.IRModule) -> dict[str, list[str | None]]:
    """Per external function, the model's names for what "main" passes it, where main has
    them: its own parameters (the graph inputs) and host operators' results (their spans).
    A module of external functions alone (the lowering hook's) names none."""
    found: dict[str, list[str | None]] = {}
    if "main" not in [gv.name_hint for gv in mod.functions]:
        return found
    value: dict[relax.Var, relax.Expr] = {}
    for block in mod["main"].body.blocks:
        for binding in block.bindings:
            value[binding.var] = binding.value
            call = binding.value
            if not isinstance(call, relax.Call) or not isinstance(call.op, relax.GlobalVar):
                continue
            names: list[str | None] = []
            for arg in call.args:
                origin = origin_of(value.get(arg, arg))
                if origin is not None and origin[1]:
                    names.append(origin[0].tensor)
                else:
                    names.append(arg.name if arg in mod["main"].params else None)
            found[call.op.name_hint] = names
    return found


def legalize(mod: tvm.IRModule) -> list[NpuFunction]:
    """Every external "ethos-u" function of a partitioned module as NPU primitive ops."""
    return legalize_named(mod)[0]


def legalize_named(
    mod: tvm.IRModule,
) -> tuple[list[NpuFunction], dict[str, TfliteOrigin]]:
    """`legalize`, and the TFLite operator each NPU op stands for, by op name (unique in the
    model), where the import recorded it: an op of a decomposition (softmax, mean, resize)
    stands for the operator it was decomposed from."""
    functions = []
    origins: dict[str, TfliteOrigin] = {}
    taken: set[str] = set()
    arguments = _argument_names(mod)
    for name, func in ethosu_functions(mod):
        composites, inputs, outputs = _composites(func, taken, arguments.get(name, ()))
        quant_of = _known_quants(composites)
        ops = []
        for c in composites:
            made = _legalize_composite(c, quant_of)
            for position, op in enumerate(made):
                origin = c.op_origin(position)
                if origin is not None:
                    origins[op.name] = origin
            ops.extend(made)
        ops = _propagate_copies(ops, quant_of)
        taken.update(op.name for op in ops)
        functions.append(NpuFunction(name, tuple(inputs), tuple(outputs), tuple(ops)))
    return functions, origins


def npu_op_summary(mod: tvm.IRModule) -> Counter[str]:
    """Composite kinds over all external functions: {"conv2d": 35, "add": 10, ...}."""
    counts: Counter[str] = Counter()
    for _, func in ethosu_functions(mod):
        composites, _, _ = _composites(func)
        counts.update(c.kind for c in composites)
    return counts


# ---- small passes over the legalized list ---------------------------------------------------


def remove_identities(function: NpuFunction) -> NpuFunction:
    """Drop reshapes whose input an NPU op of this function produces: a reshape of an NHWC
    buffer is free, its consumers read the producer's tensor directly. A reshape from a
    function input straight to a function output moves bytes between two buffers the runtime
    owns, so it becomes a copy of the input viewed in the output's shape (same NHWC bytes)."""
    produced = {op.ofm.name for op in function.ops}
    renamed: dict[str, NpuTensor] = {}
    kept: list[NpuOp] = []
    for op in function.ops:
        is_reshape = isinstance(op, Identity) and op.operator == "RESHAPE"
        if is_reshape and op.ifm.name in produced and op.ofm.name not in function.outputs:
            renamed[op.ofm.name] = renamed.get(op.ifm.name, op.ifm)
            continue
        if is_reshape and op.ifm.name in function.inputs and op.ofm.name in function.outputs:
            op = replace(op, operator="COPY", ifm=replace(op.ifm, shape=op.ofm.shape))
        kept.append(_rewire(op, renamed))
    return replace(function, ops=tuple(kept))


def _rewire(op: NpuOp, renamed: dict[str, NpuTensor]) -> NpuOp:
    changes = {}
    for slot in ("ifm", "ifm2"):
        tensor = getattr(op, slot, None)
        if tensor is not None and tensor.name in renamed:
            source = renamed[tensor.name]
            changes[slot] = replace(tensor, name=source.name, layout=Layout.NHWC)
    return replace(op, **changes) if changes else op


def _reshapes(op: NpuOp) -> bool:
    return isinstance(op, Identity) and op.operator == "RESHAPE"


def choose_layouts(function: NpuFunction) -> NpuFunction:
    """NHCWB16 for tensors only NPU ops of this function read (as the original
    LayoutOptimizer did); function inputs/outputs and reshaped or reshape-viewed tensors stay
    NHWC. Block copies (concatenation, split, slice, pad) address bricks as any NPU op does;
    those at a channel offset a brick cannot start at are made NHWC when the network is
    built (`cascader.schedule.network`), as Vela does."""
    consumers: dict[str, list[NpuOp]] = {}
    for op in function.ops:
        for slot in ("ifm", "ifm2"):
            tensor = getattr(op, slot, None)
            if tensor is not None:
                consumers.setdefault(tensor.name, []).append(op)
    keep_nhwc = set(function.inputs) | set(function.outputs)
    shapes: dict[str, set[tuple[int, ...]]] = {}
    for op in function.ops:
        if _reshapes(op):
            keep_nhwc.update((op.ifm.name, op.ofm.name))
        for slot in ("ifm", "ifm2", "ofm"):
            tensor = getattr(op, slot, None)
            if tensor is not None:
                shapes.setdefault(tensor.name, set()).add(tensor.shape)
    # A tensor some op reads under another shape (softmax, mean views) is a reshape in place.
    keep_nhwc.update(name for name, seen in shapes.items() if len(seen) > 1)
    brick = {
        op.ofm.name
        for op in function.ops
        if op.ofm.name not in keep_nhwc
        and op.ofm.name in consumers
        and len(op.ofm.shape) == 4
        and not any(_reshapes(c) for c in consumers[op.ofm.name])
    }

    def relayout(tensor: NpuTensor | None) -> NpuTensor | None:
        if tensor is None:
            return None
        return replace(tensor, layout=Layout.NHCWB16 if tensor.name in brick else Layout.NHWC)

    ops = []
    for op in function.ops:
        changes = {"ifm": relayout(op.ifm), "ofm": relayout(op.ofm)}
        if isinstance(op, BinaryElementwise):
            changes["ifm2"] = relayout(op.ifm2)
        ops.append(replace(op, **changes))
    return replace(function, ops=tuple(ops))
