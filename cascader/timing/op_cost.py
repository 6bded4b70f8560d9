"""The cycles of one command of a register stream, from the registers it runs with and Vela's
per-operation formulas (through `ethosu.vela_cost`, the project's one bridge to them): a kernel
operation takes the longest of its compute cycles and each memory area's access cycles (as an
op of Vela's estimate does), a DMA takes Vela's memory-to-memory cycles. The registers are
turned into the `NpuOpDescription` the estimate itself costs, so both read the same numbers."""

from __future__ import annotations

from dataclasses import dataclass

from ethosu.vela.ethos_u55_regs.ethos_u55_regs import (
    activation,
    cmd0,
    cmd1,
    elementwise_mode,
    pooling_mode,
)

from cascader.ethosu.npu_op import Activation, NpuOpDescription
from cascader.ethosu.perf_query import AREA_NAMES
from cascader.ethosu.vela_cost import (
    StripeCost,
    mem2mem_cycles,
    pool_free_arch,
    read_cycles,
    stripe_cost,
)
from cascader.simulator.descriptors import (
    Unsupported,
    broadcast,
    feature_map,
    ifm_depth,
    kernel,
    ofm_shape,
    padding,
    upscale,
)
from cascader.simulator.dma import transfer_bytes
from cascader.simulator.registers import RegisterFile

__all__ = ["KernelCost", "SystemAreas", "describe", "dma_cycles", "kernel_cost"]

_UNARY = {elementwise_mode.ABS.value, elementwise_mode.LRELU.value, elementwise_mode.CLZ.value}
_ELEMENTWISE = {mode.value: mode.name for mode in elementwise_mode}
_POOLING = {mode.value: mode.name for mode in pooling_mode}
_FULL_RANGE = {"int8": (-128, 127), "uint8": (0, 255), "int16": (-32768, 32767),
               "uint16": (0, 65535)}  # fmt: skip
# The simulator's names of the IFM resampling modes -> Vela's (NpuResamplingMode).
_RESAMPLING = {"NONE": "NONE", "NEAREST": "NEAREST", "ZEROS": "TRANSPOSE"}
_SHRAM_REGION = 0x100  # bit 8 of a DMA region register: the NPU's internal SHRAM
CONSTANTS_REGION = 0  # the base pointer of the read-only constants (Vela's and ours)


@dataclass(frozen=True)
class SystemAreas:
    """A system (accelerator, system config, memory mode, vela.ini) and the memory area behind
    each base-pointer region of its command streams: 0 constants, 1 the arena, 2 the fast
    scratch, as Vela and `dse compile` lay them out."""

    system: tuple
    regions: dict[int, str]

    @classmethod
    def of(cls, system: tuple) -> SystemAreas:
        arch = pool_free_arch(system)
        return cls(
            system,
            {
                CONSTANTS_REGION: AREA_NAMES[arch.permanent_storage_mem_area],
                1: AREA_NAMES[arch.feature_map_storage_mem_area],
                2: AREA_NAMES[arch.fast_storage_mem_area],
            },
        )

    def area(self, region: int) -> str:
        if region not in self.regions:
            raise Unsupported(f"region {region} has no memory area (regions 0-2 are timed)")
        return self.regions[region]


@dataclass(frozen=True)
class KernelCost:
    """One kernel operation: Vela's compute cycles, each area's access cycles, and the
    operation's cycles (the longest of them)."""

    description: NpuOpDescription
    compute: float
    access: dict[str, float]

    @property
    def cycles(self) -> float:
        return max([self.compute, *self.access.values()])

    @property
    def bound(self) -> str:
        """What limits it: "compute" or the area whose access takes longest."""
        area = max(self.access, key=self.access.__getitem__, default=None)
        return area if area is not None and self.access[area] > self.compute else "compute"


