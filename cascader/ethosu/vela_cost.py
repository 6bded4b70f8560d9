"""The one bridge to Vela's per-operation cost functions (`ethosu.vela.npu_performance`,
private helpers included): the cycles and element accesses of one NPU operation or stripe
under a block config, its feature-map transfers scaled by Vela's burst efficiency, DMA cycles,
and the block config Vela's model runs an operation fastest with. The evaluator (`perf`), the
scheduler's block choice and the TIR lowering's cycle hints all ask here.

System tuples are (accelerator, system config, memory mode, vela.ini path): none of these
formulas reads the arena cache size, so one pool-free architecture serves every pool."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from ethosu.vela.architecture_allocator import ArchitectureBlockConfig
from ethosu.vela.architecture_features import Accelerator, ArchitectureFeatures
from ethosu.vela.npu_performance import (
    PerformanceQuery,
    _estimate_memory_transfer_efficiency,
    _estimate_output_cycles_per_element,
    measure_cycle_cost,
    measure_element_access,
    measure_mem2mem_cycles,
)
from ethosu.vela.operation import NpuBlockType, Op
from ethosu.vela.tensor import BandwidthDirection

from cascader.ethosu.device import get_device, valid_blocks
from cascader.ethosu.npu_op import NpuOpDescription
from cascader.ethosu.perf_query import MEM_AREAS, performance_query
from cascader.ethosu.vela_arch import default_arch, system_arch
from cascader.ir.errors import ScheduleError
from cascader.memo import memo_function

__all__ = [
    "StripeCost",
    "compute_cycles",
    "fastest_block",
    "hint_cycles",
    "mem2mem_cycles",
    "pool_free_arch",
    "stripe_cost",
]


def pool_free_arch(system: tuple) -> ArchitectureFeatures:
    """The system's Vela architecture (bandwidths do not depend on the pool size). A
    `system` is (accelerator, system config, memory mode, `VelaIni`): the memos keyed by it
    (here and in `system_arch`) key on the vela.ini's content."""
    return system_arch(*system[:3], None, system[3])


@memo_function(8192)
def fastest_block(
    system: tuple, desc: NpuOpDescription, areas: tuple[str, str, str]
) -> tuple[int, int, int]:
    """The (h, w, c) block config under which Vela's performance model runs `desc` fastest on
    `system` (accelerator, system config, memory mode, vela.ini), its IFM, OFM and weights in
    `areas`: the largest of its compute cycles and each area's transfer cycles (feature-map
    bytes scaled by Vela's burst efficiency for the block, weights fetched once per block,
    over the area's bandwidth), over every block config valid for the op (ties: Vela's list
    order)."""
    accelerator = system[0]
    arch = pool_free_arch(system)
    device = get_device(accelerator)
    best: tuple[float, int, tuple[int, int, int]] | None = None
    blocks = valid_blocks(accelerator, desc)
    # One query for all blocks: only its block config differs between them.
    query = performance_query(desc, None, areas[0], areas[1])
    configs = {}
    for index, hwd in enumerate(blocks):
        try:
            configs[index] = device.vela_block_config(desc, hwd)
        except ValueError:
            continue
    # Blocks in rising order of a floor under their cycles: once the floor passes the best
    # score so far, no later block can win (a score is at least its cycles), so most blocks
    # are never costed by Vela's model. A block whose cycles alone do not beat the best is
    # not costed further.
    floors = _cycle_floors(arch, desc.vela_op, desc.faf_op, query,
                           [blocks[i] for i in configs], list(configs.values()))  # fmt: skip
    # Equal floors (every block of an elementwise op): the largest blocks first, mostly
    # the fastest.
    order = sorted(zip(floors.tolist(), configs, strict=True),
                   key=lambda pair: (pair[0], -_volume(blocks[pair[1]]), pair[1]))  # fmt: skip
    for floor, index in order:
        if best is not None and floor > best[0]:
            break
        hwd, config = blocks[index], configs[index]
        query.config = config
        cycles = measure_cycle_cost(arch, desc.vela_op, desc.faf_op, query).op_cycles
        if best is not None and (cycles, index) >= best[:2]:
            continue
        score = block_score(arch, query, cycles, areas)
        if best is None or (score, index) < best[:2]:
            best = (score, index, hwd)
    if best is None:
        raise ScheduleError(f"no valid block config for {desc}")
    return best[2]


