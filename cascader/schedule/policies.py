"""The two schedules of a design point: a chosen cascader Proposal's (cascader on), and the
layer-by-layer copy-constants schedule (cascader off), each built, allocated and checked
against the SRAM pool."""

from __future__ import annotations

from dataclasses import replace

from cascader.core.proposal import Proposal
from cascader.core.stripe_config import StripeConfig
from cascader.ethosu.memory import SystemMemory
from cascader.ir.errors import ScheduleError
from cascader.ir.layout import feature_map_bytes
from cascader.ir.npu_ops import Conv2D
from cascader.ir.schedule import Schedule
from cascader.schedule.allocation import allocate, overlays, written_over
from cascader.schedule.blocks import op_cycles, whole_op_block
from cascader.schedule.builder import Builder, graph_io, tensor_shape
from cascader.schedule.network import Network
from cascader.schedule.plans import (
    Placement,
    Plan,
    agreed_homes,
    inputs_in_place,
    plan_from_proposal_plan,
    plan_order,
    whole_outputs,
)
from cascader.schedule.prebuffering import prebuffer
from cascader.schedule.replay import EncodedSize
from cascader.schedule.weight_buffering import (
    buffer_bytes,
    even_slices,
    reads_weights_in_place,
    weight_depth_slices,
)

__all__ = [
    "ScheduleKey",
    "layer_by_layer_schedule",
    "layer_plans",
    "layer_plans_schedule",
    "plans_schedule",
    "proposal_plans",
    "proposal_schedule",
]


def _finish(builder: Builder, check: bool) -> Schedule:
    """The builder's steps with weights prebuffered under the plan before, allocated. When
    that needs more SRAM than the plain steps, its fallback is the least of: the steps with
    only the prebuffering that keeps the live peak, and the plain steps. With `check`, the
    one that fits the pool, else ScheduleError."""
    steps, buffers = [*builder.steps], [replace(b) for b in builder.buffers]

    def prebuffered(within_peak: bool) -> Schedule | None:
        """The schedule of fresh copies of the built steps and buffers, prebuffered (None:
        nothing moved)."""
        builder.steps, builder.buffers = [*steps], [replace(b) for b in buffers]
        moved = prebuffer(builder.steps, builder.buffers, builder.net.function_of, within_peak)
        return _allocated(builder) if moved else None

    schedule = prebuffered(within_peak=False)
    builder.steps, builder.buffers = [*steps], [replace(b) for b in buffers]
    fallback = _allocated(builder)
    if schedule is None or schedule.sram_bytes <= fallback.sram_bytes:
        schedule = schedule or fallback
    else:
        partial = prebuffered(within_peak=True)
        if partial is not None and partial.sram_bytes <= fallback.sram_bytes:
            fallback = partial
        schedule = replace(schedule, fallback=fallback)
    pool = builder.memory.sram_bytes
    if check:
        schedule = schedule.fitted(pool)
        if schedule.sram_bytes > pool:
            raise ScheduleError(
                f"the schedule needs {schedule.sram_bytes} bytes of SRAM but the pool has {pool}"
            )
    return schedule


def _allocated(builder: Builder) -> Schedule:
    """The builder's steps and buffers, the I/O pinned and every buffer addressed."""
    builder.pin_io()
    shared = set(builder.alias.values())  # tensors whose buffer others write too
    parts = builder.net.graph.parts
    over = written_over(builder.buffers, builder.steps, parts, shared, builder.graph_io)
    laid = overlays(builder.buffers, builder.steps, parts, shared, over)
    extents = allocate(builder.buffers, over, laid)
    return Schedule(
        builder.net,
        builder.memory,
        builder.steps,
        builder.buffers,
        builder.tensor_buffer,
        extents,
    )


def proposal_schedule(
    net: Network,
    proposal: Proposal,
    memory: SystemMemory,
    encoded_size: EncodedSize,
    check: bool = True,
    blocks: str = "fastest",
) -> Schedule:
    """The stripe schedule of a chosen proposal. `encoded_size(part, lo, hi, block_depth)`
    gives the encoded bytes of a part's weights for output channels [lo, hi), which sizes the
    buffers weights are copied into. With `check`, ScheduleError when the SRAM it needs
    exceeds the pool. `blocks` picks each part's block config: the fastest under Vela's
    performance model for its stripes ("fastest"), or the one the cascader's cost assumed
    ("cascader")."""
    plans = proposal_plans(net, proposal, memory)
    return plans_schedule(net, plans, memory, encoded_size, check, blocks)


