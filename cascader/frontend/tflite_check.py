"""Checks on a TFLite model before TVM or Vela see it.

TVM's frontend and Vela trust their input: a corrupt offset reads other bytes, a zero point of
2**63 - 1 overflows inside TVM, a stride of 0 divides by zero, an infinite scale breaks Vela's
scaling. Here the file is read only when it is a regular file of bounded size, its flatbuffer
is verified (`tflite_verify`), and every index, shape, quantisation parameter and operator
option the flow uses is checked against what TFLite defines and the NPU and Vela accept, so
each defect is one `ModelError` naming where it is and what to do.
"""

from __future__ import annotations

import math
import os
import stat
import struct
from pathlib import Path

import numpy as np
import tflite
from tflite.BuiltinOperator import BuiltinOperator
from tflite.TensorType import TensorType

from cascader.frontend.errors import ModelError
from cascader.frontend.tflite_ops import TYPE_NAMES, check_operator
from cascader.frontend.tflite_verify import FlatbufferError, verify_flatbuffer
from cascader.ir.origins import TfliteOrigin

TFLITE_IDENTIFIER = b"TFL3"
MAX_MODEL_BYTES = 256 << 20
MAX_TENSOR_ELEMENTS = 1 << 28
MAX_DIM = 1 << 24

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
# Zero points TVM and Vela can hold (int32 constants), per storage type.
_ZERO_POINTS = {
    TensorType.INT8: (-128, 127),
    TensorType.UINT8: (0, 255),
    TensorType.INT16: (-32768, 32767),
}
_INT32 = (-(1 << 31), (1 << 31) - 1)
# Ops that legitimately touch float tensors in a fully quantised model: they convert the
# model's float interface to and from int8 at its edges.
_INTERFACE_OPS = frozenset({"QUANTIZE", "DEQUANTIZE"})


def builtin_name(model: tflite.Model, op: tflite.Operator) -> str:
    """The builtin operator name (e.g. "CONV_2D") of `op`; custom ops give "CUSTOM"."""
    code = model.OperatorCodes(op.OpcodeIndex())
    return _BUILTIN_NAMES.get(max(code.BuiltinCode(), code.DeprecatedBuiltinCode()), "CUSTOM")


def operator_origins(model: tflite.Model) -> tuple[TfliteOrigin, ...]:
    """Every operator of subgraph 0 in order, as per-layer results name it (its output
    tensors' names, its index, its builtin name); for a model `parse_tflite` checked."""
    subgraph = model.Subgraphs(0)
    origins = []
    for index in range(subgraph.OperatorsLength()):
        op = subgraph.Operators(index)
        outputs = [int(t) for t in _indices(op.OutputsAsNumpy()) if t >= 0]
        names = tuple((subgraph.Tensors(t).Name() or b"").decode("utf-8", "replace")
                      for t in outputs)  # fmt: skip
        origins.append(TfliteOrigin(names or ("",), index, builtin_name(model, op)))
    return tuple(origins)


def read_model(path: str | Path) -> bytes:
    """The bytes of a model file: only a regular file (a FIFO or device would block or never
    end), at most MAX_MODEL_BYTES, opened without waiting for a writer."""
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError as err:
        raise ModelError(f"{path}: model file not found") from err
    except OSError as err:
        raise ModelError(f"{path}: cannot read model file ({err.strerror})") from err
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_MODEL_BYTES:
        os.close(fd)
    if stat.S_ISDIR(info.st_mode):
        raise ModelError(f"{path}: is a directory, not a TFLite file")
    if not stat.S_ISREG(info.st_mode):
        raise ModelError(f"{path}: not a regular file; give a .tflite file")
    if info.st_size > MAX_MODEL_BYTES:
        raise ModelError(
            f"{path}: {info.st_size} bytes, more than the {MAX_MODEL_BYTES >> 20} MiB a model "
            "may have; give the .tflite file itself"
        )
    with os.fdopen(fd, "rb") as f:
        try:
            return f.read(MAX_MODEL_BYTES + 1)
        except OSError as err:
            raise ModelError(f"{path}: cannot read model file ({err.strerror})") from err


