"""NPU primitive operators: what each "ethos-u.<op>" composite becomes after legalization.

Integer-only descriptions, close to what Vela's register-level API needs: tensor shapes and
quantisation, kernel geometry, per-channel (bias, multiplier, shift) triples from Vela's own
scaling helpers, and the activation as a clamp in quantised units or a 256-entry LUT.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

import numpy as np


class Layout(str, Enum):
    NHWC = "NHWC"
    NHCWB16 = "NHCWB16"


@dataclass(frozen=True)
class Quant:
    """Per-tensor affine quantisation: real = scale * (q - zero_point)."""

    scale: float
    zero_point: int


@dataclass(frozen=True)
class NpuTensor:
    name: str
    shape: tuple[int, ...]
    quant: Quant
    dtype: str = "int8"
    layout: Layout = Layout.NHWC


@dataclass(frozen=True)
class Activation:
    """NONE, a clamp in quantised output units, or a 256-entry int8 LUT indexed by q + 128."""

    kind: str = "NONE"  # NONE | CLAMP | LUT
    clamp_min: int = -128
    clamp_max: int = 127
    lut: tuple[int, ...] = ()
    function: str = ""  # the LUT's real function, e.g. "sigmoid"


@dataclass(frozen=True)
class Kernel:
    height: int
    width: int
    stride_h: int = 1
    stride_w: int = 1
    dilation_h: int = 1
    dilation_w: int = 1


@dataclass(frozen=True)
class Padding:
    top: int = 0
    left: int = 0
    bottom: int = 0
    right: int = 0


@dataclass(frozen=True, eq=False)
class Conv2D:
    """conv2d, depthwise_conv2d and fully_connected (a 1x1 conv over a 1x1xC IFM)."""

    name: str
    kind: str  # conv2d | depthwise_conv2d | fully_connected
    ifm: NpuTensor
    ofm: NpuTensor
    kernel: Kernel
    padding: Padding
    weights: np.ndarray = field(repr=False)  # int8, OHWI
    weight_zero_point: int
    biases: np.ndarray = field(repr=False)  # int64 per OFM channel
    multipliers: np.ndarray = field(repr=False)  # int32 per OFM channel (Vela quantise_scale)
    shifts: np.ndarray = field(repr=False)  # int per OFM channel
    activation: Activation
    op_family: str = "conv2d"


@dataclass(frozen=True)
class Pooling:
    """max or average pooling; MEAN over H and W legalizes to an average pool."""

    name: str
    pool_type: str  # MAX | AVG
    ifm: NpuTensor
    ofm: NpuTensor
    kernel: Kernel
    padding: Padding
    activation: Activation
    op_family: str = "pooling"


@dataclass(frozen=True)
class BinaryElementwise:
    name: str
    operator: str  # ADD | SUB | MUL | MIN | MAX
    ifm: NpuTensor
    ifm2: NpuTensor
    ofm: NpuTensor
    activation: Activation
    op_family: str = "binary_elementwise"


@dataclass(frozen=True)
class UnaryElementwise:
    """A table lookup (sigmoid, tanh, hard swish, leaky relu) over every element."""

    name: str
    operator: str  # LUT
    ifm: NpuTensor
    ofm: NpuTensor
    activation: Activation
    op_family: str = "unary_elementwise"


@dataclass(frozen=True)
class Identity:
    """Reshape (free between NPU ops) or requantize (a rescaling copy)."""

    name: str
    operator: str  # RESHAPE | REQUANTIZE
    ifm: NpuTensor
    ofm: NpuTensor
    op_family: str = "identity"


NpuOp = Conv2D | Pooling | BinaryElementwise | UnaryElementwise | Identity


@dataclass(frozen=True)
class NpuFunction:
    """One external "ethos-u" function: its primitive ops in topological order."""

    name: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    ops: tuple[NpuOp, ...]
