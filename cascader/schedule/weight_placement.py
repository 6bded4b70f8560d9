"""Where a convolution's copied weights go: copied whole, double-buffered in output-depth
slices, or read in place, whichever Vela's cycle model of that one op makes fastest.

The cascader's cost copies constants as its options say and does not weigh these choices,
whereas Vela's scheduler does; a schedule that copies what Vela reads in place, or copies whole
what Vela double-buffers, loses to Vela's own. `Builder.placed` applies this model to every
one-op plan that copies a convolution's weights and remembers the result per network."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, replace

from cascader.core.part import op_before
from cascader.ethosu.memory import SystemMemory
from cascader.ethosu.vela_cost import copied_weights_cycles, mem2mem_cycles, read_cycles
from cascader.ethosu.weights import scale_bias_bytes
from cascader.ir.boxes import Box
from cascader.ir.npu_ops import feature_inputs
from cascader.ir.units import ALIGN, align
from cascader.schedule.blocks import fastest_block, op_cycles, whole_op_block
from cascader.schedule.network import Network
from cascader.schedule.plans import Placement, Plan
from cascader.schedule.replay import EncodedSize
from cascader.schedule.weight_buffering import buffer_bytes, even_slices, weight_depth_slices

__all__ = ["OpAreas", "PlacedPlan", "WeightPlacement"]

SizeArgs = tuple[int, int, int, int]  # (part, lo, hi, block depth), as `EncodedSize` takes them
_FLASH = ("offchip_flash", "onchip_flash")


@dataclass(frozen=True)
class OpAreas:
    """The areas the op of a plan reads its input feature map from and writes its output to."""

    ifm: str
    ofm: str


@dataclass(frozen=True)
class PlacedPlan:
    """A plan as `WeightPlacement.placed` rewrote it, with every encoded weight size the
    rewrite read and the answer it got: the same plan in another schedule (whose encoded sizes
    may differ, e.g. another weight encoding) gets the same rewrite only if those sizes agree."""

    plan: Plan
    sizes_read: dict[SizeArgs, int]

    def holds_for(self, encoded_size: EncodedSize) -> bool:
        return all(encoded_size(*args) == n for args, n in self.sizes_read.items())


class WeightPlacement:
    """Vela's cycle model of the op of one plan that copies a convolution's weights (one op,
    the fastest blocks), with the areas its feature maps are in. Every encoded size it reads
    is kept in `sizes_read`, so a caller can tell when a remembered rewrite still holds."""

    def __init__(
        self, net: Network, memory: SystemMemory, areas: OpAreas, encoded_size: EncodedSize
    ) -> None:
        self.net = net
        self.memory = memory
        self.areas = areas
        self.constants = memory.constants_area
        self.cascade = memory.cascade_area
        self.sizes_read: dict[SizeArgs, int] = {}
        self._sizes = encoded_size

    def placed(self, plan: Plan) -> PlacedPlan:
        """`weights_in_place(double_buffered(plan))`, with the sizes it read."""
        return PlacedPlan(self.weights_in_place(self.double_buffered(plan)), dict(self.sizes_read))

    def _encoded_size(self, pid: int, lo: int, hi: int, block_depth: int) -> int:
        self.sizes_read[pid, lo, hi, block_depth] = size = self._sizes(pid, lo, hi, block_depth)
        return size

    def double_buffered(self, plan: Plan) -> Plan:
        """A plan of one convolution computed in one stripe that copies its weights whole,
        with its weights double-buffered in output-depth slices where Vela's scheduler would
        (`weight_depth_slices`): all but the first slice's copy then run under the op's own
        compute instead of before it. Only when the whole copy cannot hide under the op
        before (taken, as the cascader's cost takes it, to be the producer of the input); the
        two slice buffers fit in the bytes the whole copy took, else (only then: a larger
        limit makes coarser slices) in those and the alignment of the second buffer's
        weights and scale-bias, which a split at whole blocks adds to the encoded bytes."""
        pid = plan.output_part
        op = self.net.ops[pid]
        if op.kind == "fully_connected" or tuple(plan.output_stripe) != tuple(op.ofm.shape):
            return plan
        areas = (self.areas.ifm, self.areas.ofm, self.cascade)
        block = whole_op_block(self.memory, op, areas)
        sizes = buffer_bytes(self.memory, self._encoded_size, pid, block[2])
        whole = sizes(0, op.ofm.shape[3])
        slack = self._producer_cycles(pid)
        transfer = mem2mem_cycles(self.memory.system, self.constants, self.cascade, whole)
        if transfer <= slack:
            return plan
        for limit in (whole, whole + 2 * ALIGN):
            bounds = weight_depth_slices(op, self.memory, sizes, block, slack, limit)
            slices = even_slices(op, bounds, sizes, limit)
            if slices:
                return replace(plan, depth_slices=slices)
        return plan

    def weights_in_place(self, plan: Plan) -> Plan:
        """A plan of one convolution that copies its weights and is striped at most in
        depth, with the weights read in place instead (in the plan's depth stripes, or its
        double-buffered slices) where Vela's model makes that faster: the op then takes the
        longer of its compute and the read (`_in_place_cycles`), against its compute plus
        the copy's exposed part (`_copied_cycles`), and needs no buffer. Forced copies
        (`always_copy_size`) of flash-bound layers' weights made MobileNetV1's last layers
        (its 1x1 convolutions at 7x7, its fully connected layer) 0.1-0.25 M cycles slower
        each than reading them in place. Only for constants in flash, where it was measured:
        with them in DRAM (Dedicated_Sram) the estimate overrates the copy (ad_autoencoder,
        U65: a fully connected layer costed 3,363 cycles copied took 1,300 under Vela's
        model, and 2,611 once read in place)."""
        pid = plan.output_part
        op = self.net.ops[pid]
        if tuple(plan.output_stripe[:3]) != tuple(op.ofm.shape[:3]) or self.constants not in _FLASH:
            return plan
        placements = dict(plan.placements)
        for (part, slot), place in plan.placements.items():
            if part == pid and place.copy and self.net.graph.parts[pid].inputs[slot].is_constant:
                placements[part, slot] = Placement("tensor", self.constants)
        bounds = plan.depth_slices
        stripe = bounds[1] - bounds[0] if bounds else plan.output_stripe[3]
        in_place = replace(plan, placements=placements, depth_slices=(),
                           output_stripe=(*op.ofm.shape[:3], stripe))  # fmt: skip
        copied = self._copied_cycles(plan, pid)
        if copied > self._in_place_cycles(in_place, pid):
            return in_place
        return self._scale_bias_in_place(plan, pid, copied)

    def _scale_bias_in_place(self, plan: Plan, pid: int, copied: float) -> Plan:
        """The plan with only the weights copied, its scale-bias read in place, when Vela's
        model costs that lower than `copied` (the plan's cycles): an op bound by its weight
        copy waits a cycle for every byte more it copies, while the NPU reads the
        scale-bias beside its compute (MobileNetV1's 14x14x512 pointwise layers: 5,120
        cycles each)."""
        place = plan.placements.get((pid, 2))
        if place is None or not place.copy or not self.net.graph.parts[pid].inputs[2].is_constant:
            return plan
        placements = {**plan.placements, (pid, 2): Placement("tensor", self.constants)}
        lean = replace(plan, placements=placements)
        return lean if self._copied_cycles(lean, pid) < copied else plan

    def _constant_stream(
        self, pid: int, slots: set[int], block_depth: int, lo: int, hi: int
    ) -> int:
        """Encoded bytes of the part's weights (slot 1) and scale-bias (slot 2) among `slots`
        for output channels [lo, hi), each stream aligned as its buffer is."""
        nbytes = 0
        if 1 in slots:
            nbytes += align(self._encoded_size(pid, lo, hi, block_depth))
        if 2 in slots:
            nbytes += align(scale_bias_bytes(self.memory.accelerator, lo, hi, block_depth))
        return nbytes

    def _constant_slots(self, plan: Plan, pid: int, copied: bool) -> set[int]:
        """The part's constant input slots the plan copies (`copied`) or reads in place."""
        return {
            slot
            for slot in (1, 2)
            if (pid, slot) in plan.placements
            and self.net.graph.parts[pid].inputs[slot].is_constant
            and plan.placements[pid, slot].copy == copied
        }

    def _copied_cycles(self, plan: Plan, pid: int) -> float:
        """Vela's cycles of the plan's op with its weights copied (`perf._weight_copy_cycles`):
        the first copy hides under the op before; double-buffered, the longer of the copies
        (but the last slice's compute) and the compute; single-buffered, compute plus copies;
        at least the read of the constants it reads in place."""
        op = self.net.ops[pid]
        areas = (self.areas.ifm, self.areas.ofm, self.cascade)
        block = whole_op_block(self.memory, op, areas)
        depth = op.ofm.shape[3]
        step = min(plan.output_stripe[3], depth)
        bounds = plan.depth_slices or (*range(0, depth, step), depth)
        copied = self._constant_slots(plan, pid, copied=True)
        streams = [self._constant_stream(pid, copied, block[2], lo, hi)
                   for lo, hi in itertools.pairwise(bounds)]  # fmt: skip
        system, constants, cascade = self.memory.system, self.constants, self.cascade
        full = mem2mem_cycles(system, constants, cascade, sum(streams))
        first = mem2mem_cycles(system, constants, cascade, streams[0])
        slack = self._producer_cycles(pid)
        compute = op_cycles(self.memory, op, block, depth)
        double = bool(plan.depth_slices)
        tail = compute - op_cycles(self.memory, op, block, bounds[-2]) if double else 0.0
        npu = copied_weights_cycles(compute, full, first, slack, tail, double)
        kept = self._constant_slots(plan, pid, copied=False)
        read = sum(self._constant_stream(pid, kept, block[2], lo, hi)
                   for lo, hi in itertools.pairwise(bounds))  # fmt: skip
        return max(npu, read_cycles(system, constants, read))

    def _in_place_cycles(self, plan: Plan, pid: int) -> float:
        """Vela's cycles of the op of a plan striped at most in depth reading its weights and
        scale-bias in place, stripe by stripe: the longer of its compute and the read. Vela's
        model fetches a convolution's weights once per OFM block of a stripe, whole blocks
        deep, so the block it gets (the fastest for its largest stripe, as `Builder._choose_blocks`
        picks) must cover the whole height and width (else infinity: refetched weights cost
        more than any copy saves), and each stripe reads as many channels as its blocks are
        deep."""
        op = self.net.ops[pid]
        n, height, width, depth = op.ofm.shape
        stripe = min(plan.output_stripe[3], depth)
        largest = Box((0, 0, 0, 0), (n, height, width, stripe))
        ifms, _ = self.net.input_boxes(pid, largest)
        if stripe == depth:
            ifms = tuple(Box.whole(t.shape) for t in feature_inputs(op))
        areas = (self.areas.ifm, self.areas.ofm, self.constants)
        block = fastest_block(self.memory, op, largest, ifms, areas)
        if block[0] < height or block[1] < width:
            return math.inf
        slots, deep = self._constant_slots(plan, pid, copied=False), block[2]
        read = 0.0
        for lo in range(0, depth, stripe):
            hi = min(lo + stripe, depth)
            fetched = -(-(hi - lo) // deep) * deep / (hi - lo)
            read += self._constant_stream(pid, slots, deep, lo, hi) * fetched
        read = read_cycles(self.memory.system, self.constants, read)
        return max(op_cycles(self.memory, op, block, depth), read)

    def _producer_cycles(self, pid: int) -> float:
        """Compute cycles of the op that produces the part's first input (whole, with its
        fastest block), 0 for a graph input."""
        producer = op_before(self.net.graph.parts[pid])
        if producer is None:
            return 0.0
        op = self.net.ops[producer.id]
        block = whole_op_block(self.memory, op)
        return op_cycles(self.memory, op, block, op.ofm.shape[3])
