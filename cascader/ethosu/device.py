"""Ethos-U55/U65 device model: per-accelerator constants and the valid block configs of each NPU
operation with the cycles one block costs, all taken from Vela (its block-config search's grid
and `try_block_config`, its architecture tables and its performance model's per-block
formulas)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from ethosu.vela.api import NpuResamplingMode
from ethosu.vela.architecture_allocator import ArchitectureBlockConfig, try_block_config
from ethosu.vela.architecture_features import (
    Accelerator,
    ArchitectureFeatures,
    Block,
    SHRAMElements,
)
from ethosu.vela.npu_performance import PerformanceQuery, _estimate_output_cycles_per_element
from ethosu.vela.operation import NpuBlockType
from ethosu.vela.register_command_stream_generator import resampling_mode_map
from ethosu.vela.shape4d import Shape4D

from cascader.ethosu.block_config import BlockConfig
from cascader.ethosu.npu_op import NpuOpDescription
from cascader.ethosu.perf_query import performance_query
from cascader.ethosu.vela_arch import ACCELERATORS, check_accelerator, default_arch
from cascader.ir.layout import BRICK
from cascader.memo import Memo, memo_function, module_memo

__all__ = ["ACCELERATORS", "EthosuDevice", "get_device"]

_LUT_BANKS = 2  # SHRAM banks a lookup table occupies, as Vela's block-config search counts them


@dataclass(frozen=True)
class EthosuDevice:
    """One accelerator variant. Shapes are (height, width, depth)."""

    name: str
    macs_per_cycle: int
    cores: int
    output_ublock: tuple[int, int, int]
    input_ublock: tuple[int, int, int]
    max_block: tuple[int, int, int]
    shram_banks: int
    shram_bank_bytes: int
    split_depth: int

    @property
    def arch(self) -> ArchitectureFeatures:
        return default_arch(self.name)

    def output_quantum(self, layout: str = "NHWC") -> tuple[int, ...]:
        """The smallest output volume the NPU writes, in the tensor's layout."""
        h, w, d = self.output_ublock
        return (1, h, 1, w, d) if layout == "NHCWB16" else (1, h, w, d)

    def block_configs(self, op: NpuOpDescription, cull: bool = True) -> tuple[BlockConfig, ...]:
        """The op's valid block configs, largest depth then width first. With `cull`, a block
        whose output shape another valid block covers in every axis is dropped, as the
        cascader's default does (its option disable_block_culling turns this off)."""
        return _block_configs(self.name, op, cull)

    def vela_block_config(
        self, op: NpuOpDescription, block: tuple[int, int, int]
    ) -> ArchitectureBlockConfig:
        """Vela's SHRAM layout, IFM block and accumulator type for running `op` with OFM block
        `block`; raises ValueError when the block does not fit."""
        return _vela_block_config(self.name, op, block)


def get_device(name: str) -> EthosuDevice:
    """The device model of an accelerator; DeviceConfigError lists the valid names."""
    return _device(check_accelerator(name))


@memo_function(None)
def _device(name: str) -> EthosuDevice:
    arch = default_arch(name)
    ublock = arch.ofm_ublock
    return EthosuDevice(
        name=name,
        macs_per_cycle=arch.num_macs_per_cycle * arch.ncores,
        cores=arch.ncores,
        output_ublock=(ublock.height, ublock.width, ublock.depth),
        input_ublock=(arch.ifm_ublock.height, arch.ifm_ublock.width, arch.ifm_ublock.depth),
        max_block=(arch.ofm_block_max.height, arch.ofm_block_max.width, arch.ofm_block_max.depth),
        shram_banks=arch.shram.total_banks,
        shram_bank_bytes=arch.shram.bank_size_bytes,
        split_depth=ArchitectureFeatures.OFMSplitDepth,
    )


# Per op facts (`_op_facts`), whether Vela's `try_block_config` accepts each block asked
# about so far: its answer depends on those facts and the block alone. Apart from the
# configs themselves (`_SHAPE_FREE_CONFIGS`): grid walks meet more blocks than that bounded
# memo holds, and a yes or no per block is small.
_BLOCK_FITS: Memo[tuple, dict[tuple[int, int, int], bool]] = module_memo(
    "ethosu.device block fits by op facts", 4096
)


