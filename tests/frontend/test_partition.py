"""Partitioning: shared models map entirely to ethos-u composites, as they do under Vela."""

from __future__ import annotations

import numpy as np
import pytest
from model_cases import act, const, model_path, one_op_model

from cascader.frontend.legalize import npu_op_summary
from cascader.frontend.partition import host_ops, partition_for_ethosu
from cascader.frontend.tflite_import import import_tflite, load_tflite

# Composite counts = the model's TFLite op mix (shared/models/README.md), SOFTMAX included: Vela
# runs every shared model with 0 CPU ops and so do we. A FULLY_CONNECTED whose TFLite input is
# 4-D (kws, resnet) is followed by a reshape to its 2-D output, which stays on the NPU.
EXPECTED = {
    "kws_dscnn": {
        "conv2d": 5,
        "depthwise_conv2d": 4,
        "avg_pool2d": 1,
        "fully_connected": 1,
        "reshape": 1,
        "softmax": 1,
    },
    "vww_mobilenet_v1_025": {
        "conv2d": 15,
        "depthwise_conv2d": 13,
        "mean": 1,
        "reshape": 1,
        "softmax": 1,
    },
    "ic_resnet8": {
        "conv2d": 9,
        "add": 3,
        "avg_pool2d": 1,
        "fully_connected": 1,
        "reshape": 1,
        "softmax": 1,
    },
    "ad_autoencoder": {"fully_connected": 10},
    "mobilenet_v2_100_224": {
        "conv2d": 35,
        "depthwise_conv2d": 17,
        "add": 10,
        "mean": 1,
        "fully_connected": 1,
        "softmax": 1,
    },
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_shared_model_partitions(name):
    mod = partition_for_ethosu(import_tflite(load_tflite(model_path(name))))
    assert dict(npu_op_summary(mod)) == EXPECTED[name]
    assert host_ops(mod) == []


X = act("x", (1, 8, 8, 4))
I32 = np.int32


def _partitioned(buf: bytes):
    return partition_for_ethosu(import_tflite(buf))


@pytest.mark.parametrize(
    ("kind", "inputs", "outputs", "options", "composite"),
    [
        ("LOGISTIC", [X], [act("y", (1, 8, 8, 4), 1 / 256, -128)], {}, "sigmoid"),
        ("TANH", [X], [act("y", (1, 8, 8, 4), 1 / 128, 0)], {}, "tanh"),
        ("HARD_SWISH", [X], [act("y", (1, 8, 8, 4), 0.04, -10)], {}, "hard_swish"),
        ("LEAKY_RELU", [X], [act("y", (1, 8, 8, 4))], {"alpha": 0.1}, "leaky_relu"),
        ("MINIMUM", [X, act("x2", (1, 8, 8, 4))], [act("y", (1, 8, 8, 4))], {}, "min"),
        ("MUL", [X, act("x2", (1, 1, 1, 4))], [act("y", (1, 8, 8, 4))], {}, "mul"),
        (
            "MAX_POOL_2D",
            [X],
            [act("y", (1, 4, 4, 4))],
            {"padding": "VALID", "stride": (2, 2), "pool": (2, 2)},
            "max_pool2d",
        ),
        (
            "RESIZE_NEAREST_NEIGHBOR",
            [X, const("s", np.array([16, 16], I32))],
            [act("y", (1, 16, 16, 4))],
            {"align_corners": False, "half_pixel_centers": False},
            "resize",
        ),
        (
            "CONCATENATION",
            [X, act("x2", (1, 8, 8, 4), 0.1, 2)],
            [act("y", (1, 8, 8, 8), 0.07, 0)],
            {"axis": 3},
            "concatenate",
        ),
        (
            "TRANSPOSE_CONV",
            [
                const("os", np.array([1, 16, 16, 2], I32)),
                const("w", np.ones((2, 3, 3, 4), np.int8), 0.01),
                X,
            ],
            [act("y", (1, 16, 16, 2))],
            {"padding": "SAME", "stride": (2, 2)},
            "transpose_conv2d",
        ),
    ],
)
def test_single_op_goes_to_npu(kind, inputs, outputs, options, composite):
    mod = _partitioned(one_op_model(kind, inputs, outputs, options))
    assert dict(npu_op_summary(mod)) == {composite: 1}
    assert host_ops(mod) == []


def test_vela_constraint_keeps_op_on_host():
    """MINIMUM whose output is quantised unlike its inputs: Vela cannot rescale it."""
    buf = one_op_model(
        "MINIMUM", [X, act("x2", (1, 8, 8, 4))], [act("y", (1, 8, 8, 4), 0.2, 7)], {}
    )
    mod = _partitioned(buf)
    assert host_ops(mod) == ["MINIMUM"]
    assert not npu_op_summary(mod)


def test_strided_slice_with_channel_stride_stays_on_host():
    buf = one_op_model(
        "STRIDED_SLICE",
        [
            X,
            const("b", np.array([0, 0, 0, 0], I32)),
            const("e", np.array([1, 8, 8, 4], I32)),
            const("s", np.array([1, 1, 1, 2], I32)),
        ],
        [act("y", (1, 8, 8, 2))],
    )
    assert "STRIDED_SLICE" in host_ops(_partitioned(buf))
