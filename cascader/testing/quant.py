"""Int8 quantisation arithmetic for generated TFLite models (TFLite's int8 scheme).

Activations are asymmetric int8 (scale, zero point) chosen from a calibrated float range that
always contains 0, so that 0.0 (padding, ReLU floor) is exactly representable. Weights are
symmetric per-channel int8 (zero point 0); biases are int32 with scale input_scale*weight_scale,
which is what the int8 CONV_2D/DEPTHWISE_CONV_2D/FULLY_CONNECTED/TRANSPOSE_CONV kernels assume.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

INT8_MIN = -128
INT8_MAX = 127
_MIN_RANGE = 1e-6


@dataclass(frozen=True)
class QuantParams:
    """Affine int8 quantisation of one tensor: real = scale * (q - zero_point)."""

    scale: float
    zero_point: int

    def quantize(self, real: np.ndarray) -> np.ndarray:
        q = np.round(np.asarray(real, np.float64) / self.scale) + self.zero_point
        return np.clip(q, INT8_MIN, INT8_MAX).astype(np.int8)

    def dequantize(self, q: np.ndarray) -> np.ndarray:
        return (np.asarray(q, np.float64) - self.zero_point) * self.scale

    @property
    def real_min(self) -> float:
        return (INT8_MIN - self.zero_point) * self.scale

    @property
    def real_max(self) -> float:
        return (INT8_MAX - self.zero_point) * self.scale


def activation_qparams(low: float, high: float) -> QuantParams:
    """Asymmetric int8 parameters covering [low, high] widened to include 0."""
    low = min(float(low), 0.0)
    high = max(float(high), 0.0)
    if high - low < _MIN_RANGE:
        high = low + _MIN_RANGE
    scale = float(np.float32((high - low) / (INT8_MAX - INT8_MIN)))
    zero_point = int(np.clip(round(INT8_MIN - low / scale), INT8_MIN, INT8_MAX))
    return QuantParams(scale, zero_point)


@dataclass(frozen=True)
class PerChannelWeights:
    """Symmetric per-channel int8 weights; `axis` is TFLite's quantized_dimension."""

    values: np.ndarray
    scales: np.ndarray
    axis: int

    def dequantize(self) -> np.ndarray:
        shape = [1] * self.values.ndim
        shape[self.axis] = -1
        return self.values.astype(np.float64) * self.scales.reshape(shape)


def quantize_per_channel(weights: np.ndarray, axis: int) -> PerChannelWeights:
    """Quantise float weights symmetrically with one scale per slice along `axis`."""
    moved = np.moveaxis(np.asarray(weights, np.float64), axis, 0)
    peak = np.abs(moved.reshape(moved.shape[0], -1)).max(axis=1)
    scales = np.maximum(peak, _MIN_RANGE) / INT8_MAX
    scales = scales.astype(np.float32).astype(np.float64)
    shape = [1] * moved.ndim
    shape[0] = -1
    q = np.clip(np.round(moved / scales.reshape(shape)), -INT8_MAX, INT8_MAX).astype(np.int8)
    return PerChannelWeights(np.moveaxis(q, 0, axis), scales, axis)


def quantize_bias(bias: np.ndarray, input_scale: float, weight_scales: np.ndarray) -> np.ndarray:
    """Int32 bias at scale input_scale * weight_scale[c], as int8 MAC kernels accumulate."""
    scales = input_scale * np.asarray(weight_scales, np.float64)
    return np.round(np.asarray(bias, np.float64) / scales).astype(np.int32)