def parse_tflite(buf: bytes, name: str) -> tflite.Model:
    """Parse and fully validate `buf`; raises ModelError naming `name` on any defect."""
    if len(buf) < 8 or buf[4:8] != TFLITE_IDENTIFIER:
        found = bytes(buf[4:8]) if len(buf) >= 8 else b""
        raise ModelError(
            f"{name}: not a TFLite file (identifier {found!r}, expected {TFLITE_IDENTIFIER!r})"
        )
    if len(buf) > MAX_MODEL_BYTES:
        raise ModelError(f"{name}: more than the {MAX_MODEL_BYTES >> 20} MiB a model may have")
    try:
        verify_flatbuffer(buf)
    except FlatbufferError as err:
        raise ModelError(
            f"{name}: truncated or corrupt TFLite file ({err}); export the model again"
        ) from None
    model = tflite.Model.GetRootAsModel(buf, 0)
    try:
        _check_parsed(model, len(buf), name)
    except struct.error:  # a scalar the verifier could not size runs past the file's end
        raise ModelError(
            f"{name}: truncated or corrupt TFLite file; export the model again"
        ) from None
    return model


def _check_parsed(model: tflite.Model, size: int, name: str) -> None:
    """Every check of a verified model: its tables, its types, each operator."""
    _check_model(model, size, name)
    _require_int8(model)
    for s in range(model.SubgraphsLength()):
        subgraph = model.Subgraphs(s)
        where = f"{name}: subgraph {s}" if model.SubgraphsLength() > 1 else name
        for i in range(subgraph.OperatorsLength()):
            op = subgraph.Operators(i)
            kind = builtin_name(model, op)
            check_operator(model, subgraph, op, kind, f"{where}: operator {i} ({kind})")


def _label(subgraph: tflite.SubGraph, index: int) -> str:
    raw = subgraph.Tensors(index).Name() or b""
    text = raw.decode("utf-8", "replace")
    shown = text if len(text) <= 48 else text[:45] + "..."
    return f"tensor {index} ({shown!r})" if text else f"tensor {index}"


def _indices(vector: np.ndarray | int) -> list[int]:
    """flatbuffers returns 0 for an absent vector; treat it as empty."""
    return [] if isinstance(vector, int) else [int(v) for v in vector]


def _check_model(model: tflite.Model, size: int, name: str) -> None:
    if model.SubgraphsLength() < 1:
        raise ModelError(f"{name}: the model has no subgraph; export it again")
    n_codes = model.OperatorCodesLength()
    for c in range(n_codes):
        code = model.OperatorCodes(c)
        builtin = max(code.BuiltinCode(), code.DeprecatedBuiltinCode())
        if builtin not in _BUILTIN_NAMES:
            raise ModelError(
                f"{name}: operator code {c} is builtin operator {builtin}, which TFLite does "
                "not define; export the model with a released TFLite converter"
            )
    n_buffers = model.BuffersLength()
    for b in range(n_buffers):
        buffer = model.Buffers(b)
        if buffer.Offset() > 1 and buffer.Offset() + buffer.Size() > size:
            raise ModelError(
                f"{name}: buffer {b} lies beyond the end of the file (truncated); copy the "
                "whole file"
            )
    for s in range(model.SubgraphsLength()):
        _check_subgraph(model, s, n_codes, n_buffers, name)
    for d in range(model.SignatureDefsLength()):
        signature = model.SignatureDefs(d)
        if signature.SubgraphIndex() >= model.SubgraphsLength():
            raise ModelError(
                f"{name}: signature {d} names subgraph {signature.SubgraphIndex()} of "
                f"{model.SubgraphsLength()}; export the model again"
            )


