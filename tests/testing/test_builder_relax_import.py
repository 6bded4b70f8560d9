"""Built models and the shared real models import into TVM Relax."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import tflite
import tvm
from tvm.relax.frontend.tflite import from_tflite

from cascader.testing.networks import CATALOGUE
from cascader.testing.shared import shared_dir


def _no_quantized(op: str) -> tuple[type[Exception], str]:
    return tvm.error.OpNotImplemented, f"OpNotImplemented: no quantized {op} (needs QDQ lowering)"


_FC_4D = "FULLY_CONNECTED keeps a 4-D input unflattened"

# Cases the stock tvm.relax.frontend.tflite.from_tflite (apache-tvm 0.27.0.post1) gets wrong,
# with the error it raises; cascader.frontend.tflite_import.import_tflite imports all of them.
# The list is checked both ways, so it stays exact when TVM changes.
STOCK_FRONTEND_REJECTS: dict[str, tuple[type[Exception], str]] = {
    "PAD": _no_quantized("PAD"),
    "chain": _no_quantized("PAD"),
    "RESIZE_NEAREST_NEIGHBOR": _no_quantized("RESIZE_NEAREST_NEIGHBOR"),
    "RESIZE_NEAREST_NEIGHBOR-align-corners": _no_quantized("RESIZE_NEAREST_NEIGHBOR"),
    "STRIDED_SLICE": _no_quantized("STRIDED_SLICE"),
    "SPLIT": _no_quantized("SPLIT"),
    "SPLIT-height-4": _no_quantized("SPLIT"),
    "FULLY_CONNECTED-4d-input": (ValueError, f"{_FC_4D}: matmul of [1,4,4,8] by [128,16] fails"),
    "FULLY_CONNECTED-1x1-4d-input": (AssertionError, f"{_FC_4D}: returns (1,1,1,16), not (1,16)"),
}


def _signature(ty: tvm.ir.Type) -> list[tuple[tuple[int, ...], str]]:
    fields = ty.fields if hasattr(ty, "fields") else [ty]
    return [(tuple(int(d) for d in t.shape), str(t.dtype)) for t in fields]


def _stock_import(buf: bytes) -> tvm.IRModule:
    return from_tflite(tflite.Model.GetRootAsModel(buf, 0))


@pytest.mark.parametrize("case", sorted(STOCK_FRONTEND_REJECTS))
def test_stock_frontend_gets_these_wrong(case: str, built: Callable) -> None:
    c = built(case)
    raises, reason = STOCK_FRONTEND_REJECTS[case]
    if raises is AssertionError:  # imports, but with the wrong output signature
        main = _stock_import(c.flatbuffer)["main"]
        assert _signature(main.ret_ty) != [(t.shape, "int8") for t in c.builder.outputs], reason
    else:
        with pytest.raises(raises):
            _stock_import(c.flatbuffer)


@pytest.mark.parametrize("case", sorted(CATALOGUE))
def test_imports_into_relax_with_the_model_signature(
    case: str, built: Callable, relax_import: Callable[[bytes], tvm.IRModule]
) -> None:
    c = built(case)
    main = relax_import(c.flatbuffer)["main"]
    assert [_signature(p.ty)[0] for p in main.params] == [
        (t.shape, "int8") for t in c.builder.inputs
    ]
    assert _signature(main.ret_ty) == [(t.shape, "int8") for t in c.builder.outputs]


def _shared_models() -> list[Path]:
    shared = shared_dir()
    return sorted((shared / "models").glob("*.tflite")) if shared is not None else []


def _tflite_signature(buf: bytes) -> tuple[list, list]:
    graph = tflite.Model.GetRootAsModel(buf, 0).Subgraphs(0)

    def sig(i: int) -> tuple[tuple[int, ...], str]:
        return tuple(int(d) for d in graph.Tensors(i).ShapeAsNumpy()), "int8"

    inputs = [sig(graph.Inputs(i)) for i in range(graph.InputsLength())]
    return inputs, [sig(graph.Outputs(i)) for i in range(graph.OutputsLength())]


needs_shared = pytest.mark.skipif(not _shared_models(), reason="shared/models folder not present")


@needs_shared
@pytest.mark.parametrize("path", _shared_models(), ids=lambda p: p.stem)
def test_shared_models_import_into_relax(
    path: Path, relax_import: Callable[[bytes], tvm.IRModule]
) -> None:
    buf = path.read_bytes()
    main = relax_import(buf)["main"]
    inputs, _ = _tflite_signature(buf)
    assert [_signature(p.ty)[0] for p in main.params] == inputs


@needs_shared
@pytest.mark.parametrize("path", _shared_models(), ids=lambda p: p.stem)
def test_shared_models_keep_their_output_shape(
    path: Path, relax_import: Callable[[bytes], tvm.IRModule]
) -> None:
    buf = path.read_bytes()
    _, outputs = _tflite_signature(buf)
    assert _signature(relax_import(buf)["main"].ret_ty) == outputs