def block_score(
    arch: ArchitectureFeatures, query: PerformanceQuery, cycles: int, areas: tuple[str, str, str]
) -> float:
    """What `fastest_block` ranks a block by (`query.config` holds it; `cycles`: Vela's
    cycles with it): the largest of those and each area's transfer cycles."""
    ifm_area, ofm_area, weights_area = (MEM_AREAS[a] for a in areas)
    config = query.config
    access = measure_element_access(arch, query)
    moved = {ifm_area: 0.0, ofm_area: 0.0, weights_area: 0.0}
    moved[weights_area] += access.const_read[0]
    moved[ifm_area] += _estimate_memory_transfer_efficiency(
        arch, True, ifm_area, query.ifm_format, query.ifm_bits, config.ifm_block,
        query.ifm_shape, (access.ifm_read[0] + access.ifm_read[1]) * query.ifm_bits / 8,
    )  # fmt: skip
    moved[ofm_area] += _estimate_memory_transfer_efficiency(
        arch, False, ofm_area, query.ofm_format, query.ofm_bits, config.ofm_block,
        query.ofm_shape, access.ofm_write * query.ofm_bits / 8,
    )  # fmt: skip
    return max(
        float(cycles),
        *(n / float(arch.memory_bandwidths_per_cycle[a]) for a, n in moved.items()),
    )


def _volume(block: tuple[int, int, int]) -> int:
    return block[0] * block[1] * block[2]


_CONVOLUTIONS = (NpuBlockType.ConvolutionMxN, NpuBlockType.VectorProduct, NpuBlockType.ReduceSum)
_BLOCKED = (*_CONVOLUTIONS, NpuBlockType.ConvolutionDepthWise, NpuBlockType.Pooling)


