"""The network a schedule runs: a model's NPU functions as Vela runs them, their cascader
graph, and per part the NPU op it runs and the index of its function."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property

from cascader.core.graph import CascaderGraph
from cascader.ethosu.graph import build_cascader_graph, dataflow
from cascader.ir.boxes import Box, input_boxes
from cascader.ir.errors import ScheduleError
from cascader.ir.layout import BRICK
from cascader.ir.npu_ops import (
    BinaryElementwise,
    Concatenation,
    Conv2D,
    Identity,
    Layout,
    NpuFunction,
    NpuOp,
    NpuTensor,
    Pooling,
    Tie,
    as_feature_maps,
    feature_inputs,
    feature_maps,
)
from cascader.memo import Memo
from cascader.schedule.concatenations import join_concatenations
from cascader.schedule.in_place import write_in_place
from cascader.schedule.replay import PlanTrace

_READ_BOXES_KEPT = 1 << 16  # (part, output box) -> input boxes per network: tens of MB
_PLAN_RECORDS_KEPT = 4096
_IN_PLACE_VARIANTS_KEPT = 16


@dataclass(frozen=True)
class Network:
    """The model's NPU functions, its cascader graph, and per part the NPU op it runs (feature
    maps 4-D, inputs as the graph reads them) and the index of its function; `ties` maps a
    function's input tensor to the earlier function's output tensor it is (the graph gives
    each function its own)."""

    functions: tuple[NpuFunction, ...]
    graph: CascaderGraph
    ops: tuple[NpuOp, ...]
    function_of: tuple[int, ...]
    ties: dict[int, int] = field(default_factory=dict, compare=False)

    @cached_property
    def co_written(self) -> dict[int, int]:
        """Tensor -> the tensor it is part of, for the block copies of a concatenation: each
        copy writes its slice of one output, but the graph gives every copy its own output
        tensor (the consumers read the last one's)."""
        groups: dict[tuple[int, str], list[int]] = {}
        for part in self.graph.parts:
            op = self.ops[part.id]
            if isinstance(op, Identity) and op.ofm_offset and op.ofm_fill is None:
                groups.setdefault((self.function_of[part.id], op.ofm.name), []).append(part.id)
        merged = {}
        for pids in groups.values():
            final = self.graph.parts[min(pids)].output.id  # the last copy in model order
            for pid in pids:
                if self.graph.parts[pid].output.id != final:
                    merged[self.graph.parts[pid].output.id] = final
        return merged

    @cached_property
    def own_ops(self) -> tuple[NpuOp, ...]:
        """Per part, its op as its function wrote it (feature maps 4-D): each input in the
        shape the op reads it, where `ops` gives the producer's shape (softmax's SUB reads
        the (1, H*W, 1, 1) maxima as (1, H, W, 1))."""
        ops = tuple(as_feature_maps(op) for f in reversed(self.functions) for op in reversed(f.ops))
        for part, (own, graph_op) in enumerate(zip(ops, self.ops, strict=True)):
            if own.name != graph_op.name:
                raise ScheduleError(
                    f"part {part} runs {graph_op.name}, the functions say {own.name}"
                )
        return ops

    @cached_property
    def aliases(self) -> dict[int, int]:
        """Tensor -> the tensor whose buffer holds it: a reshape reads and writes the same
        bytes, the copies of a concatenation write one output (`co_written`), an input of a
        concatenation written in place is part of its output (`offsets` says where), and an
        input that is an earlier function's output is that output (`ties`)."""
        found = {
            p.output.id: p.inputs[0].id
            for p in self.graph.parts
            if p.in_line and p.id not in self._in_place_copies
        }
        found.update(self.co_written)
        found.update(self.ties)
        for pid in self._in_place_copies:  # the input lives in its slice of the output
            part = self.graph.parts[pid]
            found[part.inputs[0].id] = self.co_written.get(part.output.id, part.output.id)
        for tid, holder, _ in self._in_place_inputs:
            found[tid] = holder
        return found

    @cached_property
    def _in_place_copies(self) -> tuple[int, ...]:
        return tuple(
            p.id
            for p in self.graph.parts
            if isinstance(self.ops[p.id], Identity) and self.ops[p.id].operator == "IN_PLACE"
        )

    @cached_property
    def offsets(self) -> dict[int, tuple[int, ...]]:
        """Tensor -> where it starts in the tensor whose buffer holds it, for a
        concatenation's input written in place (every other tensor starts at 0)."""
        found = {
            self.graph.parts[pid].inputs[0].id: tuple(self.ops[pid].ofm_offset)
            for pid in self._in_place_copies
        }
        found.update({tid: offset for tid, _, offset in self._in_place_inputs})
        return found

    @cached_property
    def _in_place_inputs(self) -> tuple[tuple[int, int, tuple[int, ...]], ...]:
        """(input tensor, concatenated tensor, offset there) of each `Concatenation` input
        written in place."""
        found = []
        for part in self.graph.parts:
            op = self.ops[part.id]
            if isinstance(op, Concatenation):
                for slot in op.in_place:
                    offset = (0, 0, 0, op.offsets[slot])
                    found.append((part.inputs[slot].id, part.output.id, offset))
        return tuple(found)

    @cached_property
    def _in_place_variants(self) -> Memo[frozenset[tuple[int, int]], Network]:
        return Memo("Network.in_place_variants", _IN_PLACE_VARIANTS_KEPT)

    def with_inputs_in_place(self, slots: frozenset[tuple[int, int]]) -> Network:
        """The network whose concatenations have the inputs `slots` ((part, input slot))
        written in place (`Concatenation.in_place`), remembered: the schedules of a sweep
        choose few distinct sets, and each network keeps its own plan records."""
        if not slots:
            return self
        found = self._in_place_variants.lookup(slots)
        if found is None:
            ops = list(self.ops)
            for pid in {pid for pid, _ in slots}:
                chosen = tuple(sorted(slot for p, slot in slots if p == pid))
                ops[pid] = replace(ops[pid], in_place=chosen)
            found = replace(self, ops=tuple(ops))
            self._in_place_variants.keep(slots, found)
        return found

    def origin(self, tid: int) -> tuple[int, ...]:
        """The origin of tensor `tid`'s boxes in its whole-tensor buffer: minus its offset
        there, so that a box less the origin is where the buffer holds it."""
        return tuple(-o for o in self.offsets.get(tid, (0, 0, 0, 0)))

    def buffer_root(self, tid: int) -> int:
        """The tensor whose buffer holds tensor `tid` (itself when it has its own)."""
        while tid in self.aliases:
            tid = self.aliases[tid]
        return tid

    @cached_property
    def plan_records(self) -> Memo[tuple, PlanTrace]:
        """Plan records (`replay.PlanTrace`) by (plan, system, roles, block policy, homes of
        its tensors): a sweep's proposals share most of their plans, also those of different
        cascader runs, so a plan that ran on this network is replayed, not run again."""
        return Memo("Network.plan_records", _PLAN_RECORDS_KEPT)

    @cached_property
    def placements(self) -> Memo[tuple, object]:
        """One-op plans as `Builder.placed` rewrites their weights' placement
        (`weight_placement.PlacedPlan`), by (plan, system, roles, block policy, the op's
        feature-map areas)."""
        return Memo("Network.placements", _PLAN_RECORDS_KEPT)

    @cached_property
    def _read_boxes(self) -> Memo[tuple[int, Box], tuple[tuple[Box, ...], tuple[int, ...]]]:
        return Memo("Network.read_boxes", _READ_BOXES_KEPT)

    def input_boxes(self, part: int, ofm: Box) -> tuple[tuple[Box, ...], tuple[int, ...]]:
        """`input_boxes` of the part's op, remembered: a schedule asks for the same boxes
        stripe after stripe, and a sweep's schedules of one network for many of the same."""
        memo = self._read_boxes
        key = (part, ofm)
        found = memo.lookup(key)
        if found is None:
            found = input_boxes(self.ops[part], ofm)
            memo.keep(key, found)
        return found

    def feature_map(self, tid: int) -> NpuTensor:
        """The 4-D feature map behind graph tensor `tid`, as its producer writes it or, for a
        graph input, as its first reader reads it."""
        found = self._feature_maps.get(tid)
        if found is None:
            raise ScheduleError(f"tensor {tid} is not a feature map of any op")
        return found

    @cached_property
    def _feature_maps(self) -> dict[int, NpuTensor]:
        """`feature_map` of every tensor, found once (schedules ask thousands of times): the
        first producer's output in part order, else the first reader's input in execution
        order (parts reversed)."""
        found: dict[int, NpuTensor] = {}
        for part in reversed(self.graph.parts):
            for tensor, read in zip(part.inputs, feature_inputs(self.ops[part.id]), strict=False):
                found.setdefault(tensor.id, read)
        produced: dict[int, NpuTensor] = {}
        for part in self.graph.parts:
            produced.setdefault(part.output.id, self.ops[part.id].ofm)
        found.update(produced)
        return found


def network(
    functions: Sequence[NpuFunction],
    accelerator: str,
    ties: Sequence[Tie] = (),
    narrow_nhwc: bool = False,
) -> Network:
    """The cascader graph of `functions` with the op behind each part (parts are the dataflow's
    ops in reverse order, as build_cascader_graph makes them); `ties` (see
    `cascader.frontend.passes.npu_ties`) become the network's ties. With `narrow_nhwc`, the
    int8 feature maps whose channel count is not a multiple of 16 are stored NHWC (see
    `_vela_layouts`)."""
    functions = [
        write_in_place(join_concatenations(_vela_layouts(f, narrow_nhwc))) for f in functions
    ]
    graph = build_cascader_graph(functions, accelerator)
    flow = list(reversed(dataflow(functions)))
    net = Network(
        tuple(functions),
        graph,
        tuple(as_feature_maps(op) for op, _, _ in flow),
        tuple(key[0] for _, key, _ in flow),
    )
    return replace(net, ties=_tie_tensors(net, ties)) if ties else net


def _tie_tensors(net: Network, ties: Sequence[Tie]) -> dict[int, int]:
    """Graph tensor ids of the ties: function input -> function output."""
    index = {f.name: i for i, f in enumerate(net.functions)}
    inputs: dict[tuple[int, str], int] = {}
    outputs: dict[tuple[int, str], int] = {}
    for tensor in net.graph.input_tensors:
        if tensor.is_constant:
            continue
        for part in tensor.consumers:
            inputs[net.function_of[part.id], net.feature_map(tensor.id).name] = tensor.id
    for tensor in net.graph.output_tensors:
        for part in tensor.producers:
            outputs[net.function_of[part.id], net.feature_map(tensor.id).name] = tensor.id
    found = {}
    for reader, slot, writer, position in ties:
        r, w = index[reader], index[writer]
        key_in = (r, net.functions[r].inputs[slot])
        key_out = (w, net.functions[w].outputs[position])
        if key_in in inputs and key_out in outputs:
            found[inputs[key_in]] = outputs[key_out]
    return found


def _vela_layouts(function: NpuFunction, narrow_nhwc: bool) -> NpuFunction:
    """The function as Vela would run it: NHWC wherever Vela's command-stream checks demand it
    (the input of an int32 REDUCE_SUM, softmax's sum; a tensor read or written from a channel
    that is not a multiple of 16, which NHCWB16 cannot address), and unit strides along axes
    with one output (a global pool's stride is meaningless there, but it would shrink the
    block Vela picks). With `narrow_nhwc`, every int8 feature map whose channel count is not
    a multiple of 16 is NHWC too: 16-channel bricks pad it (8 channels take the bytes of 16),
    so it takes less SRAM unpadded."""
    names = {
        op.ifm.name
        for op in function.ops
        if isinstance(op, Pooling) and op.pool_type == "SUM" and op.ifm.dtype == "int32"
    }
    for op in function.ops:  # brick addresses start at multiples of 16 channels
        if getattr(op, "ifm_offset", ()) and op.ifm_offset[-1] % BRICK:
            names.add(op.ifm.name)
        if getattr(op, "ofm_offset", ()) and op.ofm_offset[-1] % BRICK:
            names.add(op.ofm.name)
    if narrow_nhwc:
        for op in function.ops:
            for tensor in feature_maps(op):
                if len(tensor.shape) == 4 and tensor.shape[-1] % BRICK and tensor.dtype == "int8":
                    names.add(tensor.name)

    def fix(tensor):
        return replace(tensor, layout=Layout.NHWC) if tensor.name in names else tensor

    ops = []
    for op in function.ops:
        slots = ("ifm", "ifm2", "ofm") if isinstance(op, BinaryElementwise) else ("ifm", "ofm")
        op = replace(op, **{slot: fix(getattr(op, slot)) for slot in slots})
        if isinstance(op, Conv2D | Pooling):
            height, width = (1, 1, 1, *op.ofm.shape)[-3:-1]
            k = op.kernel
            kernel = replace(k, stride_h=1 if height == 1 else k.stride_h,
                             stride_w=1 if width == 1 else k.stride_w)  # fmt: skip
            op = replace(op, kernel=kernel)
        ops.append(op)
    return replace(function, ops=tuple(ops))
