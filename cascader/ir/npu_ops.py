"""NPU primitive operators: what each "ethos-u.<op>" composite becomes after legalization.

Integer-only descriptions, close to what Vela's register-level API needs: tensor shapes and
quantisation, kernel geometry, per-channel (bias, multiplier, shift) triples from Vela's own
scaling helpers, and the activation as a clamp in quantised units or a 256-entry LUT.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
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
    lut_dtype: str = "int8"  # int8, or int32 (softmax's exp table: 256 int32 entries)


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
    # A block of the IFM read at an offset (MEAN split into several sums); () = whole IFM.
    ifm_offset: tuple[int, ...] = ()
    ifm_region: tuple[int, ...] = ()
    # How the NPU upscales the IFM on read: ZEROS inserts zeros (transpose conv, stride 2),
    # NEAREST repeats each element (resize); the kernel then runs at stride 1 over the result.
    upscale: str = "NONE"  # NONE | ZEROS | NEAREST


@dataclass(frozen=True)
class Pooling:
    """max, average or sum pooling; MEAN over H and W legalizes to an average pool, a reduce
    sum over channels (softmax) to a 1x1 SUM pool with one output channel."""

    name: str
    pool_type: str  # MAX | AVG | SUM
    ifm: NpuTensor
    ofm: NpuTensor
    kernel: Kernel
    padding: Padding
    activation: Activation
    op_family: str = "pooling"
    upscale: str = "NONE"  # NONE | NEAREST (resize: each IFM element read 2x2 times)
    rounding: str = "TFL"  # TFL | NATURAL (Vela rounds resize averages half up)


@dataclass(frozen=True)
class BinaryElementwise:
    """Two-operand elementwise op. A scalar operand is a (1, 1, 1, 1) constant tensor whose
    value is `ifm_scalar` / `ifm2_scalar`. `rescale`, when set, is the output scaling
    (multiplier, shift) Vela programs for this op (its explicit or "no scaling" cases), so the
    integer arithmetic does not depend on the tensors' nominal scales."""

    name: str
    operator: str  # ADD | SUB | MUL | MIN | MAX | SHL | SHR
    ifm: NpuTensor
    ifm2: NpuTensor
    ofm: NpuTensor
    activation: Activation
    op_family: str = "binary_elementwise"
    ifm_scalar: int | None = None
    ifm2_scalar: int | None = None
    rescale: tuple[int, int] | None = None
    rounding: str = "TFL"  # TFL | HALF_UP (Vela's RoundingMode)


@dataclass(frozen=True)
class UnaryElementwise:
    """A table lookup (sigmoid, tanh, hard swish, leaky relu) or a count of leading zeros
    (softmax's normalisation) over every element."""

    name: str
    operator: str  # LUT | CLZ
    ifm: NpuTensor
    ofm: NpuTensor
    activation: Activation
    op_family: str = "unary_elementwise"


@dataclass(frozen=True)
class Identity:
    """Reshape (free between NPU ops), requantize (a rescaling copy) or a block copy.

    A block copy (COPY, or REQUANTIZE when the quantisations differ) moves a `region`-shaped
    block read from the IFM at `ifm_offset` (stepping by `ifm_strides`) to the OFM at
    `ofm_offset`: concatenate writes each input into its slice of the OFM, split and
    strided_slice read a slice of the IFM, pad writes the IFM into an OFM whose every other
    element holds `ofm_fill` (the zero point). Empty tuples mean the whole tensor, offset 0,
    stride 1. IN_PLACE is a concatenation's copy whose input its producer wrote straight into
    the OFM's slice (`cascader.schedule.in_place`): the same values, no data moved."""

    name: str
    operator: str  # RESHAPE | REQUANTIZE | COPY | IN_PLACE
    ifm: NpuTensor
    ofm: NpuTensor
    op_family: str = "identity"
    region: tuple[int, ...] = ()
    ifm_offset: tuple[int, ...] = ()
    ifm_strides: tuple[int, ...] = ()
    ofm_offset: tuple[int, ...] = ()
    ofm_fill: int | None = None


