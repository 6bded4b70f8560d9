"""The NPU's integer output stage: scale, round, add the zero point, activate, saturate.

An NPU op ends every output element the same way: an int64 value times a 32-bit multiplier,
shifted right by up to 63 bits with the rounding the OFM_PRECISION register selects, plus the
OFM zero point, then the clamp or table lookup. The rounding modes follow the TOSA
`apply_scale_32` definition Vela compiles onto them (`tosa_graph_optimiser.rewrite_rescale`:
double rounding -> TFL, single rounding -> NATURAL):

- TFL: add 2^(shift-1), and for shifts above 31 another +-2^30 (the rounding TFLite's
  saturating rounding doubling high multiply does before its rounding right shift), then floor.
- NATURAL: add 2^(shift-1), then floor (round half up).
- TRUNCATE: round towards zero.

A 32-bit OFM carries raw accumulator-style values: no zero point, no clamp beyond int32, unless
a table lookup follows (the table is indexed by an int8-clamped value, zero point added).
"""

from __future__ import annotations

import numpy as np

from cascader.ir.npu_ops import Activation, NpuTensor

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
_DTYPE_RANGE = {"int8": (-128, 127), "uint8": (0, 255), "int16": (-32768, 32767)}
# BinaryElementwise.rounding spells NATURAL as Vela's RoundingMode name.
_MODE_ALIASES = {"HALF_UP": "NATURAL"}


def rounding_mode(name: str) -> str:
    mode = _MODE_ALIASES.get(name, name)
    if mode not in ("TFL", "NATURAL", "TRUNCATE"):
        raise ValueError(f"unknown NPU rounding mode {name!r}")
    return mode


def apply_scale(
    values: np.ndarray, multiplier: np.ndarray | int, shift: np.ndarray | int, mode: str = "TFL"
) -> np.ndarray:
    """values * multiplier / 2**shift in int64, rounded by `mode`; multiplier and shift are
    scalars or per-channel arrays that broadcast over the last axis."""
    values = np.asarray(values, np.int64)
    shift = np.asarray(shift, np.int64)
    product = values * np.asarray(multiplier, np.int64)
    mode = rounding_mode(mode)
    if mode == "TRUNCATE":
        return np.sign(product) * (np.abs(product) >> shift)
    half = np.where(shift > 0, np.left_shift(1, np.maximum(shift - 1, 0), dtype=np.int64), 0)
    if mode == "TFL":
        double = np.where(values >= 0, 1 << 30, -(1 << 30))
        half = half + np.where(shift > 31, double, 0)
    return (product + half) >> shift


def zero_point(tensor: NpuTensor) -> int:
    """The zero point the NPU subtracts from an input: 0 for 32-bit feature maps (Vela's
    `use_zero_point_0`), the tensor's own otherwise."""
    return 0 if tensor.dtype == "int32" else int(tensor.quant.zero_point)


def output_stage(values: np.ndarray, ofm: NpuTensor, activation: Activation) -> np.ndarray:
    """Scaled int64 values -> the OFM's stored values: zero point, clamp or LUT, saturation."""
    if activation.kind == "LUT":
        index = np.clip(values + ofm.quant.zero_point, -128, 127) + 128
        table = np.asarray(activation.lut, np.int64)
        return _cast(table[index], ofm.dtype)
    if ofm.dtype == "int32":
        return _cast(np.clip(values, INT32_MIN, INT32_MAX), "int32")
    low, high = _DTYPE_RANGE[ofm.dtype]
    if activation.kind == "CLAMP":
        low, high = max(low, activation.clamp_min), min(high, activation.clamp_max)
    return _cast(np.clip(values + ofm.quant.zero_point, low, high), ofm.dtype)


def _cast(values: np.ndarray, dtype: str) -> np.ndarray:
    return np.asarray(values).astype(np.dtype(dtype))
