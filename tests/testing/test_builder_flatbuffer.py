"""The flatbuffers the builder writes: operator codes, quantisation tables, determinism."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest
import tflite

from cascader.testing.networks import (
    CATALOGUE,
    OP_KINDS,
    mobilenet_like,
    single_op,
    single_op_model,
)
from cascader.testing.shared import shared_dir
from cascader.testing.tflite_builder import ModelBuilder

_NAMES = {v: k for k, v in vars(tflite.BuiltinOperator).items() if not k.startswith("_")}
_TYPES = {v: k for k, v in vars(tflite.TensorType).items() if not k.startswith("_")}
_MAC_OPS = {"CONV_2D": 0, "FULLY_CONNECTED": 0, "TRANSPOSE_CONV": 0, "DEPTHWISE_CONV_2D": 3}
_WEIGHT_INPUT = {"CONV_2D": 1, "FULLY_CONNECTED": 1, "DEPTHWISE_CONV_2D": 1, "TRANSPOSE_CONV": 1}
_BIAS_INPUT = {"CONV_2D": 2, "FULLY_CONNECTED": 2, "DEPTHWISE_CONV_2D": 2, "TRANSPOSE_CONV": 3}
_DATA_INPUT = {"TRANSPOSE_CONV": 2, "SPLIT": 1}
_SHARED_QPARAMS = {
    "MAX_POOL_2D",
    "AVERAGE_POOL_2D",
    "MINIMUM",
    "MAXIMUM",
    "RESHAPE",
    "CONCATENATION",
    "PAD",
    "RESIZE_NEAREST_NEIGHBOR",
    "RESIZE_BILINEAR",
    "STRIDED_SLICE",
    "SPLIT",
}
_FIXED_QPARAMS = {"LOGISTIC": (1 / 256, -128), "TANH": (1 / 128, 0), "SOFTMAX": (1 / 256, -128)}


@dataclass(frozen=True)
class _T:
    shape: tuple[int, ...]
    dtype: str
    scales: tuple[float, ...]
    zero_points: tuple[int, ...]
    dim: int
    constant: bool


@dataclass(frozen=True)
class _Op:
    kind: str
    version: int
    deprecated_code: int
    builtin_code: int
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]


def _parse(buf: bytes) -> tuple[tflite.Model, list[_T], list[_Op]]:
    model = tflite.Model.GetRootAsModel(buf, 0)
    graph = model.Subgraphs(0)
    tensors = []
    for i in range(graph.TensorsLength()):
        t = graph.Tensors(i)
        q = t.Quantization()
        scales = tuple(q.ScaleAsNumpy()) if q is not None and q.ScaleLength() else ()
        zps = (
            tuple(int(z) for z in q.ZeroPointAsNumpy())
            if q is not None and q.ZeroPointLength()
            else ()
        )
        constant = model.Buffers(t.Buffer()).DataLength() > 0
        dim = q.QuantizedDimension() if q is not None else 0
        tensors.append(_T(tuple(t.ShapeAsNumpy()), _TYPES[t.Type()], scales, zps, dim, constant))
    ops = []
    for i in range(graph.OperatorsLength()):
        op = graph.Operators(i)
        code = model.OperatorCodes(op.OpcodeIndex())
        ops.append(
            _Op(
                _NAMES[code.BuiltinCode()],
                code.Version(),
                code.DeprecatedBuiltinCode(),
                code.BuiltinCode(),
                tuple(int(x) for x in op.InputsAsNumpy()),
                tuple(int(x) for x in op.OutputsAsNumpy()),
            )
        )
    return model, tensors, ops


CASES = sorted(CATALOGUE)


@pytest.mark.parametrize("case", CASES)
def test_operator_codes_carry_both_builtin_fields(case: str, built: Callable) -> None:
    model, _, ops = _parse(built(case).flatbuffer)
    assert model.Version() == 3
    assert model.Description().decode().startswith("cascader.testing.ModelBuilder seed=0")
    for op in ops:
        assert op.deprecated_code == min(op.builtin_code, 127)


@pytest.mark.parametrize("case", CASES)
def test_quantisation_tables_follow_the_int8_spec(case: str, built: Callable) -> None:
    _, tensors, ops = _parse(built(case).flatbuffer)
    for op in ops:
        data = tensors[op.inputs[_DATA_INPUT.get(op.kind, 0)]]
        for tid in (*op.inputs, *op.outputs):
            t = tensors[tid]
            if not t.constant:
                assert t.dtype == "INT8" and len(t.scales) == 1 and -128 <= t.zero_points[0] <= 127
        if op.kind in _MAC_OPS:
            w = tensors[op.inputs[_WEIGHT_INPUT[op.kind]]]
            b = tensors[op.inputs[_BIAS_INPUT[op.kind]]]
            channels = w.shape[_MAC_OPS[op.kind]]
            assert w.dtype == "INT8" and w.dim == _MAC_OPS[op.kind]
            assert len(w.scales) == channels and set(w.zero_points) == {0}
            assert b.dtype == "INT32" and b.shape == (channels,) and set(b.zero_points) == {0}
            expected = data.scales[0] * np.asarray(w.scales, np.float64)
            np.testing.assert_allclose(b.scales, expected, rtol=1e-6)
        out = tensors[op.outputs[0]]
        if op.kind in _FIXED_QPARAMS:
            assert (out.scales[0], out.zero_points[0]) == _FIXED_QPARAMS[op.kind]
        if op.kind in _SHARED_QPARAMS:
            acts = [tensors[i] for i in (*op.inputs, *op.outputs) if not tensors[i].constant]
            assert {(t.scales, t.zero_points) for t in acts} == {(out.scales, out.zero_points)}


@pytest.mark.parametrize("kind", OP_KINDS)
def test_single_op_model_holds_exactly_that_op(kind: str) -> None:
    builder = single_op(kind)
    assert builder.op_kinds == [kind]
    assert [op.kind for op in _parse(builder.build())[2]] == [kind]


def test_versions_match_the_tflite_converter_on_the_shared_models() -> None:
    shared = shared_dir()
    if shared is None or not (shared / "models").is_dir():
        pytest.skip("shared/models not present")
    converter: dict[str, int] = {}
    for path in sorted((shared / "models").glob("*.tflite")):
        for op in _parse(path.read_bytes())[2]:
            converter[op.kind] = op.version
    ours: dict[str, int] = {}
    for kind in OP_KINDS:
        for op in _parse(single_op_model(kind))[2]:
            ours[op.kind] = op.version
    common = sorted(set(converter) & set(ours))
    assert len(common) >= 6
    assert {k: ours[k] for k in common} == {k: converter[k] for k in common}


@pytest.mark.parametrize("make", [mobilenet_like, *(lambda k=k: single_op(k) for k in OP_KINDS)])
def test_same_seed_gives_identical_bytes(make: Callable[[], ModelBuilder]) -> None:
    assert make().build() == make().build()


def test_different_seed_gives_different_weights() -> None:
    assert mobilenet_like(seed=0).build() != mobilenet_like(seed=1).build()
    assert len(mobilenet_like(seed=0).build()) == len(mobilenet_like(seed=1).build())


def test_builder_rejects_malformed_graphs() -> None:
    b = ModelBuilder()
    x = b.input((1, 8, 8, 16))
    with pytest.raises(ValueError, match="cannot reshape"):
        b.reshape(x, (1, 7, 16))
    with pytest.raises(ValueError, match="batch axis"):
        b.concatenation([x, x], axis=0)
    with pytest.raises(ValueError, match="does not split"):
        b.split(x, 3)
    with pytest.raises(ValueError, match="equal rank"):
        b.add(x, b.input((1, 16)))
    with pytest.raises(ValueError, match="batch must be 1"):
        b.input((2, 4))
    with pytest.raises(ValueError, match="no outputs"):
        b.build()
