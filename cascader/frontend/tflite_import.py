"""TFLite -> Relax import: TVM's own TFLite frontend, taught the quantized ops real models use.

The stock converter refuses any quantized operator outside its QDQ-aware list, including pure
data-movement ops (PAD, STRIDED_SLICE, SPLIT, ...) that are exact on int8 data. We subclass its
OperatorConverter, admit those ops, and requantize where TFLite lets their output qparams
differ from the input's, so the result stays in the frontend's QDQ form.
"""

from __future__ import annotations

import functools
import gc
import os
import struct
from collections.abc import Callable
from pathlib import Path

import numpy as np
import tvm
from tvm import relax
from tvm.relax.frontend.tflite import from_tflite
from tvm.relax.frontend.tflite.tflite_frontend import (
    OperatorConverter,
    get_scalar_from_constant,
    get_tensor_name,
)

from cascader.frontend.errors import ModelError
from cascader.frontend.origins import stamp
from cascader.frontend.tflite_check import parse_tflite, read_model
from cascader.ir.origins import TfliteOrigin

# Ops that only move or select int8 values: exact on quantized data when the output has the
# input's scale and zero point; otherwise a requantize follows (see _requantized).
DATA_MOVEMENT_OPS = frozenset(
    {
        "BATCH_TO_SPACE_ND",
        "DEPTH_TO_SPACE",
        "EXPAND_DIMS",
        "PACK",
        "RESIZE_NEAREST_NEIGHBOR",
        "SLICE",
        "SPACE_TO_BATCH_ND",
        "SPACE_TO_DEPTH",
        "SPLIT",
        "SPLIT_V",
        "SQUEEZE",
        "STRIDED_SLICE",
        "TILE",
        "TRANSPOSE",
        "UNPACK",
    }
)
PAD_OPS = frozenset({"PAD", "PADV2"})


