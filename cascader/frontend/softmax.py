"""Int8 SOFTMAX as NPU primitive ops, following Vela's 8-bit decomposition step for step.

The NPU has no exponential or divide, so softmax over the channel axis becomes 31 ops:
a channel max (MAX pool), exp(x - max) through a 256-entry int32 LUT fused into a SUB, a
channel sum (SUM pool), a count of leading zeros to normalise the sum, three Newton-Raphson
steps for 1/sum in Q2.29, then the product with exp and a rounding shift into the int8 output.
Constants, scalings and rounding modes are Vela's (`ethosu.vela.softmax.SoftMax`), and the exp
table comes from its own generator, so a bit-exact reference can replay the arithmetic.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ethosu.vela import scaling
from ethosu.vela.softmax import SoftMax
from ethosu.vela.tflite_supported_operators import TFLiteSupportedOperators

from cascader.ir.npu_ops import (
    Activation,
    BinaryElementwise,
    Kernel,
    NpuOp,
    NpuTensor,
    Padding,
    Pooling,
    Quant,
    UnaryElementwise,
)

_NEWTON_STEPS = 3
_EXP_SHIFT = 12  # exp values (Q0.31) -> headroom for the channel sum
_HEADROOM_OFFSET = 12 + 31 - 8
_F0_ONE = (1 << 31) - 1
_NEG_32_OVER_17 = -1010580540  # Q2.29 constants of the reciprocal's initial estimate
_48_OVER_17 = 1515870810
_F2_ONE = 1 << 29
_NO_SCALING = (1, 0)


def softmax_shape(shape: tuple[int, ...]) -> tuple[int, int, int, int]:
    """The 4D (1, H, W, C) view Vela softmaxes over: leading 1s padded, batch folded into H."""
    padded = (1,) * (4 - len(shape)) + tuple(shape)
    n, h, w, c = padded
    return (1, n * h, w, c)


def softmax_fits(shape: tuple[int, ...]) -> bool:
    """Vela's SOFTMAX constraint: the IFM's width x height within the tensor dimension limit."""
    _, h, w, _ = softmax_shape(shape)
    return h * w <= TFLiteSupportedOperators.tens_dim_range[1]


def _activation(low: int, high: int) -> Activation:
    return Activation("CLAMP", low, high)


@dataclass
class _Builder:
    """Collects the decomposition's ops, naming each intermediate after the softmax."""

    prefix: str
    hw: tuple[int, int]
    ops: list[NpuOp] = field(default_factory=list)

    def tensor(self, what: str, channels: int, quant: Quant, dtype: str = "int32") -> NpuTensor:
        return NpuTensor(
            f"{self.prefix}_{len(self.ops)}_{what}", (1, *self.hw, channels), quant, dtype
        )

    def scalar(self, value: int, quant: Quant) -> NpuTensor:
        return NpuTensor(f"{self.prefix}_const_{value}", (1, 1, 1, 1), quant, "int32")

    def binary(
        self,
        operator: str,
        ifm: NpuTensor | int,
        ifm2: NpuTensor | int,
        ofm_quant: Quant,
        activation: Activation,
        rescale: tuple[int, int],
        what: str,
        rounding: str = "TFL",
        scalar_quant: Quant | None = None,
        ofm: NpuTensor | None = None,
    ) -> NpuTensor:
        """One binary op; an int operand is a scalar constant (quantised as `scalar_quant`)."""
        const_quant = scalar_quant or Quant(1.0, 0)
        ifm_scalar = ifm if isinstance(ifm, int) else None
        ifm2_scalar = ifm2 if isinstance(ifm2, int) else None
        a = self.scalar(ifm, const_quant) if isinstance(ifm, int) else ifm
        b = self.scalar(ifm2, const_quant) if isinstance(ifm2, int) else ifm2
        out = ofm or self.tensor(what, max(a.shape[3], b.shape[3]), ofm_quant)
        self.ops.append(
            BinaryElementwise(
                out.name,
                operator,
                a,
                b,
                out,
                activation,
                ifm_scalar=ifm_scalar,
                ifm2_scalar=ifm2_scalar,
                rescale=rescale,
                rounding=rounding,
            )
        )
        return out


