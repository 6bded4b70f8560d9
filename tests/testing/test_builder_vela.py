"""Built models compile with Vela 5.2 in-process, entirely onto the NPU."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from cascader.testing.networks import CATALOGUE
from cascader.testing.vela_check import compile_with_vela

# Vela's "NPU operators" count for each case on ethos-u55-256, measured with ethos-u-vela 5.2.0.
# It counts operations after Vela's graph rewriting: SOFTMAX becomes 28 NPU operations, PAD 5,
# MEAN 2, a depth multiplier > 1 with several input channels or a half-pixel bilinear resize 9,
# a concat or split one per part.
VELA_NPU_OPS = {
    "ADD": 1,
    "ADD-broadcast-channel": 1,
    "ADD-relu": 1,
    "AVERAGE_POOL_2D": 1,
    "AVERAGE_POOL_2D-3x3-stride1-same": 1,
    "CONCATENATION": 2,
    "CONCATENATION-width": 2,
    "CONV_2D": 1,
    "CONV_2D-dilation2": 1,
    "CONV_2D-stride2": 1,
    "CONV_2D-stride2-valid-relu6": 1,
    "CONV_2D-valid-3x5": 1,
    "DEPTHWISE_CONV_2D": 1,
    "DEPTHWISE_CONV_2D-dilation2": 1,
    "DEPTHWISE_CONV_2D-multiplier2": 9,
    "DEPTHWISE_CONV_2D-multiplier8-1ch": 1,
    "DEPTHWISE_CONV_2D-stride2-valid": 1,
    "FULLY_CONNECTED": 1,
    "FULLY_CONNECTED-1x1-4d-input": 1,
    "FULLY_CONNECTED-4d-input": 1,
    "FULLY_CONNECTED-relu": 1,
    "HARD_SWISH": 1,
    "LEAKY_RELU": 1,
    "LEAKY_RELU-alpha0.1": 1,
    "LOGISTIC": 1,
    "MAXIMUM": 1,
    "MAXIMUM-broadcast": 1,
    "MAX_POOL_2D": 1,
    "MAX_POOL_2D-3x3-stride2-same": 1,
    "MEAN": 2,
    "MEAN-no-keep-dims": 2,
    "MINIMUM": 1,
    "MINIMUM-broadcast": 1,
    "MUL": 1,
    "MUL-broadcast-spatial": 1,
    "PAD": 5,
    "QUANTIZE": 1,
    "RESHAPE": 1,
    "RESIZE_BILINEAR": 1,
    "RESIZE_BILINEAR-align-corners": 1,
    "RESIZE_BILINEAR-half-pixel": 9,
    "RESIZE_NEAREST_NEIGHBOR": 1,
    "RESIZE_NEAREST_NEIGHBOR-align-corners": 1,
    "SOFTMAX": 28,
    "SOFTMAX-vector-beta": 28,
    "SPLIT": 2,
    "SPLIT-height-4": 4,
    "STRIDED_SLICE": 1,
    "SUB": 1,
    "SUB-broadcast-row": 1,
    "TANH": 1,
    "TRANSPOSE_CONV": 1,
    "TRANSPOSE_CONV-valid": 1,
    "branches": 6,
    "chain": 35,
    "concat_skip": 6,
    "mobilenet_like": 64,
    "residual": 7,
}


def test_every_case_has_a_recorded_count() -> None:
    assert set(VELA_NPU_OPS) == set(CATALOGUE)


@pytest.mark.parametrize("case", sorted(CATALOGUE))
def test_compiles_fully_onto_the_npu(case: str, built: Callable, tmp_path: Path) -> None:
    result = compile_with_vela(built(case).flatbuffer, tmp_path)
    assert result.cpu_ops == 0 and result.cpu_op_kinds == ()
    assert result.npu_subgraphs == 1
    assert result.npu_ops == VELA_NPU_OPS[case]


@pytest.mark.parametrize(
    "accelerator",
    ["ethos-u55-32", "ethos-u55-64", "ethos-u55-128", "ethos-u65-256", "ethos-u65-512"],
)
def test_example_network_compiles_for_every_u55_u65_variant(
    accelerator: str, built: Callable, tmp_path: Path
) -> None:
    result = compile_with_vela(built("mobilenet_like").flatbuffer, tmp_path, accelerator)
    assert (result.cpu_ops, result.npu_ops, result.npu_subgraphs) == (0, 64, 1)


def test_vela_failure_is_reported_with_its_log(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="Vela failed"):
        compile_with_vela(b"not a tflite file", tmp_path)
