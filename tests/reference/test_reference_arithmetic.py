"""The NPU arithmetic the reference models: output scaling, rounding modes, shifts, CLZ, and
the legalization details it exposed (one-channel depthwise weights, integer LUTs)."""

from __future__ import annotations

import numpy as np
import pytest

from cascader.frontend.passes import model_npu_functions
from cascader.ir.npu_ops import Activation, Conv2D, NpuTensor, Quant, UnaryElementwise
from cascader.reference.elementwise import unary_elementwise
from cascader.reference.scaling import apply_scale
from cascader.testing.networks import single_op_model
from cascader.testing.tflite_writer import OperatorDef, TensorDef, write_model
from cascader.verify.litert import litert_outputs
from cascader.verify.model_reference import ModelReference


def _tflite_multiply_by_quantized_multiplier(x: int, multiplier: int, shift: int) -> int:
    """TFLite's two-step rounding: saturating rounding doubling high multiply, then a rounding
    divide by a power of two (ties away from zero), for a right shift `shift` >= 31."""
    product = x * multiplier
    nudge = (1 << 30) if product >= 0 else 1 - (1 << 30)
    high = abs(product + nudge) >> 31
    high = high if product + nudge >= 0 else -high
    exponent = shift - 31
    mask = (1 << exponent) - 1
    remainder = high & mask
    threshold = (mask >> 1) + (1 if high < 0 else 0)
    return (high >> exponent) + (1 if remainder > threshold else 0)


def test_tfl_rounding_is_tflite_double_rounding() -> None:
    rng = np.random.default_rng(7)
    values = rng.integers(-(1 << 20), 1 << 20, 4000)
    multipliers = rng.integers(1 << 30, 1 << 31, 4000)
    shifts = rng.integers(31, 45, 4000)
    ours = apply_scale(values, multipliers, shifts, "TFL")
    theirs = np.array(
        [
            _tflite_multiply_by_quantized_multiplier(int(v), int(m), int(s))
            for v, m, s in zip(values, multipliers, shifts, strict=True)
        ]
    )
    positive = values >= 0
    np.testing.assert_array_equal(ours[positive], theirs[positive])
    # Negative ties: TFLite rounds away from zero, the NPU's TFL mode (TOSA) half up.
    assert np.abs(ours - theirs).max() <= 1
    assert np.mean(ours == theirs) > 0.99


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("NATURAL", [-1, -1, 0, 0, 1, 2]),
        ("TFL", [-1, -1, 0, 0, 1, 2]),  # shifts up to 31 round once, half up
        ("TRUNCATE", [-1, -1, 0, 0, 0, 1]),
    ],
)
def test_rounding_modes_on_halves(mode: str, expected: list[int]) -> None:
    np.testing.assert_array_equal(apply_scale([-3, -2, -1, 0, 1, 3], 1, 1, mode), expected)


def test_count_leading_zeros_of_int32() -> None:
    values = np.array([0, 1, 2, 3, 1 << 30, (1 << 31) - 1, -1], np.int32)
    ifm = NpuTensor("x", (1, 1, 1, values.size), Quant(1.0, 0), "int32")
    ofm = NpuTensor("y", ifm.shape, Quant(1.0, 0), "int32")
    op = UnaryElementwise("clz", "CLZ", ifm, ofm, Activation())
    np.testing.assert_array_equal(unary_elementwise(op, values).ravel(), [32, 31, 30, 30, 1, 1, 0])


def test_softmax_over_1000_equal_logits_shifts_by_more_than_31() -> None:
    """1000 equal values leave the sum of exps with 3 leading zeros: the final shift is 32."""
    model = single_op_model("SOFTMAX", shape=(1, 1000))
    inputs = [np.full((1, 1000), 17, np.int8)]
    (ours,) = ModelReference.from_model(model)(inputs)
    (theirs,) = litert_outputs(model, inputs, kernels="builtin")  # the reference one aborts
    np.testing.assert_array_equal(ours, theirs)


