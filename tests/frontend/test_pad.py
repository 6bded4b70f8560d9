"""The frontend extension: quantized PAD, which the stock TFLite frontend rejects."""

from __future__ import annotations

import numpy as np
import pytest
import tflite
import tvm
from model_cases import act, const, one_op_model
from tvm.relax.frontend.tflite import from_tflite

from cascader.frontend.legalize import npu_op_summary
from cascader.frontend.partition import host_ops, partition_for_ethosu
from cascader.frontend.tflite_import import import_tflite

PADS = np.array([[0, 0], [1, 1], [2, 2], [0, 0]], np.int32)


def _pad_model(out_scale: float = 0.05, out_zp: int = -3) -> bytes:
    return one_op_model(
        "PAD",
        [act("x", (1, 8, 8, 4), 0.05, -3), const("p", PADS)],
        [act("y", (1, 10, 12, 4), out_scale, out_zp)],
    )


def test_stock_frontend_rejects_quantized_pad():
    with pytest.raises(tvm.error.OpNotImplemented, match="PAD"):
        from_tflite(tflite.Model.GetRootAsModel(_pad_model(), 0))


def test_quantized_pad_fills_with_zero_point_and_runs_on_npu():
    mod = import_tflite(_pad_model())
    pad = mod["main"].body.blocks[0].bindings[0].value
    assert pad.op.name == "relax.nn.pad"
    assert float(pad.attrs.pad_value) == -3.0
    assert [int(p) for p in pad.attrs.pad_width] == PADS.ravel().tolist()
    part = partition_for_ethosu(mod)
    assert dict(npu_op_summary(part)) == {"pad": 1}
    assert host_ops(part) == []


def test_quantized_pad_with_new_qparams_requantizes():
    part = partition_for_ethosu(import_tflite(_pad_model(0.1, 5)))
    assert dict(npu_op_summary(part)) == {"pad": 1, "requantize": 1}
