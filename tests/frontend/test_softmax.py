"""Int8 SOFTMAX runs on the NPU as Vela's 31-op elementwise/LUT/pooling decomposition."""

from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from ethosu.vela.softmax import SoftMax
from model_cases import MODEL_NAMES, act, model_path, one_op_model

from cascader.frontend.legalize import choose_layouts, legalize, remove_identities
from cascader.frontend.partition import host_ops, partition_for_ethosu
from cascader.frontend.softmax import softmax_shape
from cascader.frontend.tflite_import import import_tflite, load_tflite
from cascader.ir.npu_ops import BinaryElementwise, Layout, Pooling, UnaryElementwise

IFM_SCALE = 0.0625

# Vela 5.2's NPU op counts with its Python core (the decomposition we follow); the regor core
# uses a 28-op softmax (see /work/shared/baselines/vela_5.2.0.csv).
VELA_LEGACY_NPU_OPS = {
    "kws_dscnn": 42,
    "vww_mobilenet_v1_025": 61,
    "ic_resnet8": 45,
    "ad_autoencoder": 10,
    "mobilenet_v2_100_224": 96,
}
# With MEAN rewritten as Vela does (depthwise sum + MUL), our compute ops (reshapes aside)
# match Vela's Python core op for op on every shared model.
OUR_NPU_OPS = VELA_LEGACY_NPU_OPS


def _softmax_model(shape=(1, 3, 5, 12)) -> bytes:
    return one_op_model(
        "SOFTMAX",
        [act("x", shape, IFM_SCALE, 10)],
        [act("y", shape, 1 / 256, -128)],
        {"beta": 1.0},
    )


def _legalized_ops(buf: bytes):
    part = partition_for_ethosu(import_tflite(buf))
    assert host_ops(part) == []
    (function,) = legalize(part)
    return function


def test_softmax_decomposes_like_vela():
    function = _legalized_ops(_softmax_model())
    ops = function.ops
    kinds = Counter(getattr(op, "operator", None) or getattr(op, "pool_type", None) for op in ops)
    assert len(ops) == 31
    assert kinds == {
        "MUL": 12,
        "ADD": 5,
        "SUB": 7,
        "SHL": 2,
        "SHR": 2,
        "MAX": 1,
        "SUM": 1,
        "CLZ": 1,
    }
    max_pool, exp, *_ = ops
    assert isinstance(max_pool, Pooling) and max_pool.ifm.shape == (1, 15, 12, 1)
    assert max_pool.kernel.width == 12 and max_pool.ofm.shape == (1, 15, 1, 1)
    assert isinstance(exp, BinaryElementwise) and exp.operator == "SUB"
    assert exp.ifm2.name == max_pool.ofm.name and exp.ifm2.shape == (1, 3, 5, 1)
    assert exp.activation.kind == "LUT" and exp.activation.lut_dtype == "int32"
    assert list(exp.activation.lut) == SoftMax(None).generate_exp_table(1.0, IFM_SCALE)
    assert exp.ofm.dtype == "int32" and exp.ofm.quant.zero_point == 127
    clz = next(op for op in ops if isinstance(op, UnaryElementwise))
    assert clz.operator == "CLZ" and clz.ifm.shape == (1, 3, 5, 1)
    last = ops[-1]
    assert last.operator == "SHR" and last.rounding == "HALF_UP"
    assert last.ofm.name == function.outputs[0] and last.ofm.dtype == "int8"
    assert last.ofm.quant.zero_point == -128 and last.ofm.quant.scale == pytest.approx(1 / 256)


def test_softmax_dataflow_is_closed():
    """Every operand is the IFM, a scalar constant or an earlier op's output."""
    function = _legalized_ops(_softmax_model())
    known = set(function.inputs)
    for op in function.ops:
        operands = [("ifm", op.ifm), ("ifm2", getattr(op, "ifm2", None))]
        for slot, tensor in operands:
            if tensor is None or getattr(op, f"{slot}_scalar", None) is not None:
                continue
            assert tensor.name in known, (op.name, slot, tensor.name)
        known.add(op.ofm.name)
    scalars = [op for op in function.ops if isinstance(op, BinaryElementwise)]
    assert all(
        (op.ifm_scalar is None) == (op.ifm.shape != (1, 1, 1, 1))
        and (op.ifm2_scalar is None) == (op.ifm2.shape != (1, 1, 1, 1))
        for op in scalars
    )
    assert all(op.rescale is not None for op in scalars)


def test_newton_raphson_scaling_is_velas():
    ops = _legalized_ops(_softmax_model()).ops
    half_denominator = ops[10]
    assert (half_denominator.operator, half_denominator.ifm2_scalar) == ("ADD", (1 << 31) - 1)
    assert half_denominator.rescale == (1, 1)
    muls_by_half = [
        op
        for op in ops
        if isinstance(op, BinaryElementwise) and op.operator == "MUL" and op.ofm.quant.scale == 2.0
    ]
    assert {op.rescale for op in muls_by_half} == {(1 << 30, 31)}
    assert len(muls_by_half) == 8  # 1 initial estimate + 2 per Newton step + final product


@pytest.mark.parametrize("shape", [(1, 10), (2, 4, 6)])
def test_softmax_shapes_fold_to_4d(shape):
    ops = _legalized_ops(_softmax_model(shape)).ops
    assert len(ops) == 31
    assert ops[-1].ofm.shape == softmax_shape(shape)
    assert softmax_shape((2, 4, 6)) == (1, 2, 4, 6)
    assert softmax_shape((3, 2, 4, 6)) == (1, 6, 4, 6)


def test_softmax_op_count_matches_vela_python_core(tmp_path):
    """Vela's own count, from its CLI (its summary printer binds the real stdout at import)."""
    path = tmp_path / "softmax.tflite"
    path.write_bytes(_softmax_model())
    vela = Path(sys.executable).with_name("vela")
    argv = [str(vela), str(path), "--output-dir", str(tmp_path), "--debug-force-legacy-core"]
    log = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    npu_ops = int(re.search(r"^NPU operators = (\d+)", log, re.MULTILINE).group(1))
    assert len(_legalized_ops(_softmax_model()).ops) == npu_ops


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_shared_models_run_fully_on_npu(name):
    part = partition_for_ethosu(import_tflite(load_tflite(model_path(name))))
    assert host_ops(part) == []
    functions = legalize(part)
    compute = [op for f in functions for op in f.ops if op.op_family != "identity"]
    assert len(compute) == OUR_NPU_OPS[name]
    for function in functions:
        for op in function.ops:
            assert np.isfinite(op.ifm.quant.scale) and np.isfinite(op.ofm.quant.scale)


def test_tensors_viewed_under_another_shape_stay_nhwc():
    """The softmax IFM is read as (1, H*W, C, 1) and the row max as (1, H, W, 1): both must
    stay NHWC, while ordinary intermediates become NHCWB16."""
    kws = legalize(partition_for_ethosu(import_tflite(load_tflite(model_path("kws_dscnn")))))
    laid_out = choose_layouts(remove_identities(kws[0]))
    (max_pool,) = [op for op in laid_out.ops if isinstance(op, Pooling) and op.pool_type == "MAX"]
    assert max_pool.ifm.layout == Layout.NHWC  # the fully connected output, viewed
    laid_out = choose_layouts(_legalized_ops(_softmax_model()))
    max_pool, exp = laid_out.ops[:2]
    assert max_pool.ofm.layout == exp.ifm2.layout == Layout.NHWC
    assert exp.ofm.layout == Layout.NHCWB16
