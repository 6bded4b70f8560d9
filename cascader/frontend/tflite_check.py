"""Structural checks on a TFLite flatbuffer before TVM sees it.

The TFLite frontend trusts its input: a truncated file surfaces as a struct or numpy error deep
inside it, and a float model imports fine and only fails later. Walking every table once here
turns both into a one-line `ModelError`.
"""

from __future__ import annotations

import struct

import numpy as np
import tflite
from tflite.BuiltinOperator import BuiltinOperator
from tflite.TensorType import TensorType

from cascader.frontend.errors import ModelError

TFLITE_IDENTIFIER = b"TFL3"

FLOAT_MESSAGE = (
    "model is not fully int8-quantised (found float op {op}); "
    "quantise it with full-integer post-training quantisation"
)

_BUILTIN_NAMES: dict[int, str] = {
    code: name for name, code in vars(BuiltinOperator).items() if not name.startswith("_")
}
_FLOAT_TYPES = frozenset({TensorType.FLOAT16, TensorType.FLOAT32, TensorType.FLOAT64})
_ITEM_BYTES = {
    TensorType.FLOAT16: 2,
    TensorType.FLOAT32: 4,
    TensorType.FLOAT64: 8,
    TensorType.INT8: 1,
    TensorType.UINT8: 1,
    TensorType.INT16: 2,
    TensorType.INT32: 4,
    TensorType.INT64: 8,
    TensorType.BOOL: 1,
}
# Ops that legitimately touch float tensors in a fully quantised model: they convert the
# model's float interface to and from int8 at its edges.
_INTERFACE_OPS = frozenset({"QUANTIZE", "DEQUANTIZE"})


def builtin_name(model: tflite.Model, op: tflite.Operator) -> str:
    """The builtin operator name (e.g. "CONV_2D") of `op`; custom ops give "CUSTOM"."""
    code = model.OperatorCodes(op.OpcodeIndex())
    return _BUILTIN_NAMES.get(max(code.BuiltinCode(), code.DeprecatedBuiltinCode()), "CUSTOM")


def parse_tflite(buf: bytes, name: str) -> tflite.Model:
    """Parse and fully validate `buf`; raises ModelError naming `name` on any defect."""
    if len(buf) < 8 or buf[4:8] != TFLITE_IDENTIFIER:
        found = bytes(buf[4:8]) if len(buf) >= 8 else b""
        raise ModelError(
            f"{name}: not a TFLite file (identifier {found!r}, expected {TFLITE_IDENTIFIER!r})"
        )
    try:
        model = tflite.Model.GetRootAsModel(buf, 0)
        _walk(model, len(buf))
        _require_int8(model)
    except ModelError:
        raise
    except (struct.error, IndexError, ValueError, TypeError, OverflowError) as err:
        raise ModelError(f"{name}: truncated or corrupt TFLite file ({err})") from err
    return model


def _walk(model: tflite.Model, size: int) -> None:
    """Touch every table and vector so out-of-range offsets fail here, not in the frontend."""
    if model.SubgraphsLength() < 1:
        raise ValueError("no subgraphs")
    n_codes = model.OperatorCodesLength()
    for c in range(n_codes):
        code = model.OperatorCodes(c)
        code.BuiltinCode()
        code.DeprecatedBuiltinCode()
    n_buffers = model.BuffersLength()
    for b in range(n_buffers):
        buffer = model.Buffers(b)
        if buffer.DataLength():
            buffer.DataAsNumpy()
        if buffer.Offset() > 1 and buffer.Offset() + buffer.Size() > size:
            raise ValueError(f"buffer {b} lies beyond the end of the file")
    for s in range(model.SubgraphsLength()):
        subgraph = model.Subgraphs(s)
        n_tensors = subgraph.TensorsLength()
        for t in range(n_tensors):
            _check_tensor(model, subgraph.Tensors(t), n_buffers)
        for i in range(subgraph.OperatorsLength()):
            op = subgraph.Operators(i)
            if not 0 <= op.OpcodeIndex() < n_codes:
                raise ValueError(f"operator {i} has opcode index {op.OpcodeIndex()}")
            for idx in (*_indices(op.InputsAsNumpy()), *_indices(op.OutputsAsNumpy())):
                if not -1 <= idx < n_tensors:
                    raise ValueError(f"operator {i} refers to tensor {idx}")
        for idx in (*_indices(subgraph.InputsAsNumpy()), *_indices(subgraph.OutputsAsNumpy())):
            if not 0 <= idx < n_tensors:
                raise ValueError(f"subgraph {s} refers to tensor {idx}")


def _indices(vector: np.ndarray | int) -> list[int]:
    """flatbuffers returns 0 for an absent vector; treat it as empty."""
    return [] if isinstance(vector, int) else [int(v) for v in vector]


def _check_tensor(model: tflite.Model, tensor: tflite.Tensor, n_buffers: int) -> None:
    shape = _indices(tensor.ShapeAsNumpy())
    if not 0 <= tensor.Buffer() < n_buffers:
        raise ValueError(f"tensor {tensor.Name()!r} refers to buffer {tensor.Buffer()}")
    quant = tensor.Quantization()
    if quant is not None:
        quant.ScaleAsNumpy()
        quant.ZeroPointAsNumpy()
    data_len = model.Buffers(tensor.Buffer()).DataLength()
    item = _ITEM_BYTES.get(tensor.Type())
    if data_len and item and tensor.Sparsity() is None:
        expected = int(np.prod(shape, dtype=np.int64)) * item
        if expected != data_len:
            raise ValueError(
                f"tensor {tensor.Name()!r} holds {data_len} bytes, its shape needs {expected}"
            )


def _require_int8(model: tflite.Model) -> None:
    """Reject float and dynamic-range models: any op but the interface ops touching floats."""
    for s in range(model.SubgraphsLength()):
        subgraph = model.Subgraphs(s)
        for i in range(subgraph.OperatorsLength()):
            op = subgraph.Operators(i)
            name = builtin_name(model, op)
            if name in _INTERFACE_OPS:
                continue
            tensors = (*_indices(op.InputsAsNumpy()), *_indices(op.OutputsAsNumpy()))
            if any(t >= 0 and subgraph.Tensors(t).Type() in _FLOAT_TYPES for t in tensors):
                raise ModelError(FLOAT_MESSAGE.format(op=name))