def proposal_plans(net: Network, proposal: Proposal, memory: SystemMemory) -> list[Plan]:
    """A proposal's plans as the scheduler runs them: all its schedule depends on besides
    the network and the memory system (see `schedule_key`)."""
    return [plan_from_proposal_plan(net, plan, memory) for plan in proposal.plans]


def plans_schedule(
    net: Network,
    plans: list[Plan],
    memory: SystemMemory,
    encoded_size: EncodedSize,
    check: bool = True,
    blocks: str = "fastest",
) -> Schedule:
    """`proposal_schedule` of the proposal whose `proposal_plans` are `plans`, its
    concatenation inputs written in place where the plans hold them whole."""
    net = inputs_in_place(net, whole_outputs(plans), plans)
    builder = Builder(net, memory, encoded_size, blocks)
    builder.homes = agreed_homes(net, plans, builder.root, builder.io)
    plans = [builder.placed(plan) for plan in plans]
    for index, plan in enumerate(plan_order(net, plans)):
        builder.run_plan(plan, index, recorded=True)
    return _finish(builder, check=check)


class ScheduleKey:
    """What a schedule of a network is built from, hashed once: its policy, the memory
    system (the pool aside, which only decides whether it fits) and its plans' keys. Equal
    keys build equal schedules, so option sets, proposals or pools that come to the same
    plans share one schedule and one score."""

    __slots__ = ("_hash", "value")

    def __init__(self, policy: str, memory: SystemMemory, plans: list[Plan], *extra) -> None:
        roles = tuple(sorted(memory.roles.items()))
        self.value = (policy, memory.system, roles, *extra, tuple(p.key() for p in plans))
        self._hash = hash(self.value)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, ScheduleKey)
            and self._hash == other._hash
            and self.value == other.value
        )


def _pinned_io(net: Network) -> list[list]:
    """Per NPU function, the graph tensors live throughout it besides its ops' own: with
    several functions, the outputs of the functions before it and its own inputs (see
    `Builder.pin_io`); with one, none."""
    graph = net.graph
    if len(net.functions) < 2:
        return [[] for _ in net.functions]
    outputs = [[] for _ in net.functions]
    inputs = [[] for _ in net.functions]
    for tensor in graph.output_tensors:
        for part in tensor.producers:
            outputs[net.function_of[part.id]].append(tensor)
    for tensor in graph.input_tensors:
        for part in tensor.consumers:
            if tensor not in inputs[net.function_of[part.id]]:
                inputs[net.function_of[part.id]].append(tensor)
    return [
        [*inputs[f], *(t for earlier in outputs[:f] for t in earlier)]
        for f in range(len(net.functions))
    ]


def _live_roots(net: Network, order: list) -> list[set[int]]:
    """Per op of `order` (model order), the buffers of the feature maps live while it runs
    (as tensors whose buffer holds them): made by it or before it and read by it or after
    it, a graph output to the end. A weight buffer must fit beside all of them: a skip
    connection's tensor stays live across every op it spans."""
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    for index, part in enumerate(order):
        for tensor in (*part.inputs, part.output):
            if not tensor.is_constant:
                root = net.buffer_root(tensor.id)
                first.setdefault(root, index)
                last[root] = index
    for tensor in net.graph.output_tensors:
        last[net.buffer_root(tensor.id)] = len(order) - 1
    live: list[set[int]] = [set() for _ in order]
    for root, start in first.items():
        for index in range(start, last[root] + 1):
            live[index].add(root)
    return live


def layer_by_layer_schedule(
    net: Network,
    memory: SystemMemory,
    encoded_size: EncodedSize,
    feature_maps: str = "io",
    check: bool = True,
    blocks: str = "fastest",
    buffer_weights: bool = True,
) -> Schedule:
    """The copy-constants schedule: every op whole, in model order, its feature maps in the
    `feature_maps` role's area ("io": Vela's arena; "cascade": the SRAM, graph inputs and
    outputs staying in the arena), its weights and scale-bias copied into the cascade area
    right before it where Vela's scheduler would buffer them (`reads_weights_in_place`),
    read in place otherwise. Where Vela would double-buffer them (`weight_depth_slices`) the
    op runs in output-depth slices whose copies alternate between two buffers. Without
    `buffer_weights` every constant is read in place: the least SRAM a layer-by-layer
    schedule can hold (none at all where the feature maps live off-chip, as Vela's
    --optimise Size gives on Dedicated_Sram)."""
    plans = layer_plans(net, memory, encoded_size, feature_maps, buffer_weights)
    return layer_plans_schedule(net, plans, memory, encoded_size, check, blocks)