def _check_subgraph(model: tflite.Model, s: int, n_codes: int, n_buffers: int, name: str) -> None:
    subgraph = model.Subgraphs(s)
    where = f"{name}: subgraph {s}" if model.SubgraphsLength() > 1 else name
    n_tensors = subgraph.TensorsLength()
    opaque = _custom_only(model, subgraph, n_codes)
    held = [
        _check_tensor(model, subgraph, t, n_buffers, where, t in opaque) for t in range(n_tensors)
    ]
    graph_inputs = _indices(subgraph.InputsAsNumpy())
    for kind, indices in (("input", graph_inputs), ("output", _indices(subgraph.OutputsAsNumpy()))):
        for idx in indices:
            if not 0 <= idx < n_tensors:
                raise ModelError(
                    f"{where}: graph {kind} refers to tensor {idx} of {n_tensors}; the file is "
                    "corrupt, export it again"
                )
    # Operators are stored in execution order: each input is a graph input, a constant or
    # the output of an earlier operator, and each tensor is written once.
    defined = set(graph_inputs) | {t for t in range(n_tensors) if held[t]}
    for i in range(subgraph.OperatorsLength()):
        op = subgraph.Operators(i)
        if not 0 <= op.OpcodeIndex() < n_codes:
            raise ModelError(
                f"{where}: operator {i} uses operator code {op.OpcodeIndex()} of {n_codes}; "
                "the file is corrupt, export it again"
            )
        kind = builtin_name(model, op)
        at = f"{where}: operator {i} ({kind})"
        for idx in _indices(op.InputsAsNumpy()):
            if idx == -1:
                continue  # an omitted optional input; check_operator knows which may be
            if not 0 <= idx < n_tensors:
                raise ModelError(f"{at} reads tensor {idx} of {n_tensors}; the file is corrupt")
            if idx not in defined and kind == "CUSTOM":
                defined.add(idx)  # working memory, such as the scratch areas of Ethos-U ops
            elif idx not in defined:
                raise ModelError(
                    f"{at} reads {_label(subgraph, idx)} before any operator writes it; the "
                    "operators are not in execution order, export the model again"
                )
        outputs = _indices(op.OutputsAsNumpy())
        if not outputs:
            raise ModelError(f"{at} has no output; export the model again")
        for idx in outputs:
            if not 0 <= idx < n_tensors:
                raise ModelError(f"{at} writes tensor {idx} of {n_tensors}; the file is corrupt")
            if idx in defined:
                raise ModelError(
                    f"{at} writes {_label(subgraph, idx)}, which is a constant, a graph input "
                    "or another operator's output; export the model again"
                )
            defined.add(idx)
    _check_every_operator_counts(model, subgraph, where)


def _check_every_operator_counts(
    model: tflite.Model, subgraph: tflite.SubGraph, where: str
) -> None:
    """Each graph output is computed by an operator, and each operator's result reaches a
    graph output or another operator: a dead operator is no model a converter writes (and
    TVM warns of it on stderr)."""
    ops = [subgraph.Operators(i) for i in range(subgraph.OperatorsLength())]
    written = {idx for op in ops for idx in _indices(op.OutputsAsNumpy())}
    graph_outputs = set(_indices(subgraph.OutputsAsNumpy()))
    for idx in sorted(graph_outputs - written):
        raise ModelError(
            f"{where}: graph output {_label(subgraph, idx)} is computed by no operator (it "
            "is a constant, a graph input or never written); export the model again"
        )
    used = graph_outputs | {idx for op in ops for idx in _indices(op.InputsAsNumpy())}
    for i, op in enumerate(ops):
        if not used.intersection(_indices(op.OutputsAsNumpy())):
            raise ModelError(
                f"{where}: operator {i} ({builtin_name(model, op)}) computes what no operator "
                "reads and no graph output is; export the model again without it"
            )


def _custom_only(model: tflite.Model, subgraph: tflite.SubGraph, n_codes: int) -> set[int]:
    """The tensors only custom operators touch: an Ethos-U op's command stream, constants
    and scratch areas in Vela's layout, byte arrays of any length, empty ones included."""
    custom, other = set(), set()
    for i in range(subgraph.OperatorsLength()):
        op = subgraph.Operators(i)
        known = 0 <= op.OpcodeIndex() < n_codes  # else refused with the operators' checks
        touched = _indices(op.InputsAsNumpy()) + _indices(op.OutputsAsNumpy())
        is_custom = known and builtin_name(model, op) == "CUSTOM"
        (custom if is_custom else other).update(touched)
    return custom - other - set(_indices(subgraph.OutputsAsNumpy()))


