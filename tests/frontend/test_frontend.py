"""TFLite import: validation errors are one-line ModelErrors; real models import in QDQ form."""

from __future__ import annotations

import numpy as np
import pytest
import tflite
import tvm
from model_cases import model_path

from cascader.frontend.errors import ModelError
from cascader.frontend.tflite_check import FLOAT_MESSAGE
from cascader.frontend.tflite_import import import_tflite, load_tflite


def _relax_ops(mod: tvm.IRModule) -> set[str]:
    ops: set[str] = set()

    def visit(expr):
        if isinstance(expr, tvm.relax.Call) and isinstance(expr.op, tvm.ir.Op):
            ops.add(expr.op.name)

    tvm.relax.analysis.post_order_visit(mod["main"], visit)
    return ops


def test_shared_model_imports_in_qdq_form(shared_model):
    mod = import_tflite(load_tflite(shared_model), shared_model.name)
    ops = _relax_ops(mod)
    assert {"relax.quantize", "relax.dequantize"} <= ops
    params = mod["main"].attrs["params"]
    assert len(params) > 0


def test_missing_file():
    with pytest.raises(ModelError, match="model file not found"):
        load_tflite("/nonexistent/model.tflite")


def test_not_a_tflite_file(tmp_path):
    path = tmp_path / "model.tflite"
    path.write_bytes(b"\x18\x00\x00\x00ONNX" + bytes(64))
    with pytest.raises(ModelError, match="not a TFLite file"):
        load_tflite(path)


@pytest.mark.parametrize("fraction", [0.0, 0.01, 0.3, 0.7, 0.999])
def test_truncated_file(tmp_path, fraction):
    buf = model_path("ic_resnet8").read_bytes()
    path = tmp_path / "cut.tflite"
    path.write_bytes(buf[: max(8, int(len(buf) * fraction))])
    with pytest.raises(ModelError, match="truncated or corrupt") as info:
        load_tflite(path)
    assert "\n" not in str(info.value)


def test_corrupted_bytes_never_escape_as_other_errors():
    buf = model_path("kws_dscnn").read_bytes()
    rng = np.random.default_rng(7)
    for _ in range(60):
        damaged = np.frombuffer(buf, np.uint8).copy()
        damaged[rng.integers(8, 3000, 4)] = rng.integers(0, 256, 4)
        try:
            import_tflite(damaged.tobytes())
        except ModelError as err:
            assert "\n" not in str(err)


def _with_float_activation(buf: bytes) -> bytes:
    """Retype the first operator's output tensor to FLOAT32 (an activation: no data to resize)."""
    model = tflite.Model.GetRootAsModel(buf, 0)
    subgraph = model.Subgraphs(0)
    tensor = subgraph.Tensors(int(subgraph.Operators(0).OutputsAsNumpy()[0]))
    field = tensor._tab.Offset(6)  # Tensor.type
    assert field != 0, "type stored explicitly for int8 tensors"
    patched = bytearray(buf)
    patched[tensor._tab.Pos + field] = tflite.TensorType.FLOAT32
    return bytes(patched)


def test_float_model_rejected_with_exact_message(tmp_path):
    path = tmp_path / "float.tflite"
    path.write_bytes(_with_float_activation(model_path("kws_dscnn").read_bytes()))
    with pytest.raises(ModelError) as info:
        load_tflite(path)
    assert str(info.value) == FLOAT_MESSAGE.format(op="CONV_2D")
    assert str(info.value) == (
        "model is not fully int8-quantised (found float op CONV_2D); "
        "quantise it with full-integer post-training quantisation"
    )
