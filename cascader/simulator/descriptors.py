"""Typed views of the register file for one operation: feature maps (tiles, strides,
precision, layout), kernel, padding, activation, scaling and weight/scale stream ranges.

A value the simulator does not model raises `Unsupported` naming the register, so the
operation is reported and skipped rather than computed wrongly. Field layouts are those of
Vela's register map (`ethos_u55_regs`) and of how its command stream generator fills them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from ethosu.vela.ethos_u55_regs.ethos_u55_regs import (
    activation,
    clip_range,
    cmd0,
    cmd1,
    ifm_precision,
    ofm_precision,
    resampling_mode,
    rounding,
)

from cascader.simulator.registers import RegisterFile

_IFM_DTYPES = {
    ifm_precision.U8.value: "uint8",
    ifm_precision.S8.value: "int8",
    ifm_precision.U16.value: "uint16",
    ifm_precision.S16.value: "int16",
    ifm_precision.S32.value: "int32",
}
_OFM_DTYPES = {
    ofm_precision.U8.value: "uint8",
    ofm_precision.S8.value: "int8",
    ofm_precision.U16.value: "uint16",
    ofm_precision.S16.value: "int16",
    ofm_precision.S32.value: "int32",
}
_LAYOUTS = {0: "NHWC", 1: "NHCWB16"}
ROUNDING = {
    rounding.TFL.value: "TFL",
    rounding.TRUNCATE.value: "TRUNCATE",
    rounding.NATURAL.value: "NATURAL",
}
_UPSCALE = {
    resampling_mode.NONE.value: "NONE",
    resampling_mode.NEAREST.value: "NEAREST",
    resampling_mode.TRANSPOSE.value: "ZEROS",  # the reference's name for zero insertion
}
_CLIP = {
    clip_range.OFM_PRECISION.value: None,
    clip_range.FORCE_UINT8.value: (0, 255),
    clip_range.FORCE_INT8.value: (-128, 127),
    clip_range.FORCE_INT16.value: (-32768, 32767),
}


class Unsupported(Exception):
    """A register value (or combination) the simulator cannot execute."""


@dataclass(frozen=True)
class FeatureMap:
    """A feature map as the NPU addresses it: up to 4 tiles of a (H, W, C) box."""

    name: str  # IFM, IFM2 or OFM
    region: int
    bases: tuple[int, int, int, int]
    height0: int
    height1: int
    width0: int
    stride_y: int
    stride_x: int
    stride_c: int
    dtype: str
    layout: str
    zero_point: int
    shape: tuple[int, int, int]  # the (H, W, C) the operation touches

    @property
    def element_bytes(self) -> int:
        return np.dtype(self.dtype).itemsize


_FM_REGISTERS = {
    "IFM": (
        cmd0.NPU_SET_IFM_REGION,
        (
            cmd1.NPU_SET_IFM_BASE0,
            cmd1.NPU_SET_IFM_BASE1,
            cmd1.NPU_SET_IFM_BASE2,
            cmd1.NPU_SET_IFM_BASE3,
        ),
        (cmd0.NPU_SET_IFM_HEIGHT0_M1, cmd0.NPU_SET_IFM_HEIGHT1_M1, cmd0.NPU_SET_IFM_WIDTH0_M1),
        (cmd1.NPU_SET_IFM_STRIDE_Y, cmd1.NPU_SET_IFM_STRIDE_X, cmd1.NPU_SET_IFM_STRIDE_C),
        cmd0.NPU_SET_IFM_PRECISION,
        cmd0.NPU_SET_IFM_ZERO_POINT,
    ),
    "IFM2": (
        cmd0.NPU_SET_IFM2_REGION,
        (
            cmd1.NPU_SET_IFM2_BASE0,
            cmd1.NPU_SET_IFM2_BASE1,
            cmd1.NPU_SET_IFM2_BASE2,
            cmd1.NPU_SET_IFM2_BASE3,
        ),
        (cmd0.NPU_SET_IFM2_HEIGHT0_M1, cmd0.NPU_SET_IFM2_HEIGHT1_M1, cmd0.NPU_SET_IFM2_WIDTH0_M1),
        (cmd1.NPU_SET_IFM2_STRIDE_Y, cmd1.NPU_SET_IFM2_STRIDE_X, cmd1.NPU_SET_IFM2_STRIDE_C),
        cmd0.NPU_SET_IFM2_PRECISION,
        cmd0.NPU_SET_IFM2_ZERO_POINT,
    ),
    "OFM": (
        cmd0.NPU_SET_OFM_REGION,
        (
            cmd1.NPU_SET_OFM_BASE0,
            cmd1.NPU_SET_OFM_BASE1,
            cmd1.NPU_SET_OFM_BASE2,
            cmd1.NPU_SET_OFM_BASE3,
        ),
        (cmd0.NPU_SET_OFM_HEIGHT0_M1, cmd0.NPU_SET_OFM_HEIGHT1_M1, cmd0.NPU_SET_OFM_WIDTH0_M1),
        (cmd1.NPU_SET_OFM_STRIDE_Y, cmd1.NPU_SET_OFM_STRIDE_X, cmd1.NPU_SET_OFM_STRIDE_C),
        cmd0.NPU_SET_OFM_PRECISION,
        cmd0.NPU_SET_OFM_ZERO_POINT,
    ),
}


def region_index(regs: RegisterFile, register: cmd0) -> int:
    """A base-pointer index 0-7 (the driver's table has eight)."""
    value = regs.param(register)
    if value > 7:
        raise Unsupported(f"{register.name} {value} (base pointers are 0-7)")
    return value


def _precision(regs: RegisterFile, name: str, register: cmd0) -> tuple[str, str]:
    value = regs.param(register)
    table = _OFM_DTYPES if name == "OFM" else _IFM_DTYPES
    code = value & (0x7 if name == "OFM" else 0xF)
    if code not in table:
        raise Unsupported(f"{register.name} precision {code:#x}")
    layout = (value >> 6) & 0x3
    if layout not in _LAYOUTS:
        raise Unsupported(f"{register.name} format {layout}")
    return table[code], _LAYOUTS[layout]


def feature_map(regs: RegisterFile, name: str, shape: tuple[int, int, int]) -> FeatureMap:
    """The IFM, IFM2 or OFM the registers describe, over the (H, W, C) box given."""
    region, bases, tiles, strides, precision, zero_point = _FM_REGISTERS[name]
    dtype, layout = _precision(regs, name, precision)
    zp = regs.param(zero_point) if dtype.startswith("u") else regs.signed_param(zero_point)
    return FeatureMap(
        name=name,
        region=region_index(regs, region),
        bases=tuple(regs.address(b) for b in bases),  # type: ignore[arg-type]
        height0=regs.param(tiles[0]) + 1,
        height1=regs.param(tiles[1]) + 1,
        width0=regs.param(tiles[2]) + 1,
        stride_y=regs.address(strides[0]),
        stride_x=regs.address(strides[1]),
        stride_c=regs.address(strides[2]),
        dtype=dtype,
        layout=layout,
        zero_point=zp,
        shape=shape,
    )


def ofm_shape(regs: RegisterFile) -> tuple[int, int, int]:
    return (
        regs.param(cmd0.NPU_SET_OFM_HEIGHT_M1) + 1,
        regs.param(cmd0.NPU_SET_OFM_WIDTH_M1) + 1,
        regs.param(cmd0.NPU_SET_OFM_DEPTH_M1) + 1,
    )


def ifm_depth(regs: RegisterFile) -> int:
    return regs.param(cmd0.NPU_SET_IFM_DEPTH_M1) + 1


def ofm_rounding(regs: RegisterFile) -> str:
    mode = regs.param(cmd0.NPU_SET_OFM_PRECISION) >> 14
    if mode not in ROUNDING:
        raise Unsupported(f"NPU_SET_OFM_PRECISION rounding {mode}")
    return ROUNDING[mode]


def ifm_rounding(regs: RegisterFile) -> str:
    mode = regs.param(cmd0.NPU_SET_IFM_PRECISION) >> 14
    if mode not in ROUNDING:
        raise Unsupported(f"NPU_SET_IFM_PRECISION rounding {mode}")
    return ROUNDING[mode]


def global_scaling(regs: RegisterFile) -> bool:
    """OFM_PRECISION bit 8: one OFM_SCALE for the op instead of the per-channel stream."""
    return bool((regs.param(cmd0.NPU_SET_OFM_PRECISION) >> 8) & 1)


def ofm_scale(regs: RegisterFile) -> tuple[int, int]:
    """(multiplier, shift) of OFM_SCALE; the multiplier is unsigned (an average pool of 4
    elements takes 2^31 + 1)."""
    return regs.value(cmd1.NPU_SET_OFM_SCALE), regs.cmd1_param(cmd1.NPU_SET_OFM_SCALE) & 0x3F


def ifm_scale_mode(regs: RegisterFile) -> int:
    """IFM_PRECISION bits 8-9: which operand of an ADD/SUB takes the 32-bit OPA scale."""
    return (regs.param(cmd0.NPU_SET_IFM_PRECISION) >> 8) & 0x3


@dataclass(frozen=True)
class Kernel:
    height: int
    width: int
    stride_y: int
    stride_x: int
    dilation_y: int
    dilation_x: int
    part_kernel_first: bool

    @property
    def dilated_height(self) -> int:
        return (self.height - 1) * self.dilation_y + 1

    @property
    def dilated_width(self) -> int:
        return (self.width - 1) * self.dilation_x + 1


def kernel(regs: RegisterFile) -> Kernel:
    """KERNEL_STRIDE: bits 0/1 stride x/y low bits, 2 part-kernel-first, 3/4 dilation x/y,
    6-8 and 9-11 the stride extension bits; KERNEL_*_M1 hold the dilated extent minus 1."""
    value = regs.param(cmd0.NPU_SET_KERNEL_STRIDE)
    if value & ~0xFDF:
        raise Unsupported(f"NPU_SET_KERNEL_STRIDE bits {value & ~0xFDF:#x}")
    stride_x = ((value & 1) | (((value >> 6) & 0x7) << 1)) + 1
    stride_y = (((value >> 1) & 1) | (((value >> 9) & 0x7) << 1)) + 1
    dilation_x, dilation_y = ((value >> 3) & 1) + 1, ((value >> 4) & 1) + 1
    extent_h = regs.param(cmd0.NPU_SET_KERNEL_HEIGHT_M1)
    extent_w = regs.param(cmd0.NPU_SET_KERNEL_WIDTH_M1)
    if extent_h % dilation_y or extent_w % dilation_x:
        raise Unsupported("dilated kernel extent not a multiple of the dilation")
    return Kernel(
        height=extent_h // dilation_y + 1,
        width=extent_w // dilation_x + 1,
        stride_y=stride_y,
        stride_x=stride_x,
        dilation_y=dilation_y,
        dilation_x=dilation_x,
        part_kernel_first=bool(value & 4),
    )


@dataclass(frozen=True)
class Padding:
    top: int
    left: int
    bottom: int
    right: int


def padding(regs: RegisterFile) -> Padding:
    return Padding(
        regs.param(cmd0.NPU_SET_IFM_PAD_TOP),
        regs.param(cmd0.NPU_SET_IFM_PAD_LEFT),
        regs.param(cmd0.NPU_SET_IFM_PAD_BOTTOM),
        regs.param(cmd0.NPU_SET_IFM_PAD_RIGHT),
    )


def upscale(regs: RegisterFile) -> str:
    mode = regs.param(cmd0.NPU_SET_IFM_UPSCALE) & 0x3
    if mode not in _UPSCALE:
        raise Unsupported(f"NPU_SET_IFM_UPSCALE mode {mode}")
    return _UPSCALE[mode]


@dataclass(frozen=True)
class ActivationSetting:
    """ACTIVATION: the function (none, or LUT slot 0-7), the forced clip range, min/max."""

    lut_slot: int | None
    clip: tuple[int, int] | None
    minimum: int
    maximum: int


def activation_setting(regs: RegisterFile) -> ActivationSetting:
    value = regs.param(cmd0.NPU_SET_ACTIVATION)
    function, clip = value & 0xFFF, value >> 12
    if clip not in _CLIP:
        raise Unsupported(f"NPU_SET_ACTIVATION clip range {clip}")
    if function == activation.NONE.value:
        slot = None
    elif activation.LUT_START.value <= function <= activation.LUT_END.value:
        slot = function - activation.LUT_START.value
    else:
        name = {activation.TANH.value: "TANH", activation.SIGMOID.value: "SIGMOID"}
        raise Unsupported(f"NPU_SET_ACTIVATION function {name.get(function, function)}")
    return ActivationSetting(
        lut_slot=slot,
        clip=_CLIP[clip],
        minimum=regs.signed_param(cmd0.NPU_SET_ACTIVATION_MIN),
        maximum=regs.signed_param(cmd0.NPU_SET_ACTIVATION_MAX),
    )


@dataclass(frozen=True)
class StreamRange:
    """Where a weight or scale stream of one core lies."""

    region: int
    address: int
    length: int


def weight_streams(regs: RegisterFile, cores: int) -> tuple[StreamRange, ...]:
    region = region_index(regs, cmd0.NPU_SET_WEIGHT_REGION)
    pairs = (
        (cmd1.NPU_SET_WEIGHT_BASE, cmd1.NPU_SET_WEIGHT_LENGTH),
        (cmd1.NPU_SET_WEIGHT1_BASE, cmd1.NPU_SET_WEIGHT1_LENGTH),
    )
    return tuple(StreamRange(region, regs.address(b), regs.value(n)) for b, n in pairs[:cores])


def scale_streams(regs: RegisterFile, cores: int) -> tuple[StreamRange, ...]:
    region = region_index(regs, cmd0.NPU_SET_SCALE_REGION)
    pairs = (
        (cmd1.NPU_SET_SCALE_BASE, cmd1.NPU_SET_SCALE_LENGTH),
        (cmd1.NPU_SET_SCALE1_BASE, cmd1.NPU_SET_SCALE1_LENGTH),
    )
    return tuple(StreamRange(region, regs.address(b), regs.value(n)) for b, n in pairs[:cores])


@dataclass(frozen=True)
class Broadcast:
    """IFM2_BROADCAST: which IFM2 axes are 1 and repeat, operand order, scalar IFM2."""

    height: bool
    width: bool
    depth: bool
    reversed_operands: bool
    scalar: bool


def broadcast(regs: RegisterFile) -> Broadcast:
    value = regs.param(cmd0.NPU_SET_IFM2_BROADCAST)
    if value & ~0xC7:
        raise Unsupported(f"NPU_SET_IFM2_BROADCAST bits {value & ~0xC7:#x}")
    return Broadcast(
        bool(value & 1), bool(value & 2), bool(value & 4), bool(value & 0x40), bool(value & 0x80)
    )


def ifm2_scalar(regs: RegisterFile, dtype: str) -> int:
    if dtype.startswith("u"):
        return regs.param(cmd0.NPU_SET_IFM2_SCALAR)
    return regs.signed_param(cmd0.NPU_SET_IFM2_SCALAR)
