"""Weight buffering as Vela's scheduler does it (`Scheduler.propose_weight_buffering`):
whether an op reads its weights in place or has them DMA-copied into fast storage first, and
the output-depth slices a copied op's weights are double-buffered in."""

from __future__ import annotations

import itertools
from collections.abc import Callable

from ethosu.vela.architecture_features import ArchitectureFeatures

from cascader.ethosu.memory import SystemMemory
from cascader.ethosu.vela_cost import mem2mem_cycles
from cascader.ethosu.weights import scale_bias_bytes
from cascader.ir.layout import BRICK
from cascader.ir.npu_ops import Conv2D, Layout, NpuOp
from cascader.ir.units import SCALE_BIAS_BYTES, align
from cascader.schedule.blocks import op_cycles
from cascader.schedule.replay import EncodedSize


def reads_weights_in_place(
    op: NpuOp, memory: SystemMemory, encoded_size: EncodedSize, part: int, free_bytes: int
) -> bool:
    """Whether Vela's scheduler leaves a convolution's weights where they are instead of
    DMA-copying them into the fast storage first (`Scheduler.propose_weight_buffering`):
    always for a fully connected layer (its weights are read once); when the constants
    already live in the fast storage (Sram_Only); and when their encoding does not fit the
    SRAM the op's feature maps leave free (`free_bytes`; encoded for 16-deep blocks, the
    OFM split depth, since the block config is chosen later)."""
    if not isinstance(op, Conv2D):
        return False
    if op.kind == "fully_connected" or memory.constants_area == memory.cascade_area:
        return True
    depth = op.ofm.shape[3]
    weights = encoded_size(part, 0, depth, ArchitectureFeatures.OFMSplitDepth)
    return align(weights) + align(SCALE_BIAS_BYTES * depth) > free_bytes


def weight_depth_slices(
    op: Conv2D,
    memory: SystemMemory,
    buffer_bytes: Callable[[int, int], int],
    block: tuple[int, int, int],
    slack_cycles: float,
    limit: int,
) -> tuple[int, ...]:
    """The OFM depth slice bounds Vela's scheduler double-buffers a copied op's weights in
    (`Scheduler.propose_weight_buffering`), or () when it copies them whole. The first slice
    is what the copy can prebuffer under the previous op's `slack_cycles` (at most half of
    the `limit` bytes the feature maps leave free); later slices are as deep as the op
    computes while one slice's copy runs, in whole blocks, halved until two slices' buffers
    fit. `buffer_bytes(lo, hi)`: the encoded weights and scale-bias of channels [lo, hi)."""
    split = ArchitectureFeatures.OFMSplitDepth
    depth = op.ofm.shape[3]
    full = buffer_bytes(0, depth)
    transfer = mem2mem_cycles(memory.system, memory.constants_area, memory.cascade_area, full)
    half = limit // 2
    ratio = slack_cycles / transfer if transfer > slack_cycles else 1.0
    prebuffer = min(ratio * full, half)
    if prebuffer >= full:
        return ()
    block_depth = block[2]
    first = int(max(16, depth * (prebuffer / full) // split * split))
    buffering = depth * op_cycles(memory, op, block, first) / transfer
    buffering = -(-buffering // block_depth) * block_depth
    if buffering / depth * full > half:
        buffering = half / full * depth
    while True:
        if buffering > block_depth:
            buffering = buffering // block_depth * block_depth
        else:
            buffering = buffering // split * split
        buffering = int(max(buffering, split))
        bounds = (0, *range(first, depth, buffering), depth) if first < depth else (0, depth)
        sizes = [buffer_bytes(lo, hi) for lo, hi in itertools.pairwise(bounds)]
        double = max(sizes[::2]) + max(sizes[1::2], default=0)
        if double <= limit or first == split:
            break
        if buffering > first:
            buffering = -(-(buffering // 2) // split) * split
        else:
            first = -(-(first // 2) // split) * split
    if len(bounds) < 3 or double > limit:
        return ()
    return bounds


def even_slices(
    op: Conv2D, bounds: tuple[int, ...], buffer_bytes: Callable[[int, int], int], limit: int
) -> tuple[int, ...]:
    """Vela's depth slices made even (a schedule's stripes split each axis by one factor):
    as deep as its deepest slice if two such buffers fit in `limit` bytes, else as its
    shallowest; in whole bricks for an NHCWB16 OFM."""
    if not bounds:
        return ()
    depth = op.ofm.shape[3]
    steps = [hi - lo for lo, hi in itertools.pairwise(bounds)]
    for step in (max(steps), min(steps)):
        if op.ofm.layout == Layout.NHCWB16:
            step = -(-step // BRICK) * BRICK
        even = (*range(0, depth, step), depth)
        sizes = [buffer_bytes(lo, hi) for lo, hi in itertools.pairwise(even)]
        if len(even) > 2 and max(sizes[::2]) + max(sizes[1::2]) <= limit:
            return even
    return ()


def buffer_bytes(
    memory: SystemMemory, encoded_size: EncodedSize, part: int, block_depth: int
) -> Callable[[int, int], int]:
    def size(lo: int, hi: int) -> int:
        scale_bias = scale_bias_bytes(memory.accelerator, lo, hi, block_depth)
        return align(encoded_size(part, lo, hi, block_depth)) + align(scale_bias)

    return size