class EthosUOperatorConverter(OperatorConverter):
    """The stock converter plus quantized data movement, PAD with its zero-point fill, and
    FULLY_CONNECTED over inputs of rank > 2 (flattened as TFLite does). Every expression it
    builds carries the TFLite operator it stands for (`cascader.frontend.origins`)."""

    _SUPPORTED_QUANTIZED_OPS = (
        OperatorConverter._SUPPORTED_QUANTIZED_OPS | DATA_MOVEMENT_OPS | PAD_OPS
    )

    def __init__(self, model, subgraph, exp_tab, ctx, conversion_state=None):
        super().__init__(model, subgraph, exp_tab, ctx, conversion_state)
        for name in DATA_MOVEMENT_OPS:
            self.convert_map[name] = self._requantized(self.convert_map[name])
        for name in PAD_OPS:
            self.convert_map[name] = self.convert_quantized_pad
        self._op_index = {
            subgraph.Operators(i)._tab.Pos: i for i in range(subgraph.OperatorsLength())
        }
        self.convert_map = {name: self._stamped(f) for name, f in self.convert_map.items()}

    def _stamped(self, convert: Callable) -> Callable:
        """`convert` with its result stamped with the operator's origin. An operator with
        several outputs returns a tuple of them (each stamped as its own tensor's) or one
        call of tuple type (a split: stamped with every output's name)."""

        @functools.wraps(convert)
        def wrapper(op):
            out = convert(op=op)
            if out is None:
                return out
            index, kind = self._op_index[op._tab.Pos], self.get_op_code_str(op)
            names = tuple(
                get_tensor_name(self.subgraph, t.tensor_idx) for t in self.get_output_tensors(op)
            )
            if isinstance(out, relax.Tuple) and len(out.fields) == len(names) > 1:
                fields = [
                    stamp(f, TfliteOrigin((name,), index, kind), self.bb)
                    for f, name in zip(out.fields, names, strict=True)
                ]
                return relax.Tuple(fields)
            return stamp(out, TfliteOrigin(names, index, kind), self.bb)

        return wrapper

    def get_tensor_expr(self, tensor, is_sparse=False):
        override = getattr(self, "_input_override", None)
        if override is not None and tensor.tensor_idx == override[0]:
            return override[1]
        return super().get_tensor_expr(tensor, is_sparse)

    def convert_fully_connected(self, op):
        """TFLite flattens the input to [-1, n_inputs] unless keep_num_dims; the stock
        converter multiplies the unflattened input. Flatten when the last axis is not the
        reduction, and give the result the output tensor's shape either way."""
        src, weight = self.get_input_tensors(op)[:2]
        n_units, n_inputs = (int(v) for v in self.get_tensor_shape(weight))
        in_shape = [int(v) for v in self.get_tensor_shape(src)]
        if in_shape[-1] != n_inputs:
            in_shape = [int(np.prod(in_shape)) // n_inputs, n_inputs]
            self._input_override = (
                src.tensor_idx,
                relax.op.reshape(super().get_tensor_expr(src), in_shape),
            )
        try:
            out = super().convert_fully_connected(op)
        finally:
            self._input_override = None
        out_shape = [int(v) for v in self.get_tensor_shape(self.get_output_tensors(op)[0])]
        if [*in_shape[:-1], n_units] == out_shape:
            return out
        return relax.op.reshape(out, out_shape)

    def convert_softmax(self, op):
        """The stock converter drops SOFTMAX's beta. softmax(beta * x) over a quantized input
        is softmax over the input dequantized with scale beta x scale, so beta is folded into
        the dequantize's scale (the only place Vela's int8 softmax uses either: its exp table
        is built from beta x scale). Relax scales are float32, so the product is rounded to
        float32: exact when beta is a power of two."""
        beta = _softmax_beta(op)
        src = self.get_input_tensors(op)[0]
        if beta == 1.0 or src.qnn_params is None:
            return super().convert_softmax(op)
        scale = np.float32(np.float64(beta) * np.float64(_qparam(src, "scale")))
        dequantized = relax.op.dequantize(
            self.get_expr(src.tensor_idx),
            relax.const(scale, "float32"),
            src.qnn_params["zero_point"],
            axis=src.qnn_params["axis"],
        )
        out = relax.op.nn.softmax(dequantized, axis=-1)
        dst = self.get_output_tensors(op)[0]
        return self.quantize(out, dst) if dst.qnn_params is not None else out

    def _same_qnn(self, lhs, rhs) -> bool:
        if lhs.qnn_params is None or rhs.qnn_params is None:
            return lhs.qnn_params is rhs.qnn_params
        return self.has_same_qnn_params(lhs, rhs)

    def _requantize_to(self, expr: relax.Expr, src, dst) -> relax.Expr:
        """`expr` carries `src`'s qparams; re-express it in `dst`'s (QDQ form)."""
        if self._same_qnn(src, dst):
            return expr
        return self.quantize(self.dequantize(expr, src), dst)

    def _requantized(self, convert: Callable) -> Callable:
        @functools.wraps(convert)
        def wrapper(op):
            out = convert(op=op)
            quantized = [t for t in self.get_input_tensors(op) if t.qnn_params is not None]
            if not quantized:
                return out
            src = quantized[0]
            dsts = self.get_output_tensors(op)
            if len(dsts) == 1:
                return self._requantize_to(out, src, dsts[0])
            if not all(self._same_qnn(src, dst) for dst in dsts):
                raise tvm.error.OpNotImplemented(
                    f"{self.get_op_code_str(op)} with outputs quantized unlike its input"
                )
            return out

        return wrapper

    def convert_quantized_pad(self, op):
        """PAD/PADV2: the fill is the input zero point (real 0) unless PADV2 gives a value."""
        inputs = self.get_input_tensors(op)
        src, dst = inputs[0], self.get_output_tensors(op)[0]
        if src.qnn_params is None:
            return self.convert_pad(op)
        pad_width = [int(v) for v in np.asarray(self.get_tensor_value(inputs[1])).reshape(-1)]
        if len(inputs) == 3:
            fill = self.get_tensor_value(inputs[2])
            fill_value = float(np.asarray(fill).reshape(-1)[0])
            fill_value = self._requantized_scalar(fill_value, inputs[2], src)
        else:
            fill_value = float(_qparam(src, "zero_point"))
        padded = relax.op.nn.pad(self.get_expr(src.tensor_idx), pad_width, pad_value=fill_value)
        return self._requantize_to(padded, src, dst)

    @staticmethod
    def _requantized_scalar(value: float, src, dst) -> float:
        """A quantized constant of `src`'s qparams expressed in `dst`'s."""
        if src.qnn_params is None:
            return value
        real = (value - _qparam(src, "zero_point")) * _qparam(src, "scale")
        return float(round(real / _qparam(dst, "scale")) + _qparam(dst, "zero_point"))


def _softmax_beta(op) -> float:
    """A SOFTMAX operator's beta (1.0 when the model leaves out its options)."""
    from tflite.SoftmaxOptions import SoftmaxOptions

    table = op.BuiltinOptions()
    if table is None:
        return 1.0
    options = SoftmaxOptions()
    options.Init(table.Bytes, table.Pos)
    return float(options.Beta())


def _qparam(tensor, key: str) -> float:
    return float(get_scalar_from_constant(tensor.qnn_params[key]))


def load_tflite(path: str | Path) -> bytes:
    """Read and validate a TFLite model file; raises ModelError with a one-line reason."""
    buf = read_model(path)
    parse_tflite(buf, str(path))
    return buf


# What TVM's frontend raises on contents it did not expect (a structurally sound file can
# still hold inconsistent ones that the checks in tflite_check do not cover).
_FRONTEND_ERRORS = (
    RuntimeError,  # TVM's errors (OpError, InternalError, ...) and RecursionError
    AssertionError,
    ArithmeticError,
    AttributeError,
    LookupError,
    ValueError,
    TypeError,
    struct.error,
)


def import_tflite(buf: bytes, name: str = "model") -> tvm.IRModule:
    """Validated TFLite bytes -> Relax IRModule in QDQ form (function "main", params attached)."""
    model = parse_tflite(buf, name)
    try:
        return from_tflite(model, op_converter=EthosUOperatorConverter)
    except NotImplementedError as err:
        reason = _one_line(err)
        _collect_quietly(err)
        raise ModelError(f"{name}: the TFLite frontend cannot import it: {reason}") from None
    except _FRONTEND_ERRORS as err:
        reason = f"{type(err).__name__}: {_one_line(err)}"
        _collect_quietly(err)
        raise ModelError(f"{name}: corrupt TFLite model ({reason})") from None


def _collect_quietly(err: BaseException) -> None:
    """Drop the failed import's frames now, with stderr closed: TVM warns on stderr when it
    frees a BlockBuilder left in a function scope, which would add a second line to the
    command's one-line error."""
    err.__traceback__ = None
    stderr = 2  # where TVM's C++ logging writes, whatever sys.stderr is
    saved = os.dup(stderr)
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), stderr)
            gc.collect()
    finally:
        os.dup2(saved, stderr)
        os.close(saved)


def _one_line(err: Exception) -> str:
    text = " ".join(str(err).split()) or type(err).__name__
    return text if len(text) <= 200 else text[:197] + "..."
