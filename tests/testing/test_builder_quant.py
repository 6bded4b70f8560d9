"""Int8 quantisation arithmetic used by the model builder."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cascader.testing.quant import (
    QuantParams,
    activation_qparams,
    quantize_bias,
    quantize_per_channel,
)

finite = st.floats(-1e3, 1e3, allow_nan=False)


@given(finite, finite)
def test_activation_range_contains_zero_exactly_and_the_interval(a: float, b: float) -> None:
    low, high = min(a, b), max(a, b)
    q = activation_qparams(low, high)
    assert -128 <= q.zero_point <= 127
    assert q.dequantize(q.quantize(np.array(0.0))) == 0.0
    step = q.scale
    assert q.real_min <= min(low, 0.0) + step
    assert q.real_max >= max(high, 0.0) - step


def test_relu_range_puts_zero_point_at_int8_min() -> None:
    assert activation_qparams(0.0, 6.0) == QuantParams(np.float32(6.0 / 255), -128)


def test_quantize_rounds_and_saturates() -> None:
    q = QuantParams(0.5, 10)
    np.testing.assert_array_equal(
        q.quantize(np.array([0.0, 0.74, -1000.0, 1000.0])), [10, 11, -128, 127]
    )


@pytest.mark.parametrize("axis", [0, 3])
def test_per_channel_weights_are_symmetric_with_one_scale_per_channel(axis: int) -> None:
    rng = np.random.default_rng(0)
    w = rng.normal(size=(4, 3, 3, 4)) * np.arange(1, 5).reshape(
        [-1 if a == axis else 1 for a in range(4)]
    )
    q = quantize_per_channel(w, axis)
    assert q.values.dtype == np.int8 and q.axis == axis and q.scales.shape == (4,)
    peaks = np.abs(np.moveaxis(q.values, axis, 0).reshape(4, -1)).max(axis=1)
    np.testing.assert_array_equal(peaks, 127)
    assert np.abs(q.dequantize() - w).max() <= q.scales.max() / 2 + 1e-9


def test_bias_is_int32_at_input_times_weight_scale() -> None:
    data = quantize_bias(np.array([0.5, -0.25]), 0.01, np.array([0.1, 0.05]))
    assert data.dtype == np.int32
    np.testing.assert_array_equal(data, [500, -500])
