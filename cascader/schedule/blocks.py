"""Block configs for the scheduler: the fastest one under Vela's performance model for what a
stripe computes and where its operands live, or the Vela block behind the cascader's own
choice; and an op's compute cycles with a block. The cost formulas are
`cascader.ethosu.vela_cost`'s; this module turns ops and boxes into their descriptions."""

from __future__ import annotations

import math
from dataclasses import replace

from cascader.ethosu.device import valid_blocks
from cascader.ethosu.graph import npu_op_description
from cascader.ethosu.memory import SystemMemory
from cascader.ethosu.vela_cost import compute_cycles
from cascader.ethosu.vela_cost import fastest_block as vela_fastest_block
from cascader.ir.boxes import Box
from cascader.ir.errors import ScheduleError
from cascader.ir.layout import BRICK
from cascader.ir.npu_ops import Concatenation, NpuOp, feature_inputs


def fastest_block(
    memory: SystemMemory,
    op: NpuOp,
    ofm: Box,
    ifms: tuple[Box, ...],
    areas: tuple[str, str, str] = ("sram", "sram", "sram"),
) -> tuple[int, int, int]:
    """The (h, w, c) block config under which Vela's performance model runs `op` computing
    `ofm` fastest on `memory`'s system, its IFM, OFM and weights in `areas`: the largest of
    its compute cycles and each area's transfer cycles (feature-map bytes scaled by Vela's
    burst efficiency for the block, weights fetched once per block, over the area's
    bandwidth), over every block config valid for the op (ties: Vela's list order)."""
    desc = npu_op_description(op)
    if isinstance(op, Concatenation):  # costed as one copy of the whole OFM box
        ifms = (ofm,)
    hwc = [tuple(b.shape[1:]) for b in (ofm, *ifms)]
    ifm2 = hwc[2] if desc.ifm2_shape is not None and len(hwc) > 2 else None
    desc = replace(desc, ofm_shape=hwc[0], ifm_shape=hwc[1], ifm2_shape=ifm2)
    return vela_fastest_block(memory.system, desc, areas)


def whole_op_block(
    memory: SystemMemory, op: NpuOp, areas: tuple[str, str, str] = ("sram", "sram", "sram")
) -> tuple[int, int, int]:
    """`fastest_block` of the op run whole, in one stripe."""
    ifms = tuple(Box.whole(t.shape) for t in feature_inputs(op))
    return fastest_block(memory, op, Box.whole(op.ofm.shape), ifms, areas)


def cascader_block(op: NpuOp, shape: tuple[int, ...], accelerator: str) -> tuple[int, int, int]:
    """The (h, w, c) Vela block config behind a cascader block shape. An NHCWB16 block shape
    counts depth in bricks, so the deepest valid block with that many bricks is the one."""
    if len(shape) != 5:
        return tuple((1, 1, 1, *shape)[-3:])
    height, bricks, width = shape[1], shape[2], shape[3]
    valid = valid_blocks(accelerator, npu_op_description(op))
    depths = [
        d for h, w, d in valid if h == height and w == width and math.ceil(d / BRICK) == bricks
    ]
    if not depths:
        raise ScheduleError(f"{op.name}: no valid block config matches {shape}")
    return height, width, max(depths)


def op_cycles(memory: SystemMemory, op: NpuOp, block: tuple[int, int, int], depth: int) -> float:
    """Vela's compute cycles of the op cut to its first `depth` output channels, run with
    `block` (as Vela's scheduler estimates a depth slice: the IFM stays whole)."""
    desc = npu_op_description(op)
    desc = replace(desc, ofm_shape=(*desc.ofm_shape[:2], depth))
    return compute_cycles(memory.system, desc, block)