def legalize_softmax(name: str, ifm: NpuTensor, ofm: NpuTensor, beta: float = 1.0) -> list[NpuOp]:
    """Vela's int8 softmax as primitive ops; the last op writes `ofm` (named `name`)."""
    _, h, w, channels = softmax_shape(ifm.shape)
    b = _Builder(name, (h, w))
    x = NpuTensor(ifm.name, (1, h, w, channels), ifm.quant, ifm.dtype)
    # Vela's "no scale" tensors keep the IFM zero point; their scale carries no meaning here.
    unscaled = Quant(1.0, ifm.quant.zero_point)
    one, two = Quant(1.0, 0), Quant(2.0, 0)
    clamp, clamp2 = _activation(-128, 127), _activation(-256, 254)
    mul_one_one_two = scaling.elementwise_mul_scale(1.0, 1.0, 2.0)

    # Channel max: a MAX pool over a (1, H*W, C, 1) view, one value per pixel.
    column = NpuTensor(ifm.name, (1, h * w, channels, 1), ifm.quant, ifm.dtype)
    row_max = NpuTensor(f"{name}_0_max", (1, h * w, 1, 1), unscaled, ifm.dtype)
    b.ops.append(
        Pooling(row_max.name, "MAX", column, row_max, Kernel(1, channels), Padding(), Activation())
    )
    row_max = NpuTensor(row_max.name, (1, h, w, 1), unscaled, ifm.dtype)

    # exp(x - max) through the int32 LUT; the output zero point 127 centres the table index.
    exp_quant = Quant(1.0, 127)
    exp_lut = SoftMax(None).generate_exp_table(beta, ifm.quant.scale)
    exp_act = Activation(
        "LUT", -128 - 127, 127 - 127, tuple(int(v) for v in exp_lut), "exp", "int32"
    )
    exp = b.binary("SUB", x, row_max, exp_quant, exp_act, _NO_SCALING, "exp")
    rescaled_exp = b.binary(
        "SHR", exp, _EXP_SHIFT, unscaled, clamp, _NO_SCALING, "shr", "HALF_UP", unscaled
    )
    sum_of_exp = b.tensor("sum", 1, unscaled)
    b.ops.append(
        Pooling(sum_of_exp.name, "SUM", rescaled_exp, sum_of_exp, Kernel(1, 1), Padding(), clamp)
    )
    headroom_plus_one = b.tensor("clz", 1, unscaled)
    b.ops.append(
        UnaryElementwise(headroom_plus_one.name, "CLZ", sum_of_exp, headroom_plus_one, clamp)
    )

    right_shift = b.binary(
        "SUB",
        _HEADROOM_OFFSET,
        headroom_plus_one,
        unscaled,
        clamp,
        _NO_SCALING,
        "right_shift",
        scalar_quant=unscaled,
    )
    headroom = b.binary(
        "SUB", headroom_plus_one, 1, unscaled, clamp, _NO_SCALING, "headroom", scalar_quant=unscaled
    )
    shifted_sum = b.binary("SHL", sum_of_exp, headroom, unscaled, clamp, _NO_SCALING, "shl")
    shifted = b.binary(
        "SUB",
        shifted_sum,
        1 << 30,
        unscaled,
        clamp,
        _NO_SCALING,
        "minus_one",
        scalar_quant=unscaled,
    )
    shifted = b.binary(
        "SHL", shifted, 1, unscaled, clamp, _NO_SCALING, "shl", scalar_quant=unscaled
    )
    # Vela's custom rescale (multiplier 1, shift 1) halves the sum: the denominator in Q0.31 / 2.
    half_denominator = b.binary(
        "ADD", shifted, _F0_ONE, one, clamp, (1, 1), "half_denominator", scalar_quant=unscaled
    )
    rescaled = b.binary(
        "MUL",
        half_denominator,
        _NEG_32_OVER_17,
        two,
        clamp2,
        mul_one_one_two,
        "mul",
        scalar_quant=one,
    )
    nr_x = b.binary(
        "ADD", rescaled, _48_OVER_17, one, clamp, _NO_SCALING, "estimate", scalar_quant=unscaled
    )

    for _ in range(_NEWTON_STEPS):
        product = b.binary("MUL", nr_x, half_denominator, two, clamp2, mul_one_one_two, "mul")
        error = b.binary(
            "SUB", _F2_ONE, product, one, clamp, _NO_SCALING, "error", scalar_quant=unscaled
        )
        correction = b.binary("MUL", nr_x, error, two, clamp2, mul_one_one_two, "mul")
        correction = b.binary(
            "MUL", correction, 4, unscaled, clamp, _NO_SCALING, "times_four", scalar_quant=unscaled
        )
        nr_x = b.binary("ADD", nr_x, correction, one, clamp, _NO_SCALING, "estimate")

    scale_factor = b.binary(
        "MUL", nr_x, 2, one, clamp, _NO_SCALING, "scale_factor", scalar_quant=unscaled
    )
    scaled_exp = b.binary("MUL", exp, scale_factor, two, clamp2, mul_one_one_two, "scaled_exp")
    out = NpuTensor(name, (1, h, w, channels), ofm.quant, ofm.dtype, ofm.layout)
    b.binary(
        "SHR", scaled_exp, right_shift, ofm.quant, Activation(), _NO_SCALING, "", "HALF_UP", ofm=out
    )
    return b.ops
