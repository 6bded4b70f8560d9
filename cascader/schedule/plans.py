"""A proposal's plans as the scheduler runs them: per plan its parts in execution order, the
output stripe, and how every tensor it touches is held (whole in an area, a window or rolling
rows in the cascade region, copied in first or read in place); one home per whole tensor; and
an order of the plans that respects their dataflow."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from cascader.core.part import BufferMode
from cascader.core.stripe_config import StripeConfig
from cascader.core.tensor_config import TensorConfig, TensorConfigState
from cascader.ethosu.memory import SystemMemory
from cascader.ir.boxes import Box
from cascader.ir.errors import ScheduleError
from cascader.ir.layout import BRICK
from cascader.ir.npu_ops import Concatenation, Identity, Layout
from cascader.schedule.network import Network


def nhwc_stripe(config: StripeConfig, layout: Layout, channels: int) -> tuple[int, ...]:
    """A stored-layout stripe shape as NHWC."""
    s = config.shape
    if layout == Layout.NHCWB16:
        return (s[0], s[1], s[3], min(s[2] * BRICK, channels))
    return tuple((1, 1, 1, *s)[-4:])


def output_boxes(shape: tuple[int, ...], stripe: tuple[int, ...], layout: Layout) -> list[Box]:
    """The output stripes of a plan in TVM's tile_nd loop order: the stored axes in order
    (n, h, w, c for NHWC; n, h, c/16, w for NHCWB16)."""
    stripe = tuple(min(max(s, 1), e) for s, e in zip(stripe, shape, strict=True))
    order = (0, 1, 3, 2) if layout == Layout.NHCWB16 else (0, 1, 2, 3)
    boxes = []
    start = [0, 0, 0, 0]
    # The last axis of `order` varies fastest, as in nested loops.
    for starts in itertools.product(*(range(0, shape[a], stripe[a]) for a in order)):
        for axis, value in zip(order, starts, strict=True):
            start[axis] = value
        boxes.append(
            Box(tuple(start), tuple(min(stripe[a], shape[a] - start[a]) for a in range(4)))
        )
    return boxes


@dataclass(frozen=True)
class Placement:
    """How one tensor is held during a plan: `mode` "tensor" (whole, in `area`), "window" or
    "rolling" (interior, in the cascade area), and for inputs whether it is first copied into
    the cascade area from its `home`."""

    mode: str
    area: str
    copy: bool = False
    home: str = ""


@dataclass(frozen=True)
class Plan:
    parts: tuple[int, ...]  # execution order: producers first
    output_part: int
    output_stripe: tuple[int, ...]  # NHWC
    stripe_configs: dict[int, StripeConfig]  # per part: its output stripe config
    placements: dict[tuple[int, int], Placement]  # (part, input slot) -> placement
    outputs: dict[int, Placement]  # per part: its output's placement
    depth_slices: tuple[int, ...] = ()  # double-buffered weights: OFM depth slice bounds
    upward: bool = False  # stripes in reverse row order, the output laid above its input

    def key(self) -> tuple:
        """Everything running the plan reads from it, hashable (the dicts as sorted items)."""
        return (self.parts, self.output_part, self.output_stripe,
                tuple(sorted(self.stripe_configs.items())), tuple(sorted(self.placements.items())),
                tuple(sorted(self.outputs.items())), self.depth_slices,
                self.upward)  # fmt: skip


def plan_from_proposal_plan(net: Network, plan, memory: SystemMemory) -> Plan:
    graph = net.graph
    ids = sorted(plan.part_ids, reverse=True)
    produced = {graph.parts[i].output.id: i for i in ids}
    # A tensor several parts of the plan read has a config per reader: its producer's output
    # config covers them all (`core.plan_generation.covers`), so it has the largest stripe.
    interior: dict[int, TensorConfig] = {}
    for config in plan.tensor_configs:
        if config.tensor.id in produced and config.state == TensorConfigState.INTERIOR:
            held = interior.get(config.tensor.id)
            if held is None or _stripe_size(config) >= _stripe_size(held):
                interior[config.tensor.id] = config
    out_config = plan.output_config
    output_part = produced[out_config.tensor.id]
    cascade = memory.cascade_area
    # written by several copies, or in place into a concatenation: kept whole
    concatenated = set(net.co_written.values()) | set(net.offsets)
    # What a graph output is a view of (a reshape's input) is the host's to read: whole, in
    # the arena, though the cascader may have planned it as a plan's interior.
    host_read = {net.buffer_root(t.id) for t in graph.output_tensors} - {
        t.id for t in graph.output_tensors
    }
    stripe_configs: dict[int, StripeConfig] = {}
    outputs: dict[int, Placement] = {}
    for i in ids:
        tid = graph.parts[i].output.id
        config = out_config if tid == out_config.tensor.id else interior.get(tid)
        if config is None:
            raise ScheduleError(f"plan {plan.part_ids}: no config for tensor {tid}")
        stripe_configs[i] = config.stripe_configs[0]
        if tid in host_read and config.state != TensorConfigState.BOUNDARY:
            outputs[i] = Placement("tensor", memory.io_area)
        elif config.state == TensorConfigState.BOUNDARY or tid in concatenated:
            home = config.home_region if config.state == TensorConfigState.BOUNDARY else cascade
            outputs[i] = Placement("tensor", home)
        else:
            # a pad fills its output buffer before each stripe: it cannot keep earlier rows
            fills = isinstance(net.ops[i], Identity) and net.ops[i].ofm_fill is not None
            rolling = config.buffer_mode == BufferMode.ROLLING and not fills
            outputs[i] = Placement("rolling" if rolling else "window", cascade)
    by_tensor: dict[int, list[TensorConfig]] = {}
    for config in plan.tensor_configs:
        if config.tensor.id not in produced:
            by_tensor.setdefault(config.tensor.id, []).append(config)
    placements: dict[tuple[int, int], Placement] = {}
    for i in ids:
        part = graph.parts[i]
        wanted = part.input_stripe_configs(stripe_configs[i])
        for slot, (tensor, sc) in enumerate(zip(part.inputs, wanted, strict=True)):
            if tensor.id in produced:
                placements[i, slot] = outputs[produced[tensor.id]]
                continue
            candidates = by_tensor.get(tensor.id, [])
            match = next((c for c in candidates if c.stripe_configs[0] == sc), None)
            match = match or (candidates[0] if candidates else None)
            if match is None or not match.copy_tensor:
                home = match.home_region if match is not None else None
                placements[i, slot] = Placement("tensor", home or "")
            else:
                placements[i, slot] = Placement(
                    "window", match.copy_region, copy=True, home=match.home_region
                )
    out_layout = net.ops[output_part].ofm.layout
    out_stripe = nhwc_stripe(
        out_config.stripe_configs[0], out_layout, net.ops[output_part].ofm.shape[3]
    )
    return Plan(tuple(ids), output_part, out_stripe, stripe_configs, placements, outputs,
                upward=plan.upward)  # fmt: skip


def _stripe_size(config: TensorConfig) -> int:
    return math.prod(config.stripe_configs[0].shape)


def whole_outputs(plans: Sequence[Plan]) -> set[int]:
    """The parts whose output the plans hold whole."""
    return {pid for plan in plans for pid, place in plan.outputs.items() if place.mode == "tensor"}


def inputs_in_place(net: Network, whole: Collection[int], plans: Sequence[Plan] = ()) -> Network:
    """The network with each concatenation input that its producer can write straight into
    its slice of the concatenated tensor written there (`Concatenation.in_place`), as Vela's
    scheduler has it: the input then takes no buffer of its own and is not copied. That
    needs both tensors held whole (`whole`: the parts whose outputs are), which only the
    schedule's plans say: a concatenation striped inside a cascade has no whole output to
    write into, and an input striped inside one is never whole. Besides, only an input that
    the concatenation alone reads (else the whole concatenated tensor would be live from its
    producer on, where copying it late costs a fraction of that), that an NPU op computes (a
    copy's bytes are a copy's), stored as the concatenated tensor is (bricks starting at a
    whole brick), and that no plan in `plans` copies into the cascade area first."""
    graph = net.graph
    producer = {p.output.id: p.id for p in graph.parts}
    outputs = {t.id for t in graph.output_tensors}
    copied = {key for plan in plans for key, place in plan.placements.items() if place.copy}
    chosen = set()
    for part in graph.parts:
        op = net.ops[part.id]
        if not isinstance(op, Concatenation) or part.id not in whole:
            continue
        for slot, (tensor, copy) in enumerate(zip(part.inputs, op.copies, strict=True)):
            made_by = producer.get(tensor.id)
            if made_by is None or made_by not in whole or (part.id, slot) in copied:
                continue
            written = net.ops[made_by].ofm
            if (
                isinstance(net.ops[made_by], Identity | Concatenation)
                or net.function_of[made_by] != net.function_of[part.id]
                or len(tensor.consumers) != 1
                or sum(t.id == tensor.id for t in part.inputs) != 1
                or tensor.id in outputs
                or tensor.id in net.aliases
                or copy.operator != "COPY"
                or (written.dtype, written.layout) != (op.ofm.dtype, op.ofm.layout)
                or (op.ofm.layout == Layout.NHCWB16 and op.offsets[slot] % BRICK)
            ):
                continue
            chosen.add((part.id, slot))
    return net.with_inputs_in_place(frozenset(chosen))


def agreed_homes(
    net: Network, plans: list[Plan], root: Callable[[int], int], io: str
) -> dict[int, str]:
    """One home per whole tensor. Plans choose BOUNDARY homes independently, so a producer
    may home a tensor in the SRAM while a consumer expects it in the arena; the cascader then
    budgets it only where SRAM is said, so it stays in SRAM only when every plan says so
    (else in `io`). `root`: the tensor whose buffer a tensor shares (reshapes, concats)."""
    votes: dict[int, set[str]] = {}
    graph = net.graph
    for plan in plans:
        for pid, place in plan.outputs.items():
            if place.mode == "tensor":
                votes.setdefault(root(graph.parts[pid].output.id), set()).add(place.area)
        for (pid, slot), place in plan.placements.items():
            tensor = graph.parts[pid].inputs[slot]
            home = place.home if place.copy else place.area if place.mode == "tensor" else ""
            if home and not tensor.is_constant:
                votes.setdefault(root(tensor.id), set()).add(home)
    return {tid: areas.pop() if len(areas) == 1 else io for tid, areas in votes.items()}


def plan_order(net: Network, plans: list[Plan]) -> list[Plan]:
    """Plans in an order where every plan runs after the plans producing its inputs (Kahn's
    algorithm), function by function (the host runs between them); ties by the highest part
    id, i.e. earliest in the model."""
    graph = net.graph
    owner = {graph.parts[i].output.id: k for k, p in enumerate(plans) for i in p.parts}
    co_writers: dict[int, list[int]] = {}
    for tid, final in net.co_written.items():
        co_writers.setdefault(final, []).append(tid)
    needs = []
    for k, plan in enumerate(plans):
        inside = {graph.parts[i].output.id for i in plan.parts}
        deps = {
            owner[t.id]
            for i in plan.parts
            for t in graph.parts[i].inputs
            if t.id in owner and t.id not in inside
        }
        # the copy that completes a concatenation runs after the other copies into it
        for i in plan.parts:
            deps |= {owner[t] for t in co_writers.get(graph.parts[i].output.id, ())}
        needs.append(deps - {k})
    done: set[int] = set()
    order = []
    while len(order) < len(plans):
        ready = [k for k in range(len(plans)) if k not in done and needs[k] <= done]
        if not ready:
            raise ScheduleError("the proposal's plans depend on each other in a cycle")
        k = min(ready, key=lambda k: (net.function_of[plans[k].parts[0]], -max(plans[k].parts)))
        done.add(k)
        order.append(plans[k])
    return order
