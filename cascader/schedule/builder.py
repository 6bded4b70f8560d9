"""The scheduler's builder: a proposal's plans (or the layer-by-layer plans) run one after
another into steps and buffers.

Lowering follows TVM v0.18's: each plan tiles its output part's output along the stored axes
in axis order (the outer loops of `tile_nd`), and every other part of the plan is computed at
that stripe loop, producing exactly the box its consumer reads (bounds inference: recompute).
Copies of a part's inputs into the cascade region happen at the same loop, before the part
runs, and are skipped while the buffer still holds the same box (a loop-invariant copy, e.g.
the weights of an op striped over its height, moves once); likewise a box a buffer still holds
is not computed again (upscaling ops, which the NPU cannot start mid-pixel, run over whole
columns, and but for transposed convolutions over whole rows, in any slice of their output
channels). Beyond the original, a ROLLING interior tensor striped only along its height is
computed row by row into a circular buffer of as many rows as its consumer reads per stripe
(the NPU reads the wrap through its feature-map tiles), which is what the cascader's cost for
ROLLING assumes."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field, replace

from cascader.core.graph import CascaderGraph
from cascader.ethosu.memory import SystemMemory
from cascader.ethosu.part import EthosuPart
from cascader.ethosu.weights import scale_bias_bytes
from cascader.ir.boxes import Box
from cascader.ir.errors import ScheduleError
from cascader.ir.layout import BRICK, feature_map_bytes
from cascader.ir.npu_ops import (
    Conv2D,
    Layout,
    feature_inputs,
    feature_maps,
    resamples,
    scalar_input,
    stripes_rows,
)
from cascader.ir.schedule import REGION_ARENA, REGION_FAST, Buffer, Copy, Step, Stripe
from cascader.ir.units import align
from cascader.schedule.blocks import cascader_block, fastest_block
from cascader.schedule.network import Network
from cascader.schedule.plans import Plan, output_boxes
from cascader.schedule.replay import EncodedSize, PlanTrace, WholeTensor, with_buffers
from cascader.schedule.weight_placement import OpAreas, WeightPlacement

BLOCK_POLICIES = ("fastest", "cascader")


@dataclass
class _PlanRun:
    """What running one plan keeps track of, stripe after stripe."""

    window: dict[int, int] = field(default_factory=dict)  # part -> its interior output buffer
    rolled: dict[int, int] = field(default_factory=dict)  # part -> rows computed (rolling)
    copies: dict[tuple[int, int], int] = field(default_factory=dict)  # (part, slot) -> buffer
    alternates: dict[tuple[int, int], int] = field(default_factory=dict)  # second weight buffer
    held: dict[int, Box] = field(default_factory=dict)  # copy buffer -> box it holds
    origins: dict[int, tuple[int, ...]] = field(default_factory=dict)  # window -> its origin
    computed: dict[int, set[Box]] = field(default_factory=dict)  # part -> boxes it still holds


def graph_io(graph: CascaderGraph) -> set[int]:
    """The graph's input feature maps and outputs: the host's, never the cascade's."""
    inputs = {t.id for t in graph.input_tensors if not t.is_constant}
    return inputs | {t.id for t in graph.output_tensors}


def tensor_shape(net: Network, tid: int) -> tuple[tuple[int, ...], Layout, int]:
    """NHWC shape, layout and element bytes of a graph tensor."""
    t = net.feature_map(tid)
    return t.shape, t.layout, net.graph.tensors[tid].dtype_bytes