@memo_function(4096)
def valid_blocks(name: str, op: NpuOpDescription) -> tuple[tuple[int, int, int], ...]:
    """Vela's valid (h, w, c) block configs for the op on accelerator `name`, in Vela's order:
    the blocks of `npu_find_block_configs`' grid (micro-block steps up to the OFM's shape
    capped by the largest block; a depth short of the cap a multiple of the OFM split depth)
    that `try_block_config` accepts. Walked here so that the stripes of an op, and ops alike
    in their facts, ask Vela about each block once. Asked once per op description, as the
    graph's culled and full lists and the schedule's block choice all start from it."""
    ublock = default_arch(name).ofm_ublock
    # As Vela tests it: its resampling mode against the API's NONE, a different enum, so
    # every op's blocks start at two rows and two columns.
    upscaled = resampling_mode_map[NpuResamplingMode[op.upscale]] != NpuResamplingMode.NONE
    step_h = max(ublock.height, 2 if upscaled else 1)
    step_w = max(ublock.width, 2 if upscaled else 1)
    max_h, max_w, max_d = (int(n) for n in np.minimum(op.ofm_shape, _device(name).max_block))
    facts = _op_facts(name, op)
    fits = _BLOCK_FITS.lookup(facts)
    if fits is None:
        fits = {}
        _BLOCK_FITS.keep(facts, fits)
    found = []
    # What a block needs of SHRAM (IFM block, accumulators) never shrinks as it grows in
    # any axis, so a block that does not fit makes every block at least as large in each
    # axis not fit either: per row count, the smallest depth that failed at the last width
    # (or at fewer rows) caps the depths asked (building an EfficientNet-like network's
    # graph, 36,016 of the 49,506 blocks asked before did not fit).
    never = max_d + ublock.depth  # past the last depth of the grid
    caps = dict.fromkeys(range(step_h, max_h + step_h, step_h), never)
    for w in range(step_w, max_w + step_w, step_w):
        cap = never
        for h in caps:
            cap = min(cap, caps[h])
            for d in range(ublock.depth, cap, ublock.depth):
                if d < max_d and d % ArchitectureFeatures.OFMSplitDepth:
                    continue
                block = (h, w, d)
                fit = fits.get(block)
                if fit is None:
                    fit = fits[block] = _shape_free_config(name, op, block, facts) is not None
                if not fit:
                    cap = d
                    break
                found.append(block)
            caps[h] = cap
    if not found:
        raise ValueError(f"no block config fits {name} SHRAM for {op}")
    return tuple(found)


@memo_function(4096)
def _block_configs(name: str, op: NpuOpDescription, cull: bool) -> tuple[BlockConfig, ...]:
    blocks = np.array(valid_blocks(name, op), dtype=np.int64).reshape(-1, 3)
    if cull:
        blocks = blocks[_pareto_maximal(_layout_shapes(blocks, op.ofm_layout))]
    order = np.lexsort((-blocks[:, 0], -blocks[:, 1], -blocks[:, 2]))
    costed = _costed_blocks(name, op)
    return tuple(costed[tuple(int(v) for v in b)] for b in blocks[order])


@memo_function(4096)
def _costed_blocks(name: str, op: NpuOpDescription) -> dict[tuple[int, int, int], BlockConfig]:
    """Every valid block of the op, costed: the culled and the full list share them, and
    its blocks one query (only their block config differs)."""
    query = performance_query(op, None)
    return {block: _block_config(name, op, block, query) for block in valid_blocks(name, op)}