@dataclass(frozen=True)
class Concatenation:
    """A concatenation along the channels as one op: each input is block-copied whole into
    its slice of the OFM, starting at its `offsets` channel. As one op (not one copy per
    input, as the frontend legalizes it) an output stripe of some rows reads the same rows
    of every input, so the concatenation and the ops around it can run in row stripes.
    `in_place` lists the inputs (by slot) their producers write straight into their slice
    of the OFM, which the op then copies nothing of: a schedule's choice
    (`cascader.schedule.plans.inputs_in_place`), made where both tensors are held whole."""

    name: str
    ifms: tuple[NpuTensor, ...]
    ofm: NpuTensor
    offsets: tuple[int, ...]
    op_family: str = "identity"
    in_place: tuple[int, ...] = ()

    @property
    def copies(self) -> tuple[Identity, ...]:
        """Its block copies, one per input, named as the frontend names them (the first
        after the OFM, the others numbered); a copy requantizes when the quantisations
        differ."""
        return tuple(
            Identity(
                f"{self.name}_{index}" if index else self.name,
                "COPY" if ifm.quant == self.ofm.quant else "REQUANTIZE",
                ifm,
                self.ofm,
                region=ifm.shape,
                ofm_offset=(*(0,) * (len(self.ofm.shape) - 1), offset),
            )
            for index, (ifm, offset) in enumerate(zip(self.ifms, self.offsets, strict=True))
        )


NpuOp = Conv2D | Pooling | BinaryElementwise | UnaryElementwise | Identity | Concatenation

# (NPU function, input position, NPU function, output position): an input of one function
# that is an output of another as it is, no host operator between (a skip over a host op).
Tie = tuple[str, int, str, int]


@dataclass(frozen=True)
class NpuFunction:
    """One external "ethos-u" function: its primitive ops in topological order."""

    name: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    ops: tuple[NpuOp, ...]


def dilated_kernel(op: Conv2D | Pooling) -> tuple[int, int]:
    """The (height, width) a dilated kernel spans over its input."""
    k = op.kernel
    return (k.height - 1) * k.dilation_h + 1, (k.width - 1) * k.dilation_w + 1


def feature_inputs(op: NpuOp) -> tuple[NpuTensor, ...]:
    """The op's feature-map inputs: IFM, and IFM2 for a binary elementwise op, every input
    of a concatenation."""
    if isinstance(op, Concatenation):
        return op.ifms
    return (op.ifm, op.ifm2) if isinstance(op, BinaryElementwise) else (op.ifm,)


def with_inputs(op: NpuOp, inputs: tuple[NpuTensor, ...]) -> NpuOp:
    """The op reading `inputs` (in `feature_inputs` order) in place of its own."""
    if isinstance(op, Concatenation):
        return replace(op, ifms=tuple(inputs))
    if isinstance(op, BinaryElementwise):
        return replace(op, ifm=inputs[0], ifm2=inputs[1])
    return replace(op, ifm=inputs[0])


def feature_maps(op: NpuOp) -> tuple[NpuTensor, ...]:
    """The op's feature maps: its inputs, then its OFM."""
    return (*feature_inputs(op), op.ofm)


def resamples(op: NpuOp) -> bool:
    """Upscaling ops run over whole columns, and but for a transposed convolution over whole
    rows (`stripes_rows`): the NPU cannot start an upscaled read mid-pixel (a slice of the
    output channels reads the same)."""
    return isinstance(op, Conv2D | Pooling) and op.upscale != "NONE"


def stripes_rows(op: NpuOp) -> bool:
    """A transposed convolution (its IFM read with zeros inserted after each row and
    column) runs in row stripes of whole columns: a stripe whose first upscaled row falls
    on an inserted row of zeros starts at the next IFM row with one more row of padding,
    which holds the same zeros. A NEAREST upscale's in-between row repeats an IFM row, which
    padding cannot stand for, so those ops run whole."""
    return isinstance(op, Conv2D) and op.upscale == "ZEROS"


def scalar_input(op: NpuOp, slot: int) -> bool:
    """Whether input `slot` of the op is a scalar the command stream carries as a value."""
    return isinstance(op, BinaryElementwise) and (
        (slot == 0 and op.ifm_scalar is not None) or (slot == 1 and op.ifm2_scalar is not None)
    )


def feature_map(tensor: NpuTensor) -> NpuTensor:
    """A tensor as a 4-D NHWC/NHCWB16 feature map: lower ranks gain leading unit axes."""
    if len(tensor.shape) == 4:
        return tensor
    return replace(tensor, shape=(1, 1, 1, *tensor.shape)[-4:])


def as_feature_maps(op: NpuOp) -> NpuOp:
    """The op with every feature map 4-D (a fully connected layer's (1, C) becomes 1x1xC)."""
    inputs = tuple(feature_map(t) for t in feature_inputs(op))
    return with_inputs(replace(op, ofm=feature_map(op.ofm)), inputs)
