"""The one bridge to Vela's per-operation cost functions (`ethosu.vela.npu_performance`,
private helpers included): the cycles and element accesses of one NPU operation or stripe
under a block config, its feature-map transfers scaled by Vela's burst efficiency, DMA cycles,
and the block config Vela's model runs an operation fastest with. The evaluator (`perf`), the
scheduler's block choice and the TIR lowering's cycle hints all ask here.

System tuples are (accelerator, system config, memory mode, vela.ini path): none of these
formulas reads the arena cache size, so one pool-free architecture serves every pool."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from ethosu.vela.architecture_features import ArchitectureFeatures
from ethosu.vela.npu_performance import (
    _estimate_memory_transfer_efficiency,
    measure_cycle_cost,
    measure_element_access,
    measure_mem2mem_cycles,
)
from ethosu.vela.tensor import BandwidthDirection

from cascader.ethosu.device import get_device, valid_blocks
from cascader.ethosu.npu_op import NpuOpDescription
from cascader.ethosu.perf_query import MEM_AREAS, performance_query
from cascader.ethosu.vela_arch import default_arch, system_arch
from cascader.ir.errors import ScheduleError

__all__ = [
    "StripeCost",
    "compute_cycles",
    "fastest_block",
    "hint_cycles",
    "mem2mem_cycles",
    "pool_free_arch",
    "stripe_cost",
]


@lru_cache(maxsize=64)
def pool_free_arch(system: tuple) -> ArchitectureFeatures:
    """The system's Vela architecture (bandwidths do not depend on the pool size)."""
    return system_arch(*system[:3], None, system[3])


@lru_cache(maxsize=8192)
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
    ifm_area, ofm_area, weights_area = (MEM_AREAS[a] for a in areas)
    ofm_bits = NpuOpDescription.dtype_bits(desc.ofm_dtype)
    best: tuple[float, int, tuple[int, int, int]] | None = None
    blocks = valid_blocks(accelerator, desc)
    # One query for all blocks: only its block config differs between them.
    query = performance_query(desc, None, areas[0], areas[1])
    # The largest blocks first: they are mostly the fastest, and a block whose compute alone
    # does not beat the best score so far is not costed further.
    for index in sorted(range(len(blocks)), key=lambda i: -_volume(blocks[i])):
        hwd = blocks[index]
        try:
            config = device.vela_block_config(desc, hwd)
        except ValueError:
            continue
        query.config = config
        cycles = measure_cycle_cost(arch, desc.vela_op, desc.faf_op, query).op_cycles
        if best is not None and (cycles, index) >= best[:2]:
            continue
        access = measure_element_access(arch, query)
        moved = {ifm_area: 0.0, ofm_area: 0.0, weights_area: 0.0}
        moved[weights_area] += access.const_read[0]
        moved[ifm_area] += _estimate_memory_transfer_efficiency(
            arch, True, ifm_area, query.ifm_format, query.ifm_bits, config.ifm_block,
            query.ifm_shape, (access.ifm_read[0] + access.ifm_read[1]) * query.ifm_bits / 8,
        )  # fmt: skip
        moved[ofm_area] += _estimate_memory_transfer_efficiency(
            arch, False, ofm_area, query.ofm_format, ofm_bits, config.ofm_block,
            query.ofm_shape, access.ofm_write * ofm_bits / 8,
        )  # fmt: skip
        score = max(
            float(cycles),
            *(n / float(arch.memory_bandwidths_per_cycle[a]) for a, n in moved.items()),
        )
        if best is None or (score, index) < best[:2]:
            best = (score, index, hwd)
    if best is None:
        raise ScheduleError(f"no valid block config for {desc}")
    return best[2]


def _volume(block: tuple[int, int, int]) -> int:
    return block[0] * block[1] * block[2]


@dataclass(frozen=True)
class StripeCost:
    """Vela's cycle cost and element access of one stripe shape, and its feature-map
    transfers: (area, direction, bytes, bytes scaled by the area's transfer efficiency)."""

    op_cycles: float
    op_macs: int
    const_read: tuple[float, float]  # weight and scale-bias elements read
    feature_maps: tuple[tuple[str, BandwidthDirection, float, float], ...]


@lru_cache(maxsize=65536)
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


@lru_cache(maxsize=4096)
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