def _check_tensor(
    model: tflite.Model,
    subgraph: tflite.SubGraph,
    t: int,
    n_buffers: int,
    where: str,
    opaque: bool = False,
) -> bool:
    """Check tensor `t`; returns whether it holds a value before any operator runs (a
    constant or a variable). An `opaque` tensor (`_custom_only`) may be empty or longer
    than an NPU dimension."""
    tensor = subgraph.Tensors(t)
    at = f"{where}: {_label(subgraph, t)}"
    if tensor.Type() not in TYPE_NAMES:
        raise ModelError(f"{at} has tensor type {tensor.Type()}, which TFLite does not define")
    if not 0 <= tensor.Buffer() < n_buffers:
        raise ModelError(f"{at} refers to buffer {tensor.Buffer()} of {n_buffers}; corrupt file")
    if tensor.Sparsity() is not None:
        raise ModelError(f"{at} is sparse; the NPU and Vela take dense tensors: densify it")
    shape = _indices(tensor.ShapeAsNumpy())
    low, high = (0, MAX_TENSOR_ELEMENTS) if opaque else (1, MAX_DIM)
    if any(not low <= d <= high for d in shape):
        raise ModelError(
            f"{at} has shape {shape}; every dimension must be {low} to {high} (a dynamic or "
            "empty shape cannot run on the NPU): export the model with fixed shapes"
        )
    elements = math.prod(shape)
    if elements > MAX_TENSOR_ELEMENTS:
        raise ModelError(
            f"{at} has {elements} elements, more than the {MAX_TENSOR_ELEMENTS} dse takes"
        )
    buffer = model.Buffers(tensor.Buffer())
    data_len = buffer.DataLength()
    constant = data_len > 0 or buffer.Offset() > 1
    item = _ITEM_BYTES.get(tensor.Type())
    if data_len and item and elements * item != data_len:
        raise ModelError(
            f"{at} holds {data_len} bytes, its shape {shape} needs {elements * item}; the file "
            "is corrupt, export it again"
        )
    if not constant and len(shape) == 4 and shape[0] != 1:
        raise ModelError(
            f"{at} has batch {shape[0]}; the NPU runs batch 1: export the model with batch 1"
        )
    _check_quantization(tensor, shape, at)
    return constant or tensor.IsVariable()


def _check_quantization(tensor: tflite.Tensor, shape: list[int], at: str) -> None:
    quant = tensor.Quantization()
    if quant is None or (quant.ScaleLength() == 0 and quant.ZeroPointLength() == 0):
        return
    scales = quant.ScaleAsNumpy() if quant.ScaleLength() else np.zeros(0, np.float32)
    zero_points = quant.ZeroPointAsNumpy() if quant.ZeroPointLength() else np.zeros(0, np.int64)
    if len(scales) != len(zero_points):
        raise ModelError(
            f"{at} has {len(scales)} scales and {len(zero_points)} zero points; TFLite needs "
            "one zero point per scale: quantise the model again"
        )
    if not np.all(np.isfinite(scales)) or not np.all(scales > 0):
        bad = next(float(s) for s in scales if not (math.isfinite(s) and s > 0))
        raise ModelError(
            f"{at} has quantisation scale {bad}; scales must be finite and positive: quantise "
            "the model again"
        )
    low, high = _ZERO_POINTS.get(tensor.Type(), _INT32)
    if int(zero_points.min()) < low or int(zero_points.max()) > high:
        bad = next(int(z) for z in zero_points if not low <= int(z) <= high)
        type_name = TYPE_NAMES[tensor.Type()].lower()
        raise ModelError(
            f"{at} has zero point {bad}, outside {low}..{high} for {type_name}: quantise the "
            "model again"
        )
    if len(scales) > 1:
        axis = quant.QuantizedDimension()
        if not 0 <= axis < len(shape) or shape[axis] != len(scales):
            raise ModelError(
                f"{at} has {len(scales)} per-axis scales along dimension {axis} of shape "
                f"{shape}; there must be one per entry of that dimension: quantise it again"
            )
        if np.any(zero_points != 0):
            raise ModelError(
                f"{at} is quantised per axis with non-zero zero points; TFLite requires 0: "
                "quantise the model again"
            )


# Graph input and output types the flow imports (a float one is refused as a float model).
_IO_TYPES = frozenset({*_ZERO_POINTS, *_FLOAT_TYPES, TensorType.INT32})


def _require_int8(model: tflite.Model) -> None:
    """Reject float and dynamic-range models: any op but the interface ops touching floats;
    and graph inputs or outputs of a type the flow cannot import (string, bool, ...)."""
    for s in range(model.SubgraphsLength()):
        subgraph = model.Subgraphs(s)
        for t in (*_indices(subgraph.InputsAsNumpy()), *_indices(subgraph.OutputsAsNumpy())):
            found = subgraph.Tensors(t).Type()
            if found not in _IO_TYPES:
                raise ModelError(
                    f"model: graph input or output {_label(subgraph, t)} is of type "
                    f"{TYPE_NAMES.get(found, found)}; give an int8 model with int8 inputs"
                )
        for i in range(subgraph.OperatorsLength()):
            op = subgraph.Operators(i)
            name = builtin_name(model, op)
            if name in _INTERFACE_OPS:
                continue
            tensors = (*_indices(op.InputsAsNumpy()), *_indices(op.OutputsAsNumpy()))
            if any(t >= 0 and subgraph.Tensors(t).Type() in _FLOAT_TYPES for t in tensors):
                raise ModelError(FLOAT_MESSAGE.format(op=name))