def _activation(regs: RegisterFile, ofm_dtype: str) -> Activation:
    function = regs.param(cmd0.NPU_SET_ACTIVATION) & 0xFFF
    if activation.LUT_START.value <= function <= activation.LUT_END.value:
        return "LUT"
    if function == activation.TANH.value:
        return "TANH"
    if function == activation.SIGMOID.value:
        return "SIGMOID"
    low = regs.signed_param(cmd0.NPU_SET_ACTIVATION_MIN)
    high = regs.signed_param(cmd0.NPU_SET_ACTIVATION_MAX)
    if ofm_dtype.startswith("u"):
        low, high = low & 0xFFFF, high & 0xFFFF
    full = _FULL_RANGE.get(ofm_dtype)
    return "NONE" if full is None or (low <= full[0] and high >= full[1]) else "CLIP"


def _windowed_ifm(
    regs: RegisterFile, ofm: tuple[int, int, int], depth: int
) -> tuple[int, int, int]:
    """The IFM box a windowed operation reads for its OFM: the kernel's span over the OFM,
    less the padding the NPU inserts, halved when the IFM is upscaled."""
    k, pad = kernel(regs), padding(regs)
    height = (ofm[0] - 1) * k.stride_y + k.dilated_height - pad.top - pad.bottom
    width = (ofm[1] - 1) * k.stride_x + k.dilated_width - pad.left - pad.right
    if upscale(regs) != "NONE":
        height, width = -(-height // 2), -(-width // 2)
    return (max(height, 1), max(width, 1), depth)


def describe(regs: RegisterFile, code: int, param: int) -> NpuOpDescription:
    """The operation the registers set up for kernel command `code` (with `param`)."""
    ofm = ofm_shape(regs)
    ofm_fm = feature_map(regs, "OFM", ofm)
    ifm_fm = feature_map(regs, "IFM", ofm)
    common = {
        "ofm_shape": ofm,
        "ifm_dtype": ifm_fm.dtype,
        "ofm_dtype": ofm_fm.dtype,
        "ifm_layout": ifm_fm.layout,
        "ofm_layout": ofm_fm.layout,
        "activation": _activation(regs, ofm_fm.dtype),
    }
    if code == cmd0.NPU_OP_ELEMENTWISE.value:
        if param not in _ELEMENTWISE:
            raise Unsupported(f"NPU_OP_ELEMENTWISE mode {param}")
        ifm2_shape, scalar = None, False
        if param not in _UNARY:
            cast = broadcast(regs)
            scalar = cast.scalar
            ifm2_shape = (1, 1, 1) if scalar else (
                1 if cast.height else ofm[0],
                1 if cast.width else ofm[1],
                1 if cast.depth else ofm[2],
            )  # fmt: skip
        return NpuOpDescription(kind="elementwise", ifm_shape=(ofm[0], ofm[1], ifm_depth(regs)),
                                sub_op=_ELEMENTWISE[param], ifm2_shape=ifm2_shape,
                                ifm2_scalar=scalar, **common)  # fmt: skip
    k = kernel(regs)
    windows = {
        "kernel": (k.height, k.width),
        "stride": (k.stride_y, k.stride_x),
        "dilation": (k.dilation_y, k.dilation_x),
        "upscale": _RESAMPLING[upscale(regs)],
    }
    if code == cmd0.NPU_OP_POOL.value:
        if param not in _POOLING:
            raise Unsupported(f"NPU_OP_POOL mode {param}")
        depth = ifm_depth(regs) if _POOLING[param] == "REDUCE_SUM" else ofm[2]
        return NpuOpDescription(kind="pooling", ifm_shape=_windowed_ifm(regs, ofm, depth),
                                sub_op=_POOLING[param], **windows, **common)  # fmt: skip
    if code == cmd0.NPU_OP_DEPTHWISE.value:
        return NpuOpDescription(kind="depthwise", ifm_shape=_windowed_ifm(regs, ofm, ofm[2]),
                                **windows, **common)  # fmt: skip
    return NpuOpDescription(kind="conv2d", ifm_shape=_windowed_ifm(regs, ofm, ifm_depth(regs)),
                            part_kernel_first=k.part_kernel_first, **windows, **common)  # fmt: skip


def _block(regs: RegisterFile) -> tuple[int, int, int]:
    return (
        regs.param(cmd0.NPU_SET_OFM_BLK_HEIGHT_M1) + 1,
        regs.param(cmd0.NPU_SET_OFM_BLK_WIDTH_M1) + 1,
        regs.param(cmd0.NPU_SET_OFM_BLK_DEPTH_M1) + 1,
    )


def _stream_bytes(regs: RegisterFile, registers: tuple[cmd1, ...], cores: int) -> int:
    return sum(regs.value(register) for register in registers[:cores])


def kernel_cost(
    regs: RegisterFile, code: int, param: int, areas: SystemAreas, cores: int
) -> KernelCost:
    """Vela's cycles of the kernel operation the registers set up, with the block config the
    stream gives it and each operand in its region's memory area. Weights and scales read
    in place (from the constants region) count unscaled; read from a buffer a DMA filled
    they count in no area's access cycles: both as Vela's estimate and `ethosu.perf` charge
    them."""
    desc = describe(regs, code, param)
    ifm_area = areas.area(regs.param(cmd0.NPU_SET_IFM_REGION))
    ofm_area = areas.area(regs.param(cmd0.NPU_SET_OFM_REGION))
    ifm2_area = None
    ifm2_bits = ifm2_layout = None
    if desc.ifm2_shape is not None:
        ifm2 = feature_map(regs, "IFM2", desc.ifm2_shape)
        ifm2_area = areas.area(ifm2.region)
        ifm2_bits, ifm2_layout = 8 * ifm2.element_bytes, ifm2.layout
    weighted = code in (cmd0.NPU_OP_CONV.value, cmd0.NPU_OP_DEPTHWISE.value)
    const_area = areas.area(regs.param(cmd0.NPU_SET_WEIGHT_REGION)) if weighted else None
    try:
        cost = stripe_cost(areas.system, desc, _block(regs), ifm_area, ofm_area, ifm2_area,
                           const_area, ifm2_bits, ifm2_layout)  # fmt: skip
    except ValueError as error:
        raise Unsupported(f"block config {_block(regs)}: {error}") from None
    moved: dict[str, float] = {}
    for area, _direction, _nbytes, scaled in cost.feature_maps:
        moved[area] = moved.get(area, 0.0) + scaled
    if const_area is not None and regs.param(cmd0.NPU_SET_WEIGHT_REGION) == CONSTANTS_REGION:
        moved[const_area] = moved.get(const_area, 0.0) + _constant_bytes(regs, desc, cost, cores)
    access = {area: read_cycles(areas.system, area, n) for area, n in moved.items()}
    return KernelCost(desc, cost.op_cycles, access)


def _constant_bytes(
    regs: RegisterFile, desc: NpuOpDescription, cost: StripeCost, cores: int
) -> float:
    """Encoded weight bytes in proportion to the weight elements Vela's model fetches (it
    may fetch them more than once), and the scales once."""
    weights = _stream_bytes(regs, (cmd1.NPU_SET_WEIGHT_LENGTH, cmd1.NPU_SET_WEIGHT1_LENGTH), cores)
    scales = _stream_bytes(regs, (cmd1.NPU_SET_SCALE_LENGTH, cmd1.NPU_SET_SCALE1_LENGTH), cores)
    per_channel = desc.kernel[0] * desc.kernel[1]
    if desc.kind == "conv2d":
        per_channel *= desc.ifm_shape[2]
    read = cost.const_read[0] * weights / (per_channel * desc.ofm_shape[2])
    return read + (scales if cost.const_read[1] > 0 else 0)


def dma_cycles(regs: RegisterFile, areas: SystemAreas) -> float:
    """Vela's cycles of the DMA the registers set up, on the bytes it moves (a strided one
    pays its latency once, as Vela's copy formula charges one copy). One into SHRAM (a lookup
    table) is bound by reading its source, as Vela's model charges it: SHRAM's bandwidth is
    above every external memory's."""
    source = regs.param(cmd0.NPU_SET_DMA0_SRC_REGION)
    dest = regs.param(cmd0.NPU_SET_DMA0_DST_REGION)
    source_area = areas.area(source & 0xFF)
    dest_area = source_area if dest & _SHRAM_REGION else areas.area(dest & 0xFF)
    return float(mem2mem_cycles(areas.system, source_area, dest_area, transfer_bytes(regs)))
