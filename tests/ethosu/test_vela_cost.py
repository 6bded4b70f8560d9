"""The scheduler's block search against Vela's performance model: the floors it prunes with
never exceed Vela's cycles, and the pruned search picks what trying every block picks."""

from __future__ import annotations

import pytest
from ethosu.vela.npu_performance import measure_cycle_cost

from cascader.ethosu.defaults import system_defaults
from cascader.ethosu.device import get_device, valid_blocks
from cascader.ethosu.npu_op import NpuOpDescription
from cascader.ethosu.perf_query import performance_query
from cascader.ethosu.vela_arch import ACCELERATORS, DEFAULT_VELA_INI
from cascader.ethosu.vela_cost import _cycle_floors, block_score, fastest_block, pool_free_arch

OPS = {
    "conv2d": NpuOpDescription("conv2d", (28, 28, 24), (28, 28, 144), activation="CLIP"),
    "conv2d_part_kernel": NpuOpDescription(
        "conv2d", (49, 10, 1), (25, 5, 64), kernel=(10, 4), stride=(2, 2)
    ),
    "conv2d_one_row": NpuOpDescription("conv2d", (1, 32, 64), (1, 32, 96), kernel=(1, 3)),
    "conv2d_dilated": NpuOpDescription(
        "conv2d", (20, 20, 16), (16, 16, 32), kernel=(3, 3), dilation=(2, 2)
    ),
    "depthwise": NpuOpDescription("depthwise", (30, 30, 96), (28, 28, 96), kernel=(3, 3)),
    "int16_depthwise": NpuOpDescription(
        "depthwise", (9, 9, 32), (7, 7, 32), kernel=(3, 3), ifm_dtype="int16", ofm_dtype="int16"
    ),
    "max_pool": NpuOpDescription(
        "pooling", (8, 8, 64), (4, 4, 64), kernel=(2, 2), stride=(2, 2), sub_op="MAX"
    ),
    "avg_pool": NpuOpDescription(
        "pooling", (7, 7, 1280), (1, 1, 1280), kernel=(7, 7), sub_op="AVERAGE"
    ),
    "one_by_one": NpuOpDescription("conv2d", (1, 1, 1024), (1, 1, 1000)),
    "reduce_sum": NpuOpDescription(
        "pooling", (7, 7, 64), (7, 7, 1), sub_op="REDUCE_SUM", ifm_dtype="int8", ofm_dtype="int32"
    ),
    "add": NpuOpDescription(
        "elementwise", (28, 28, 24), (28, 28, 24), ifm2_shape=(28, 28, 24), sub_op="ADD"
    ),
}
SYSTEMS = {
    "ethos-u55-256": ("ethos-u55-256", "Ethos_U55_High_End_Embedded", "Shared_Sram"),
    "ethos-u65-256": ("ethos-u65-256", "Ethos_U65_High_End", "Dedicated_Sram"),
}
AREAS = [("sram", "sram", "sram"), ("dram", "sram", "dram"), ("sram", "dram", "sram")]


def _configs(accelerator: str, op: NpuOpDescription) -> tuple[list, list]:
    device = get_device(accelerator)
    blocks = list(valid_blocks(accelerator, op))
    return blocks, [device.vela_block_config(op, b) for b in blocks]


@pytest.mark.parametrize("accelerator", ACCELERATORS)
@pytest.mark.parametrize("name", sorted(OPS))
def test_cycle_floors_never_exceed_vela_cycles(accelerator, name):
    """The search stops at a floor above the best score, so a floor above a block's real
    cycles could hide the fastest block."""
    op = OPS[name]
    system = (accelerator, *system_defaults(accelerator, None, None), DEFAULT_VELA_INI)
    arch = pool_free_arch(system)
    query = performance_query(op, None)
    blocks, configs = _configs(accelerator, op)
    floors = _cycle_floors(arch, op.vela_op, op.faf_op, query, blocks, configs)
    for floor, config in zip(floors.tolist(), configs, strict=True):
        query.config = config
        assert floor <= measure_cycle_cost(arch, op.vela_op, op.faf_op, query).op_cycles


def _every_block_search(system: tuple, op: NpuOpDescription, areas: tuple) -> tuple:
    """The block scoring every valid block picks: the lowest score, ties to Vela's order."""
    arch = pool_free_arch(system)
    query = performance_query(op, None, areas[0], areas[1])
    blocks, configs = _configs(system[0], op)
    ranked = []
    for index, config in enumerate(configs):
        query.config = config
        cycles = measure_cycle_cost(arch, op.vela_op, op.faf_op, query).op_cycles
        ranked.append((block_score(arch, query, cycles, areas), index))
    return blocks[min(ranked)[1]]


@pytest.mark.parametrize("config", sorted(SYSTEMS))
@pytest.mark.parametrize("areas", AREAS)
@pytest.mark.parametrize("name", sorted(OPS))
def test_pruned_search_picks_what_scoring_every_block_picks(config, areas, name):
    system = (*SYSTEMS[config], DEFAULT_VELA_INI)
    op = OPS[name]
    assert fastest_block.__wrapped__(system, op, areas) == _every_block_search(system, op, areas)