def test_one_channel_depthwise_legalizes_to_ohwi_conv2d() -> None:
    """A depthwise conv over one input channel arrives as a conv2d with reshaped 1HWC
    weights; the legalized weights are OHWI (8, 3, 3, 1), not (8, 1, 3, 3)."""
    model = single_op_model("DEPTHWISE_CONV_2D", shape=(1, 8, 8, 1), depth_multiplier=8, kernel=3)
    (function,) = model_npu_functions(model)
    (op,) = function.ops
    assert isinstance(op, Conv2D) and op.kind == "conv2d"
    assert op.weights.shape == (8, 3, 3, 1)
    x = np.random.default_rng(3).integers(-128, 128, (1, 8, 8, 1), np.int8)
    (ours,) = ModelReference.from_model(model)([x])
    (theirs,) = litert_outputs(model, [x], kernels="reference")
    np.testing.assert_array_equal(ours, theirs)


@pytest.mark.parametrize(("kind", "params"), [("LEAKY_RELU", {"alpha": 0.1}), ("HARD_SWISH", {})])
def test_integer_luts_match_tflite_over_every_input(kind: str, params: dict) -> None:
    """All 256 int8 inputs through the legalized table equal TFLite's integer kernel."""
    model = single_op_model(kind, shape=(1, 1, 1, 256), **params)
    x = np.arange(-128, 128, dtype=np.int8).reshape(1, 1, 1, 256)
    (ours,) = ModelReference.from_model(model)([x])
    (theirs,) = litert_outputs(model, [x], kernels="reference")
    np.testing.assert_array_equal(ours, theirs)


def test_mean_over_more_rows_than_one_kernel_reads() -> None:
    """80x80 = 6400 elements: two row blocks of depthwise sums, an ADD, then the MUL whose
    multiplier carries the IFM to OFM rescale (it once took a partial sum's quantisation)."""
    model = single_op_model("MEAN", shape=(1, 80, 80, 4), axes=(1, 2))
    (function,) = model_npu_functions(model)
    assert [type(op).__name__ for op in function.ops] == [
        "Conv2D",
        "Conv2D",
        "BinaryElementwise",
        "BinaryElementwise",
    ]
    x = np.random.default_rng(5).integers(-128, 128, (1, 80, 80, 4), np.int8)
    (ours,) = ModelReference.from_model(model)([x])
    (theirs,) = litert_outputs(model, [x], kernels="reference")
    np.testing.assert_array_equal(ours, theirs)


def _binary_model(kind: str, scales: tuple[float, float, float], zero_points: tuple[int, ...]):
    tensors = [
        TensorDef(name, (1, 8, 8, 8), "int8", scales=(scale,), zero_points=(zp,))
        for name, scale, zp in zip("aby", scales, zero_points, strict=True)
    ]
    return write_model(tensors, [OperatorDef(kind, (0, 1), (2,))], [0, 1], [2], kind)


@pytest.mark.parametrize("kind", ["ADD", "SUB"])
@pytest.mark.parametrize("ofm_scale", [0.1, 0.07, 0.025])
def test_add_sub_both_scalings_match_tflite(kind: str, ofm_scale: float) -> None:
    """Equal input scales and an output scale twice theirs: Vela's "simplified" scaling, whose
    ties round as TFLite's (TFL double rounding); 0.07 and 0.025 take the advanced one."""
    model = _binary_model(kind, (0.05, 0.05, ofm_scale), (-3, 7, 2))
    rng = np.random.default_rng(11)
    inputs = [rng.integers(-128, 128, (1, 8, 8, 8), np.int8) for _ in range(2)]
    (ours,) = ModelReference.from_model(model)(inputs)
    (theirs,) = litert_outputs(model, inputs, kernels="reference")
    np.testing.assert_array_equal(ours, theirs)