def _cycle_floors(
    arch: ArchitectureFeatures,
    op_type: Op,
    faf_type: Op | None,
    query: PerformanceQuery,
    blocks: list[tuple[int, int, int]],
    configs: list[ArchitectureBlockConfig],
) -> np.ndarray:
    """Per block, whole cycles no more than `measure_cycle_cost(...).op_cycles` with that
    block: the terms of Vela's `_estimate_conv_cycles` it can only add to left out (pipeline
    bubbles, the command and memory overhead per block, the smaller of a block's DPU and
    output cycles), the rest as it computes them, for all blocks at once. Zero for other
    kinds of op (elementwise ones: a different formula)."""
    kind = query.npu_block_type
    if kind not in _BLOCKED or not blocks:
        return np.zeros(len(blocks), dtype=np.int64)
    ofm, kernel = query.ofm_shape, query.kernel
    hwd = np.array(blocks, dtype=np.int64).reshape(-1, 3)
    height = np.minimum(hwd[:, 0], ofm.height)
    width = np.minimum(hwd[:, 1], ofm.width)
    depth = np.minimum(hwd[:, 2], ofm.depth)
    ublock = arch.config.ofm_ublock
    ublock_h, ublock_w = ublock.height, ublock.width
    conv1d = (
        ublock.height == 2
        and kind in (NpuBlockType.ConvolutionMxN, NpuBlockType.ConvolutionDepthWise,
                     NpuBlockType.VectorProduct)
        and ofm.height == 1
        and ofm.width % 2 == 0
        and kernel.height == 1
    )  # fmt: skip
    if conv1d:
        ublock_h, ublock_w = 1, 4
    n_xy = -(-width // ublock_w) * -(-height // ublock_h)
    n_z = -(-depth // ublock.depth)
    ifm_depth = np.array(
        [min(query.ifm_shape.depth, c.ifm_block.depth) for c in configs], dtype=np.int64
    )
    part_kernel = np.array([c.is_partkernel for c in configs], dtype=bool)
    limit_y, limit_x = arch.sub_kernel_limits[kind]
    sub_h = [min(kernel.height - i, limit_y) for i in range(0, kernel.height, limit_y)]
    sub_w = [min(kernel.width - i, limit_x) for i in range(0, kernel.width, limit_x)]
    wide = query.ifm_bits == 16
    decode = 32 * ublock.depth // 8
    dpu = np.zeros(len(blocks), dtype=np.int64)
    for elements in (y * x for y in sub_h for x in sub_w):
        if kind == NpuBlockType.Pooling:
            double = wide and arch.accelerator_config != Accelerator.Ethos_U55_32
            dpu += max(4, elements) * n_xy * n_z * (2 if double else 1)
        elif kind == NpuBlockType.ConvolutionDepthWise:
            steps = -(-elements // 4)
            dpu += np.maximum(decode, 4 * n_xy * (2 if wide else 1)) * steps * n_z
        else:
            steps = np.where(
                part_kernel & (kind == NpuBlockType.ConvolutionMxN),
                -(-elements // (2 if wide else 4)) * -(-ifm_depth // 8),
                elements,
            )
            dpu += np.maximum(decode, 4 * n_xy) * steps * n_z
    if kind in _CONVOLUTIONS:
        dpu *= -(-query.ifm_shape.depth // ifm_depth)
    # Vela's output cycles per element read the block only through its accumulator type.
    by_acc: dict = {}
    for config in configs:
        if config.acc_type not in by_acc:
            query.config = config
            by_acc[config.acc_type] = _estimate_output_cycles_per_element(
                arch, op_type, faf_type, query
            )
    per_element = np.array([by_acc[c.acc_type] for c in configs], dtype=np.float64)
    output = per_element * (height * width * depth)
    blocks_run = -(-ofm.height // height) * -(-ofm.width // width) * -(-ofm.depth // depth)
    return np.floor(np.maximum(dpu / arch.ncores, output) * blocks_run).astype(np.int64)


@dataclass(frozen=True)
class StripeCost:
    """Vela's cycle cost and element access of one stripe shape, and its feature-map
    transfers: (area, direction, bytes, bytes scaled by the area's transfer efficiency)."""

    op_cycles: float
    op_macs: int
    const_read: tuple[float, float]  # weight and scale-bias elements read
    feature_maps: tuple[tuple[str, BandwidthDirection, float, float], ...]


@memo_function(65536)
def stripe_cost(
    system: tuple,
    desc: NpuOpDescription,
    block: tuple[int, int, int],
    ifm_area: str,
    ofm_area: str,
    ifm2_area: str | None,
    const_area: str | None,
    ifm2_bits: int | None,
    ifm2_layout: str | None,
) -> StripeCost:
    """Cached per system and stripe facts: a schedule runs most ops in many equal stripes,
    and a sweep's schedules share most of them. None of Vela's per-stripe formulas reads the
    arena cache size, so the system's arch without the pool gives every pool's numbers."""
    arch = pool_free_arch(system)
    config = get_device(system[0]).vela_block_config(desc, block)
    query = performance_query(desc, config, ifm_area, ofm_area, ifm2_area, const_area,
                              ifm2_bits, ifm2_layout)  # fmt: skip
    cost = measure_cycle_cost(arch, desc.vela_op, desc.faf_op, query)
    access = measure_element_access(arch, query)
    moves = []

    def move(area, direction, nbytes, fmt, bits, block, shape):
        mem = MEM_AREAS[area]
        scaled = _estimate_memory_transfer_efficiency(
            arch, direction == BandwidthDirection.Read, mem, fmt, bits, block, shape, nbytes
        )
        moves.append((area, direction, nbytes, scaled))

    move(ofm_area, BandwidthDirection.Write, access.ofm_write * query.ofm_bits // 8,
         query.ofm_format, query.ofm_bits, config.ofm_block, query.ofm_shape)  # fmt: skip
    move(ifm_area, BandwidthDirection.Read, access.ifm_read[0] * query.ifm_bits // 8,
         query.ifm_format, query.ifm_bits, config.ifm_block, query.ifm_shape)  # fmt: skip
    if query.ifm2_shape is not None:
        move(ifm2_area or ifm_area, BandwidthDirection.Read,
             access.ifm_read[1] * query.ifm2_bits // 8, query.ifm2_format, query.ifm2_bits,
             config.ifm_block, query.ifm2_shape)  # fmt: skip
    const_read = (access.const_read[0], access.const_read[1])
    return StripeCost(float(cost.op_cycles), int(cost.op_macs), const_read, tuple(moves))


def compute_cycles(system: tuple, desc: NpuOpDescription, block: tuple[int, int, int]) -> float:
    """Vela's compute cycles of `desc` run with `block`, its operands in SRAM."""
    config = get_device(system[0]).vela_block_config(desc, block)
    query = performance_query(desc, config)
    return float(
        measure_cycle_cost(pool_free_arch(system), desc.vela_op, desc.faf_op, query).op_cycles
    )


@memo_function(4096)
def hint_cycles(accelerator: str, desc: NpuOpDescription, block: tuple, areas: tuple) -> int:
    """Vela's compute cycles of `desc` with `block` on the accelerator's default system, its
    IFM and OFM in `areas`: the cost hint the TIR of a stripe carries."""
    config = get_device(accelerator).vela_block_config(desc, block)
    query = performance_query(desc, config, *areas)
    return int(
        measure_cycle_cost(default_arch(accelerator), desc.vela_op, desc.faf_op, query).op_cycles
    )


def mem2mem_cycles(system: tuple, source: str, dest: str, nbytes: float) -> float:
    """Vela's cycles of a DMA of `nbytes` from area `source` to area `dest`."""
    return measure_mem2mem_cycles(
        pool_free_arch(system), MEM_AREAS[source], MEM_AREAS[dest], nbytes
    )


def copied_weights_cycles(
    compute: float, full_copy: float, first_copy: float, slack: float, tail: float, double: bool
) -> float:
    """NPU cycles of an op whose weights are DMA-copied before use, as Vela's
    `estimate_full_op_performance` charges them: the first copy hides under the previous op's
    `slack`; double-buffered, each later copy runs under the slice before, so the op takes
    the longer of its copies (but the last slices' `tail`) and its compute; single-buffered,
    every copy but the hidden part of the first adds to the compute."""
    if double:
        return max(full_copy - slack + tail, compute + max(first_copy - slack, 0.0))
    return compute + full_copy - min(first_copy, slack)


def read_cycles(system: tuple, area: str, nbytes: float) -> float:
    """Cycles of the NPU reading `nbytes` from `area` at its bandwidth, as Vela's model
    charges an op's access to an area (weights read in place: no burst scaling)."""
    return nbytes / float(pool_free_arch(system).memory_bandwidths_per_cycle[MEM_AREAS[area]])