class Builder:
    """Builds a schedule plan by plan: its steps, its buffers (with their live ranges) and
    each part's block config; `finish` pins the I/O, allocates and checks the pool."""

    def __init__(
        self, net: Network, memory: SystemMemory, encoded_size: EncodedSize, blocks: str
    ) -> None:
        if blocks not in BLOCK_POLICIES:
            raise ValueError(f"unknown block policy {blocks!r}; valid: {', '.join(BLOCK_POLICIES)}")
        self.blocks = blocks
        self.net = net
        self.memory = memory
        self.encoded_size = encoded_size
        # While a plan is recorded (`_recorded`): its buffer slots, the slot of each whole
        # tensor it uses, and the encoded weight sizes it asks for.
        self._events: list[int | WholeTensor] | None = None
        self._whole_slots: dict[int, int] = {}
        self._sizes: dict[tuple[int, int, int, int], int] = {}
        self.steps: list[Step] = []
        self.buffers: list[Buffer] = []
        self.tensor_buffer: dict[int, int] = {}
        self.io = memory.io_area
        self.cascade = memory.cascade_area
        self.constants = memory.constants_area
        graph = net.graph
        self.produced_by = {p.output.id: p.id for p in graph.parts}
        self.graph_io = graph_io(graph)
        self.alias = net.aliases
        self._blocks: dict[int, tuple[int, int, int]] = {}
        self.homes: dict[int, str] = {}  # tensor -> the area its whole-tensor buffer is in

    def region_of(self, area: str) -> int:
        return REGION_ARENA if area == self.io else REGION_FAST

    def root(self, tid: int) -> int:
        return self.net.buffer_root(tid)

    def tensor_shape(self, tid: int) -> tuple[tuple[int, ...], Layout, int]:
        return tensor_shape(self.net, tid)

    def new_buffer(self, tid: int, kind: str, area: str, frame: tuple[int, ...], rows: int = 0,
                   size: int | None = None) -> int:  # fmt: skip
        _, layout, nbytes = self.tensor_shape(tid) if tid >= 0 else (frame, Layout.NHWC, 1)
        if size is None:
            size = feature_map_bytes(frame, layout, nbytes)
        index = len(self.buffers)
        step = len(self.steps)
        self.buffers.append(
            Buffer(
                index,
                tid,
                kind,
                area,
                self.region_of(area),
                frame,
                layout,
                nbytes,
                size=align(size),
                first=step,
                last=step,
                rows=rows,
            )
        )
        if self._events is not None and kind != "tensor":
            self._events.append(index)
        return index

    def touch(self, index: int) -> None:
        """The buffer is used by the step about to be appended."""
        self.buffers[index].last = len(self.steps)

    def whole_tensor(self, tid: int, area: str) -> int:
        """The buffer holding all of tensor `tid` (made on first use)."""
        tid = self.root(tid)
        if self._events is not None and tid not in self._whole_slots:
            self._whole_slots[tid] = len(self._events)
            self._events.append(WholeTensor(tid, area, len(self.steps)))
        found = self.tensor_buffer.get(tid)
        if found is None:
            shape, _, _ = self.tensor_shape(tid)
            found = self.new_buffer(tid, "tensor", self.homes.get(tid, area or self.io), shape)
            self.tensor_buffer[tid] = found
        self.touch(found)
        return found

    def run_plan(self, plan: Plan, plan_index: int, recorded: bool = False) -> None:
        """Append the plan's steps and buffers. With `recorded` (plans of the cascader), a
        plan equal to one that ran before on this network and system, with the same homes
        for its tensors and the same weight sizes, is replayed from its record: a sweep's
        proposals share most of their plans, within one cascader run and across runs."""
        if not recorded:
            self._run_plan(plan, plan_index)
            return
        parts = self.net.graph.parts
        roots = tuple(
            self.root(t.id) for pid in plan.parts for t in (*parts[pid].inputs, parts[pid].output)
        )
        key = (plan.key(), self.memory.system, tuple(self.memory.roles.items()),
               self.blocks, roots, tuple(self.homes.get(r) for r in roots))  # fmt: skip
        records = self.net.plan_records
        trace = records.lookup(key)
        if trace is not None and trace.sizes_agree(self.encoded_size):
            self._replay(trace, plan_index)
            return
        trace = self._recorded(plan, plan_index)
        if trace is not None:
            records.keep(key, trace)

    def _recorded(self, plan: Plan, plan_index: int) -> PlanTrace | None:
        """Run the plan and return its record relative to where it started (None when a step
        reads a buffer the plan neither made nor took as a whole tensor)."""
        base = len(self.steps)
        self._events, self._whole_slots, self._sizes = [], {}, {}
        try:
            self._run_plan(plan, plan_index)
            events, sizes = self._events, self._sizes
        finally:
            self._events = None
        slots: list[Buffer | WholeTensor] = []
        slot_of = {-1: -1}
        whole_last = []
        for slot, event in enumerate(events):
            if isinstance(event, WholeTensor):
                index = self.tensor_buffer[event.tensor]
                whole_last.append((slot, self.buffers[index].last - base))
                slots.append(replace(event, first=event.first - base))
            else:
                index = event
                buf = self.buffers[index]
                slots.append(replace(buf, first=buf.first - base, last=buf.last - base))
            slot_of[index] = slot
        try:
            steps = tuple(with_buffers(step, slot_of, -1) for step in self.steps[base:])
        except KeyError:
            return None
        blocks = {pid: self._blocks[pid] for pid in plan.parts if pid in self._blocks}
        return PlanTrace(tuple(slots), tuple(whole_last), steps, blocks, sizes)

    def _replay(self, trace: PlanTrace, plan_index: int) -> None:
        """Append a recorded plan's buffers and steps as if it had run here."""
        base = len(self.steps)
        index_of = {-1: -1}
        for slot, made in enumerate(trace.slots):
            if isinstance(made, WholeTensor):
                index = self.tensor_buffer.get(made.tensor)
                if index is None:  # first used here: made at its first step
                    index = self.whole_tensor(made.tensor, made.area)
                    self.buffers[index].first = base + made.first
            else:
                index = len(self.buffers)
                self.buffers.append(
                    replace(made, index=index, first=base + made.first, last=base + made.last)
                )
            index_of[slot] = index
        for slot, last in trace.whole_last:
            self.buffers[index_of[slot]].last = base + last
        self.steps.extend(with_buffers(step, index_of, plan_index) for step in trace.steps)
        self._blocks.update(trace.blocks)

    def _run_plan(self, plan: Plan, plan_index: int) -> None:
        boxes, required_by_stripe = self._leanest_grid(plan, self._output_stripes(plan))
        if plan.upward:  # a plan whose output is laid above its input runs its last rows first
            boxes, required_by_stripe = boxes[::-1], required_by_stripe[::-1]
        # Blocks are chosen for the largest box a part is asked for; untrimmed, a rolling
        # part's consumers ask it for their whole window, which picks blocks that suit the
        # rows it computes per stripe better than its (largest) first stripe does.
        self._choose_blocks(plan, [self._requirements(plan, box) for box in boxes])
        run = _PlanRun()
        self._size_plan_buffers(plan, required_by_stripe, run.window, run.copies, run.alternates)
        upcoming = [*boxes[1:], None]
        for index, required in enumerate(required_by_stripe):
            for pid in plan.parts:
                if self.net.graph.parts[pid].in_line:
                    continue
                ofm = self._new_output(plan, run, pid, required.get(pid))
                if ofm is not None:
                    self._run_stripe(plan, plan_index, run, pid, ofm, index, upcoming[index])
        live = [*run.window.values(), *run.copies.values(), *run.alternates.values()]
        for buf in live:  # live to the plan's last step
            self.buffers[buf].last = max(self.buffers[buf].last, len(self.steps) - 1)

    def _output_stripes(self, plan: Plan) -> list[Box]:
        """The plan's output stripes: its depth slices, or the output tiled by its stripe
        (in whole bricks when any of its tensors is NHCWB16, which is only addressable so)."""
        net = self.net
        out_op = net.ops[plan.output_part]
        stripe = plan.output_stripe
        bricked = any(
            t.layout == Layout.NHCWB16 for pid in plan.parts for t in feature_maps(net.ops[pid])
        )
        if bricked and stripe[3] % BRICK:
            stripe = (*stripe[:3], -(-stripe[3] // BRICK) * BRICK)
        if plan.depth_slices:
            n, h, w, _ = out_op.ofm.shape
            slices = itertools.pairwise(plan.depth_slices)
            return [Box((0, 0, 0, lo), (n, h, w, hi - lo)) for lo, hi in slices]
        return output_boxes(out_op.ofm.shape, stripe, out_op.ofm.layout)

    def _new_output(self, plan: Plan, run: _PlanRun, pid: int, ofm: Box | None) -> Box | None:
        """The box of its output part `pid` computes for this stripe, or None when its
        consumers need nothing new of it: a rolling part computes only rows it has not, and
        no part computes again a box its buffer still holds."""
        if ofm is None:  # its consumers roll and need no new rows of it
            return None
        mode = plan.outputs[pid].mode
        if mode == "rolling":
            done = run.rolled.get(pid, 0)
            new_start = max(ofm.start[1], done)
            end = ofm.end[1]
            run.rolled[pid] = max(done, end)
            ofm = Box(
                (ofm.start[0], new_start, *ofm.start[2:]),
                (ofm.shape[0], end - new_start, *ofm.shape[2:]),
            )
        if ofm.empty or ofm in run.computed.get(pid, ()):
            return None
        holds = run.computed.setdefault(pid, set())
        if mode == "window":
            holds.clear()
        holds.add(ofm)
        return ofm

    def _run_stripe(
        self,
        plan: Plan,
        plan_index: int,
        run: _PlanRun,
        pid: int,
        ofm: Box,
        index: int,
        upcoming: Box | None,
    ) -> None:
        """Append the copies stripe `index` of part `pid` needs, then the stripe itself."""
        ifms, padding = self.net.input_boxes(pid, ofm)
        ifm_refs = [self._input_ref(plan, run, pid, slot, box) for slot, box in enumerate(ifms)]
        block = self.block_of(pid)
        channels = weights_buf = bias_buf = None
        if isinstance(self.net.ops[pid], Conv2D):
            channels = (ofm.start[3], ofm.end[3])
            weights_buf, bias_buf = self._constant_loads(plan, run, pid, channels, index)
        if pid in run.window:
            out_buf = run.window[pid]
            if plan.outputs[pid].mode == "window":
                run.origins[out_buf] = ofm.start
            out_origin = run.origins.get(out_buf, (0, 0, 0, 0))
        else:
            out_tid = self.net.graph.parts[pid].output.id
            out_buf = self.whole_tensor(out_tid, plan.outputs[pid].area)
            out_origin = self.net.origin(out_tid)
        self.touch(out_buf)
        # The copies above were appended after the inputs were touched: the inputs must stay
        # live through the stripe itself, not just its copies, or the allocator may place the
        # output over them.
        for _, buf, _ in ifm_refs:
            if buf >= 0:
                self.touch(buf)
        self.steps.append(
            Stripe(
                pid,
                plan_index,
                ofm,
                out_buf,
                out_origin,
                tuple(ifm_refs),
                padding=padding,
                block=block,
                channels=channels,
                weights_buffer=-1 if weights_buf is None else weights_buf,
                bias_buffer=-1 if bias_buf is None else bias_buf,
            )
        )
        if channels is not None and run.alternates and upcoming is not None:
            # The next slice's copy into the other buffer follows this slice's operation, so
            # it runs while this slice computes.
            next_channels = (upcoming.start[3], upcoming.end[3])
            self._constant_loads(plan, run, pid, next_channels, index + 1)

    def _input_ref(
        self, plan: Plan, run: _PlanRun, pid: int, slot: int, box: Box
    ) -> tuple[Box, int, tuple[int, ...]]:
        """(box, buffer, origin) a stripe reads feature-map input `slot` from: its producer's
        interior buffer, a copy made here into the cascade region, or the whole tensor."""
        if scalar_input(self.net.ops[pid], slot):
            return box, -1, (0, 0, 0, 0)
        tensor = self.net.graph.parts[pid].inputs[slot]
        place = plan.placements[pid, slot]
        producer = self.produced_by.get(self.root(tensor.id))
        if producer in run.window:
            buf = run.window[producer]
            self.touch(buf)
            return box, buf, run.origins.get(buf, (0, 0, 0, 0))
        if place.copy:
            buf = run.copies[pid, slot]
            source = self.whole_tensor(tensor.id, "")
            # a pad's border stripe reads nothing: nothing to copy
            if run.held.get(buf) != box and not box.empty:
                self.steps.append(Copy(tensor.id, "feature_map", box, source, buf, pid))
                run.held[buf] = box
            self.touch(buf)
            return box, buf, box.start
        return box, self.whole_tensor(tensor.id, place.area), self.net.origin(tensor.id)

    def _constant_loads(
        self, plan: Plan, run: _PlanRun, pid: int, channels: tuple[int, int], index: int
    ) -> tuple[int | None, int | None]:
        """Copy a convolution's weights and scale-bias of output `channels` for stripe
        `index` where the plan copies them (double-buffered: odd stripes into the second
        buffer), unless the buffer already holds them, and return the buffers the stripe
        reads them from (None: read in place)."""
        part = self.net.graph.parts[pid]
        box = Box((channels[0],), (channels[1] - channels[0],))
        read: dict[str, int] = {}
        for slot, what in ((1, "weights"), (2, "scale_bias")):
            if not plan.placements[pid, slot].copy:
                continue
            odd = bool(run.alternates) and index % 2 == 1
            buf = run.alternates[pid, slot] if odd else run.copies[pid, slot]
            if run.held.get(buf) != box:
                self.steps.append(Copy(part.inputs[slot].id, what, box, -1, buf, pid))
                run.held[buf] = box
            self.touch(buf)
            read[what] = buf
        return read.get("weights"), read.get("scale_bias")

    def _leanest_grid(self, plan: Plan, boxes: list[Box]) -> tuple[list[Box], list[dict[int, Box]]]:
        """The output stripes and each stripe's requirements. In a plan striped down the
        height whose parts roll, the first stripe computes every row its consumers' windows
        reach while later stripes compute only new rows, so the first stripe can set the
        rolling buffers' size. A shorter first stripe (the grid after it shifts with it) can
        trim them: the grid whose interior buffers take the fewest bytes wins, then the one
        with the fewest stripes, then the cascader's own (each stripe costs some cycles)."""
        required = self._plan_requirements(plan, boxes)
        full = self.net.ops[plan.output_part].ofm.shape
        height = boxes[0].shape[1]
        striped_by_height = all(b.shape[a] == full[a] for b in boxes for a in (0, 2, 3))
        if plan.depth_slices or len(boxes) < 2 or height < 2 or not striped_by_height:
            return boxes, required
        if not any(plan.outputs[pid].mode == "rolling" for pid in plan.parts):
            return boxes, required
        best = (self._interior_bytes(plan, required), len(boxes), -height)
        chosen = boxes, required
        for first in range(1, height):
            starts = [0, *range(first, full[1], height)]
            ends = [*starts[1:], full[1]]
            whole = Box.whole(full)
            grid = [_rows_from(whole, lo, hi) for lo, hi in zip(starts, ends, strict=True)]
            needs = self._plan_requirements(plan, grid)
            cost = (self._interior_bytes(plan, needs), len(grid), -first)
            if cost < best:
                best, chosen = cost, (grid, needs)
        return chosen

    def _interior_bytes(self, plan: Plan, required: list[dict[int, Box]]) -> int:
        """The bytes of the plan's interior buffers, framed as `_size_plan_buffers` does."""
        graph = self.net.graph
        total = 0
        for pid in plan.parts:
            if plan.outputs[pid].mode == "tensor" or graph.parts[pid].in_line:
                continue
            frame = _max_shape([r[pid] for r in required if pid in r])
            _, layout, nbytes = self.tensor_shape(graph.parts[pid].output.id)
            total += align(feature_map_bytes(frame, layout, nbytes))
        return total

    def _plan_requirements(self, plan: Plan, boxes: list[Box]) -> list[dict[int, Box]]:
        """Per output stripe, the box of each part's output it needs. A part that rolls
        computes only the rows it has not computed before, so its inputs are asked for what
        those rows read, not what all the rows it holds read: its producers' buffers then
        hold no more rows than a stripe uses (the run loop trims the same way)."""
        required = [self._requirements(plan, box) for box in boxes]
        rolling = frozenset(
            pid
            for pid in plan.parts
            if plan.outputs[pid].mode == "rolling"
            and not self.net.graph.parts[pid].in_line
            and _rolls(self.net.ops[pid].ofm.shape, [r[pid] for r in required if pid in r])
        )
        if not rolling:
            return required
        rolled: dict[int, int] = {}
        trimmed = [self._requirements(plan, box, rolling, rolled) for box in boxes]
        # Every part trimmed for must still roll, or the run loop would compute it whole.
        for pid in rolling:
            if not _rolls(self.net.ops[pid].ofm.shape, [r[pid] for r in trimmed if pid in r]):
                return required
        return trimmed

    def _requirements(
        self,
        plan: Plan,
        box: Box,
        rolling: frozenset[int] = frozenset(),
        rolled: dict[int, int] | None = None,
    ) -> dict[int, Box]:
        """Per part of the plan, the box of its output this output stripe needs; for the
        `rolling` parts, their inputs are asked only for the rows past `rolled` (rows each
        has computed so far, advanced here)."""
        graph, net = self.net.graph, self.net
        need: dict[int, Box] = {plan.output_part: box}
        inside = set(plan.parts)
        for pid in reversed(plan.parts):  # consumers first
            if pid not in need:
                continue
            if resamples(net.ops[pid]):  # whole columns (and rows), any output channels
                n, h, w, _ = net.ops[pid].ofm.shape
                asked = need[pid]
                y0, rows = (
                    (asked.start[1], asked.shape[1]) if stripes_rows(net.ops[pid]) else (0, h)
                )
                need[pid] = Box((0, y0, 0, asked.start[3]), (n, rows, w, asked.shape[3]))
            part = graph.parts[pid]
            computes = need[pid]
            if pid in rolling and rolled is not None:
                done = rolled.get(pid, 0)
                rolled[pid] = max(done, computes.end[1])
                computes = _rows_from(computes, done)
                if computes.empty:
                    continue
            if part.in_line:
                boxes = (Box.whole(net.ops[pid].ifm.shape),)
            else:
                boxes, _ = net.input_boxes(pid, computes)
            for slot, ifm_box in enumerate(boxes):
                tensor = part.inputs[slot]
                producer = self.produced_by.get(tensor.id)
                if ifm_box.empty:  # a copy that writes none of the box reads nothing
                    continue
                if producer in inside and not scalar_input(net.ops[pid], slot):
                    need[producer] = ifm_box.union(need.get(producer))
        return need

    def _size_plan_buffers(self, plan, required_by_stripe, window, copies, alternates) -> None:
        """Make the plan's interior and copy buffers, each framed to the largest box it holds;
        double-buffered weights get two buffers, for the even and the odd depth slices."""
        graph, net = self.net.graph, self.net
        for pid in plan.parts:
            mode = plan.outputs[pid].mode
            if mode == "tensor" or graph.parts[pid].in_line:
                continue
            boxes = [r[pid] for r in required_by_stripe if pid in r]
            frame = _max_shape(boxes)
            full = net.ops[pid].ofm.shape
            if mode == "rolling" and not _rolls(full, boxes):
                mode = "window"  # striped across more than the height: no circular buffer
                plan.outputs[pid] = replace(plan.outputs[pid], mode="window")
            rows = frame[1] if mode == "rolling" else 0
            window[pid] = self.new_buffer(graph.parts[pid].output.id, mode, self.cascade, frame,
                                          rows=rows)  # fmt: skip
        for pid in plan.parts:
            part = graph.parts[pid]
            if part.in_line:
                continue
            op = net.ops[pid]
            boxes = [net.input_boxes(pid, r[pid])[0] for r in required_by_stripe if pid in r]
            for slot, tensor in enumerate(part.inputs):
                place = plan.placements[pid, slot]
                if not place.copy or scalar_input(op, slot):
                    continue
                if slot < len(boxes[0]):
                    frame = _max_shape([b[slot] for b in boxes])
                    copies[pid, slot] = self.new_buffer(tensor.id, "window", self.cascade, frame)
                    continue
                ofm_boxes = [r[pid] for r in required_by_stripe if pid in r]
                parities = (ofm_boxes[::2], ofm_boxes[1::2]) if plan.depth_slices else (ofm_boxes,)
                for target, group in zip((copies, alternates), parities, strict=False):
                    size = self._constant_bytes(pid, slot, group)
                    target[pid, slot] = self.new_buffer(-1, "window", self.cascade, (size,),
                                                        size=size)  # fmt: skip
                    self.buffers[target[pid, slot]].tensor = tensor.id

    def _constant_bytes(self, pid: int, slot: int, ofm_boxes: list[Box]) -> int:
        """The largest encoded weights (slot 1) or scale-bias (slot 2) of any stripe's output
        channel range (a multi-core NPU aligns each core's scale-bias stream)."""
        depth = self.block_of(pid)[2]
        sizes = []
        for box in dict.fromkeys((b.start[3], b.end[3]) for b in ofm_boxes):
            lo, hi = box
            if slot == 1:
                size = self.encoded_size(pid, lo, hi, depth)
                if self._events is not None:
                    self._sizes[pid, lo, hi, depth] = size
                sizes.append(size)
            else:
                sizes.append(scale_bias_bytes(self.memory.accelerator, lo, hi, depth))
        return max(sizes)

    def _choose_blocks(self, plan: Plan, required_by_stripe: list[dict[int, Box]]) -> None:
        """One block config per part, for all its stripes: the fastest under Vela's model for
        the part's largest stripe ("fastest"), or the one the cascader's cost assumed
        ("cascader")."""
        for pid in plan.parts:
            part = self.net.graph.parts[pid]
            if part.in_line:
                continue
            if not isinstance(part, EthosuPart):
                raise ScheduleError(f"part {pid} is not an NPU op")
            op = self.net.ops[pid]
            if self.blocks == "cascader":
                shape = part.block_config(plan.stripe_configs[pid]).output_shape
                self._blocks[pid] = cascader_block(op, shape, self.memory.accelerator)
                continue
            boxes = [r[pid] for r in required_by_stripe if pid in r]
            largest = max(boxes, key=lambda b: (math.prod(b.shape), b.shape))
            if plan.depth_slices:  # Vela picks the block for the whole op, then slices it
                largest = Box.whole(op.ofm.shape)
            ifms, _ = self.net.input_boxes(pid, largest)
            if largest.shape == tuple(op.ofm.shape):  # whole: as Vela sees the op
                ifms = tuple(Box.whole(t.shape) for t in feature_inputs(op))
            areas = (
                self._input_area(plan, pid),
                self._output_area(plan, pid),
                self._weights_area(plan, pid),
            )
            self._blocks[pid] = fastest_block(self.memory, op, largest, ifms, areas)

    def _input_area(self, plan: Plan, pid: int) -> str:
        """Where the part's IFM will be read from."""
        place = plan.placements[pid, 0]
        if place.mode != "tensor" or place.copy:
            return self.cascade
        tid = self.root(self.net.graph.parts[pid].inputs[0].id)
        return self.homes.get(tid, place.area or self.io)

    def _weights_area(self, plan: Plan, pid: int) -> str:
        """Where the NPU reads the part's weights: their copy, or the constants in place."""
        if not isinstance(self.net.ops[pid], Conv2D) or plan.placements[pid, 1].copy:
            return self.cascade
        return self.constants

    def _output_area(self, plan: Plan, pid: int) -> str:
        place = plan.outputs[pid]
        if place.mode != "tensor":
            return self.cascade
        tid = self.root(self.net.graph.parts[pid].output.id)
        return self.homes.get(tid, place.area or self.io)

    def _copying_conv(self, plan: Plan) -> Conv2D | None:
        """The convolution of a one-op plan that copies its weights, scheduled with the
        fastest blocks (the plans `placed` rewrites); else None."""
        op = self.net.ops[plan.output_part]
        if (
            len(plan.parts) != 1
            or self.blocks != "fastest"
            or not isinstance(op, Conv2D)
            or not plan.placements[plan.output_part, 1].copy
        ):
            return None
        return op

    def placed(self, plan: Plan) -> Plan:
        """The plan with its convolution's weights placed by Vela's cycle model
        (`weight_placement`), when it is one op that copies them; remembered per network as
        plan records are (`Network.placements`), since a sweep's schedules ask again for the
        same plans. The model reads the plan, the memory system, the op's feature-map areas
        and some encoded weight sizes; a remembered rewrite is used while those sizes agree
        with this schedule's (`PlacedPlan.holds_for`)."""
        if self._copying_conv(plan) is None:
            return plan
        pid = plan.output_part
        areas = OpAreas(self._input_area(plan, pid), self._output_area(plan, pid))
        key = (plan.key(), self.memory.system, tuple(self.memory.roles.items()), self.blocks,
               areas)  # fmt: skip
        memo = self.net.placements
        found = memo.lookup(key)
        if found is None or not found.holds_for(self.encoded_size):
            found = WeightPlacement(self.net, self.memory, areas, self.encoded_size).placed(plan)
            memo.keep(key, found)
        return found.plan

    def block_of(self, pid: int) -> tuple[int, int, int]:
        """The (h, w, c) block config of every stripe of a part."""
        return self._blocks[pid]

    def pin_io(self) -> None:
        """A function's inputs are written by the host before its first step and its outputs
        read after its last, so they stay live across the whole function. Between NPU
        functions the host runs its operators in the same arena, reading the outputs of one
        function (and maybe graph inputs, for a later operator) while writing the inputs of
        the next, so with several functions every input and output stays live to the end."""
        end = len(self.steps) - 1 if len(self.net.functions) > 1 else -1
        span: dict[int, tuple[int, int]] = {}
        for index, step in enumerate(self.steps):
            function = self.net.function_of[step.part]
            first, _ = span.get(function, (index, index))
            span[function] = (first, index)
        graph = self.net.graph
        for tensor in [*graph.input_tensors, *graph.output_tensors]:
            tid = self.root(tensor.id)
            if tensor.is_constant or tid not in self.tensor_buffer:
                continue
            buf = self.buffers[self.tensor_buffer[tid]]
            parts = [p.id for p in tensor.consumers] + [p.id for p in tensor.producers]
            for function in {self.net.function_of[pid] for pid in parts}:
                first, last = span.get(function, (buf.first, buf.last))
                if tensor in graph.input_tensors:
                    buf.first = min(buf.first, first)
                if tensor in graph.output_tensors:
                    buf.last = max(buf.last, last)
            buf.last = max(buf.last, end)


def _rows_from(box: Box, row: int, stop: int | None = None) -> Box:
    """The part of `box` at or below height `row` (and above `stop`)."""
    start = max(box.start[1], row)
    end = box.end[1] if stop is None else min(box.end[1], stop)
    return Box((box.start[0], start, *box.start[2:]), (box.shape[0], end - start, *box.shape[2:]))


def _rolls(full: tuple[int, ...], boxes: list[Box]) -> bool:
    """Whether a part holding these boxes can roll: every box spans all of its output but
    the height (as `_size_plan_buffers` decides)."""
    frame = _max_shape(boxes)
    return all(frame[a] == full[a] for a in (0, 2, 3))


def _max_shape(boxes: list[Box]) -> tuple[int, ...]:
    return tuple(max(b.shape[a] for b in boxes) for a in range(len(boxes[0].shape)))