def layer_plans_schedule(
    net: Network,
    plans: list[Plan],
    memory: SystemMemory,
    encoded_size: EncodedSize,
    check: bool = True,
    blocks: str = "fastest",
) -> Schedule:
    """`layer_by_layer_schedule` of the `layer_plans` `plans`."""
    net = inputs_in_place(net, whole_outputs(plans), plans)
    builder = Builder(net, memory, encoded_size, blocks)
    for index, plan in enumerate(plans):
        builder.run_plan(plan, index)
    return _finish(builder, check=check)


def layer_plans(
    net: Network,
    memory: SystemMemory,
    encoded_size: EncodedSize,
    feature_maps: str = "io",
    buffer_weights: bool = True,
) -> list[Plan]:
    """The plans of `layer_by_layer_schedule`, one op each: the pool decides only which
    weights are read in place and how the others are sliced, so many pools share them."""
    graph = net.graph
    if feature_maps not in ("io", "cascade"):
        raise ValueError(f"feature maps go in the io or cascade area, not {feature_maps!r}")
    area = memory.cascade_area if feature_maps == "cascade" else memory.io_area
    io = graph_io(graph)
    # every op whole: the concatenation inputs its schedule writes in place share buffers
    net = inputs_in_place(net, [p.id for p in graph.parts if not p.in_line])

    def home_of(tid: int) -> str:
        return memory.io_area if net.buffer_root(tid) in io else area

    def sram_bytes(roots: set[int]) -> int:
        return sum(
            feature_map_bytes(*tensor_shape(net, r))
            for r in roots
            if home_of(r) == memory.cascade_area
        )

    pinned = [{net.buffer_root(t.id) for t in f if not t.is_constant} for f in _pinned_io(net)]
    order = [part for part in reversed(graph.parts) if not part.in_line]
    live = _live_roots(net, order)
    plans = []
    slack = 0.0  # cycles of the previous op (of its last slice) a weight copy can hide under
    function = None
    for part, roots in zip(order, live, strict=True):
        op = net.ops[part.id]
        if net.function_of[part.id] != function:  # a function's first op follows no NPU op
            slack, function = 0.0, net.function_of[part.id]
        free = memory.sram_bytes - sram_bytes(roots | pinned[function])
        in_place = not buffer_weights or reads_weights_in_place(
            op, memory, encoded_size, part.id, free
        )
        areas = (home_of(part.inputs[0].id), home_of(part.output.id), memory.cascade_area)
        block = whole_op_block(memory, op, areas)
        slices: tuple[int, ...] = ()
        if isinstance(op, Conv2D) and not in_place:
            sizes = buffer_bytes(memory, encoded_size, part.id, block[2])
            slices = even_slices(op, weight_depth_slices(op, memory, sizes, block, slack, free),
                                  sizes, free)  # fmt: skip
        last = slices[-1] - slices[-2] if slices else op.ofm.shape[3]
        slack = op_cycles(memory, op, block, last)
        placements = {}
        for slot, tensor in enumerate(part.inputs):
            if tensor.is_constant and in_place:
                placements[part.id, slot] = Placement("tensor", memory.constants_area)
            elif tensor.is_constant:
                placements[part.id, slot] = Placement("window", memory.cascade_area, True)
            else:
                placements[part.id, slot] = Placement("tensor", home_of(tensor.id))
        home = home_of(part.output.id)
        whole = StripeConfig(part.output.shape, part.output.shape, part.output.shape,
                             (0,) * len(part.output.shape), (1,) * len(part.output.shape),
                             (0,) * len(part.output.shape))  # fmt: skip
        plans.append(
            Plan(
                parts=(part.id,),
                output_part=part.id,
                output_stripe=op.ofm.shape,
                stripe_configs={part.id: whole},
                placements=placements,
                outputs={part.id: Placement("tensor", home)},
                depth_slices=slices,
            )
        )
    return plans