def _layout_shapes(blocks: np.ndarray, layout: str) -> np.ndarray:
    """(h, w, d) blocks as the output tensor lays them out: NHCWB16 counts 16-deep bricks."""
    if layout == "NHCWB16":
        return np.stack([blocks[:, 0], -(-blocks[:, 2] // BRICK), blocks[:, 1]], axis=1)
    return blocks


def _pareto_maximal(shapes: np.ndarray) -> np.ndarray:
    """Mask of the shapes no other shape covers (>= in every axis); equal shapes keep one."""
    covers = (shapes[None, :, :] >= shapes[:, None, :]).all(axis=2)
    equal = (shapes[None, :, :] == shapes[:, None, :]).all(axis=2)
    earlier_equal = np.triu(equal, k=1).T  # j < i with the same shape
    dominated = (covers & ~equal).any(axis=1) | earlier_equal.any(axis=1)
    return ~dominated


def _output_layout_shape(block: tuple[int, int, int], layout: str) -> tuple[int, ...]:
    h, w, d = block
    return (1, h, -(-d // BRICK), w, BRICK) if layout == "NHCWB16" else (1, h, w, d)


# Vela's `try_block_config` reads an op's shapes only through the depth of its larger input
# (an elementwise op's second input may be the larger) and whether its OFM is one row high,
# so the stripes of one op, asked with each of their own shapes, share one answer per block.
_SHAPE_FREE_CONFIGS: Memo[tuple, object] = module_memo(
    "ethosu.device Vela block config by op facts and block", 65536
)
_NO_FIT = object()


def _op_facts(name: str, op: NpuOpDescription) -> tuple:
    """Everything of an op that Vela's `try_block_config` reads, besides the block."""
    ifm, ifm2 = op.ifm_shape, op.ifm2_shape
    larger = ifm2 if ifm2 is not None and math.prod(ifm2) > math.prod(ifm) else ifm
    return (name, op.kind, op.sub_op, larger[2], op.ofm_shape[0] == 1, op.ifm2_scalar,
            op.ifm_dtype, op.is_part_kernel_first, op.kernel, op.stride, op.dilation,
            op.activation == "LUT", op.scaled, op.upscale)  # fmt: skip


@memo_function(65536)
def _vela_block_config(
    name: str, op: NpuOpDescription, block: tuple[int, int, int]
) -> ArchitectureBlockConfig:
    config = _shape_free_config(name, op, block, _op_facts(name, op))
    if config is None:
        raise ValueError(f"block {block} does not fit {name} SHRAM for {op}")
    return config


def _shape_free_config(
    name: str, op: NpuOpDescription, block: tuple[int, int, int], facts: tuple
) -> ArchitectureBlockConfig | None:
    """Vela's config of `block` for the op (None: it does not fit), kept per its `facts`."""
    key = (facts, block)
    config = _SHAPE_FREE_CONFIGS.lookup(key)
    if config is None:
        config = _try_block_config(name, op, block) or _NO_FIT
        _SHAPE_FREE_CONFIGS.keep(key, config)
    return None if config is _NO_FIT else config


def _try_block_config(
    name: str, op: NpuOpDescription, block: tuple[int, int, int]
) -> ArchitectureBlockConfig | None:
    arch = default_arch(name)
    h, w, d = block
    ifm = op.ifm_shape
    ifm2 = op.ifm2_shape
    config = try_block_config(
        Block(w, h, d),
        arch,
        op.block_type,
        Block(op.ofm_shape[1], op.ofm_shape[0], op.ofm_shape[2]),
        Block(ifm[1], ifm[0], ifm[2]),
        Block(ifm2[1], ifm2[0], ifm2[2]) if ifm2 is not None else None,
        op.ifm2_scalar,
        op.ifm_bits,
        op.is_part_kernel_first,
        op.vela_kernel,
        _LUT_BANKS if op.activation == "LUT" else 0,
        op.scaled,
        resampling_mode_map[NpuResamplingMode[op.upscale]],  # as to_npu_op sets it
    )
    if config is not None:
        config.ofm_block = Shape4D(1, h, w, d)  # the performance model wants a Shape4D
    return config


def _block_config(
    name: str, op: NpuOpDescription, block: tuple[int, int, int], query: PerformanceQuery
) -> BlockConfig:
    arch = default_arch(name)
    config = _vela_block_config(name, op, block)
    ifm_block = config.ifm_block
    input_shape = (1, ifm_block.height, ifm_block.width, min(ifm_block.depth, op.ifm_shape[2]))
    query.config = config
    per_element = _estimate_output_cycles_per_element(arch, op.vela_op, op.faf_op, query)
    return BlockConfig(
        input_shape=input_shape,
        output_shape=_output_layout_shape(block, op.ofm_layout),
        compute_cycles=block_compute_cycles(arch, op, config),
        output_cycles=math.ceil(per_element * block[0] * block[1] * block[2]),
    )


def block_compute_cycles(
    arch: ArchitectureFeatures, op: NpuOpDescription, config: ArchitectureBlockConfig
) -> int:
    """DPU cycles for one OFM block of `op`: micro-block passes per kernel step, weight
    decoding bound and pipeline bubbles, as Vela's performance model counts them per block."""
    if op.block_type == NpuBlockType.ElementWise:
        return 0
    ofm_block = config.ofm_block
    ublock = arch.ofm_ublock
    ublock_h, ublock_w = ublock.height, ublock.width
    block_h = ofm_block.height
    conv1d = (
        ublock.height == 2
        and op.block_type
        in (
            NpuBlockType.ConvolutionMxN,
            NpuBlockType.ConvolutionDepthWise,
            NpuBlockType.VectorProduct,
        )
        and op.ofm_shape[0] == 1
        and op.ofm_shape[1] % 2 == 0
        and op.kernel[0] == 1
    )
    if conv1d:  # Vela's 1D optimisation: 1x4 micro-blocks on one row
        ublock_h, ublock_w, block_h = 1, 4, 1
    n_x = -(-ofm_block.width // ublock_w)
    n_y = -(-block_h // ublock_h)
    n_xy = n_x * n_y
    n_z = -(-ofm_block.depth // ublock.depth)
    ifm_block_depth = min(op.ifm_shape[2], config.ifm_block.depth)
    acc40 = config.acc_type == SHRAMElements.Acc40
    wide = op.ifm_bits == 16
    part_kernel = op.block_type == NpuBlockType.ConvolutionMxN and config.is_partkernel
    depth_passes = -(-ifm_block_depth // 8) if part_kernel else 1
    weight_decode = 32 * ublock.depth // 8
    if arch.accelerator_config is Accelerator.Ethos_U55_32:
        delay = 7 if acc40 else 3
    elif acc40 and arch.accelerator_config in (Accelerator.Ethos_U55_64, Accelerator.Ethos_U55_128):
        delay = 3
    else:
        delay = 2

    limit_y, limit_x = arch.sub_kernel_limits[op.block_type]
    kernel_h, kernel_w = op.kernel
    sub_h = [min(kernel_h - i, limit_y) for i in range(0, kernel_h, limit_y)]
    sub_w = [min(kernel_w - i, limit_x) for i in range(0, kernel_w, limit_x)]
    cycles = 0
    for elements in (y * x for y in sub_h for x in sub_w):
        if op.block_type == NpuBlockType.Pooling:
            steps = 1
            block_cycles = max(4, elements) * n_xy * n_z
            if wide and arch.accelerator_config != Accelerator.Ethos_U55_32:
                block_cycles *= 2
        elif op.block_type == NpuBlockType.ConvolutionDepthWise:
            steps = -(-elements // 4)
            block_cycles = max(weight_decode, 4 * n_xy * (2 if wide else 1)) * steps * n_z
        elif part_kernel:
            steps = -(-elements // (2 if wide else 4))
            block_cycles = max(weight_decode, 4 * n_xy) * steps * depth_passes * n_z
        else:
            steps = elements
            block_cycles = max(weight_decode, 4 * n_xy) * steps * n_z
        bubbles = 0
        if n_x == 1 and n_y == 1:
            if n_z == 1:
                bubbles = delay * steps
            elif steps > 1:
                bubbles = delay * (steps - 1) * n_z
        u55_32_acc40 = arch.accelerator_config is Accelerator.Ethos_U55_32 and acc40
        if u55_32_acc40 and (n_x == 1 or n_y == 1) and n_z > 1:
            bubbles += delay * n_z
        cycles += block_cycles + bubbles * depth_passes
    if op.block_type in (
        NpuBlockType.ConvolutionMxN,
        NpuBlockType.VectorProduct,
        NpuBlockType.ReduceSum,
    ):
        cycles *= -(-op.ifm_shape[2] // ifm_block_depth)
    return math.ceil(cycles / arch.ncores)
